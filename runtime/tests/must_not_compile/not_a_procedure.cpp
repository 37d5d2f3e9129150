#include "common.hpp"
struct NoThreads {
    using payload_type = Item;
};
using Setup = rt::QueueSetup<256, rt::ProcedureQueues<NoThreads>>;
int main() { return static_cast<int>(Setup::queue_count); }
