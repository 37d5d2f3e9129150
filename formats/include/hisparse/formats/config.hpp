#pragma once
// Host/device annotation for the few functions (node layout, node views) that
// the GPU operations share with the host. A macro is the only way to spell an
// execution-space qualifier that g++ does not know.
#if defined(__CUDACC__)
#define HISPARSE_HD __host__ __device__
#else
#define HISPARSE_HD
#endif
