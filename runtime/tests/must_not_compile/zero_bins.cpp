#include "common.hpp"
using Setup = rt::QueueSetup<256, rt::ProcedureQueues<A, 0>>;
int main() { return static_cast<int>(Setup::queue_count); }
