// The GPU side of the op packages that need no runtime (conversion, the batch
// edit, which builds with the conversion's builder), compiled as one whole
// program with CUB wrapped in its own namespace (ops/meson.build): one unit,
// so that the conversion kernels both use are defined once. Op packages keep
// their .cu files in their own folders and are listed here.
#include "convert/gpu/convert_gpu.cu"
#include "edit/gpu/edit_gpu.cu"
