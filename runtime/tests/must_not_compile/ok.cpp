#include "common.hpp"
using Setup = rt::QueueSetup<256, rt::ProcedureQueues<A, 2>, rt::ProcedureQueues<B>>;
static_assert(Setup::queue_count == 3);
int main() { return Setup::describe().queue_count() == 3 ? 0 : 1; }
