#include "common.hpp"
struct P {
    using payload_type = std::string;
    static constexpr std::uint32_t threads_per_item = 1;
};
using Setup = rt::QueueSetup<256, rt::ProcedureQueues<P>>;
int main() { return static_cast<int>(Setup::queue_count); }
