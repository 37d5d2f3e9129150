#include "common.hpp"
struct Huge {
    std::uint64_t words[9];  // 72 bytes
};
struct P {
    using payload_type = Huge;
    static constexpr std::uint32_t threads_per_item = 1;
};
using Setup = rt::QueueSetup<256, rt::ProcedureQueues<P>>;
int main() { return static_cast<int>(Setup::queue_count); }
