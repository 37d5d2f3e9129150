// main() of every GPU test binary: without a CUDA device the suite reports
// "skipped" (exit 77 for Meson), never "passed".
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "hisparse/runtime/device.hpp"

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): GPU tests skipped\n", err == cudaSuccess ? "none found" : cudaGetErrorString(err));
    return 77;
  }
  // Node pools built on the GPU start as 0xA5 bytes instead of whatever the
  // allocation held (often zeros): a byte no build step writes then shows in
  // the byte-for-byte comparisons with the host builder.
  setenv("HISPARSE_POISON_POOLS", "1", 0);
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  // The runtime keeps small freed blocks for reuse; give them back so that
  // compute-sanitizer's leak check (--leak-check full) sees only real leaks.
  hisparse::runtime::release_cached_memory();
  return status;
}
