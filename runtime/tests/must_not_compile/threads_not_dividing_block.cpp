#include "common.hpp"
struct P {
    using payload_type = Item;
    static constexpr std::uint32_t threads_per_item = 512;
};
using Setup = rt::QueueSetup<256, rt::ProcedureQueues<P>>;
int main() { return static_cast<int>(Setup::queue_count); }
