// Built when the project is configured without CUDA.
#include "device.hpp"

namespace hisparse::cli {
bool gpu_available() { return false; }
}  // namespace hisparse::cli

#include "gpu_ops.hpp"
#include "hisparse/formats/error.hpp"

namespace hisparse::cli {
template <class V>
void gpu_spmv(const Matrix<V>&, std::span<const V>, std::span<V>, V, V) {
  throw Error("this build has no GPU support (configure with -Dcuda=enabled)");
}
template void gpu_spmv(const Matrix<float>&, std::span<const float>, std::span<float>, float, float);
template void gpu_spmv(const Matrix<double>&, std::span<const double>, std::span<double>, double, double);
template <class V>
Matrix<V> gpu_add(const Matrix<V>&, const Matrix<V>&, V, V) {
  throw Error("this build has no GPU support (configure with -Dcuda=enabled)");
}
template Matrix<float> gpu_add(const Matrix<float>&, const Matrix<float>&, float, float);
template Matrix<double> gpu_add(const Matrix<double>&, const Matrix<double>&, double, double);
template <class V>
Matrix<V> gpu_build(const Coo<V>&, const BuildOptions&) {
  throw Error("this build has no GPU support (configure with -Dcuda=enabled)");
}
template Matrix<float> gpu_build(const Coo<float>&, const BuildOptions&);
template Matrix<double> gpu_build(const Coo<double>&, const BuildOptions&);
template <class V>
Matrix<V> gpu_edit(const Matrix<V>&, const Coo<V>&, ops::EditMode, ops::EditStats*) {
  throw Error("this build has no GPU support (configure with -Dcuda=enabled)");
}
template Matrix<float> gpu_edit(const Matrix<float>&, const Coo<float>&, ops::EditMode, ops::EditStats*);
template Matrix<double> gpu_edit(const Matrix<double>&, const Coo<double>&, ops::EditMode, ops::EditStats*);
}  // namespace hisparse::cli

namespace hisparse::cli {
bool gpu_demo(const DemoBuild<float>&, const DemoBuild<double>&, const BuildOptions&) {
  throw Error("this build has no GPU support (configure with -Dcuda=enabled)");
}
}  // namespace hisparse::cli

#include "bench.hpp"

namespace hisparse::cli {
template <class V>
std::vector<BenchRecord> bench_spmv(const Matrix<V>&, const std::string&, const BenchOptions&) {
  throw Error("this build has no GPU support (configure with -Dcuda=enabled)");
}
template std::vector<BenchRecord> bench_spmv(const Matrix<float>&, const std::string&, const BenchOptions&);
template std::vector<BenchRecord> bench_spmv(const Matrix<double>&, const std::string&, const BenchOptions&);
template <class V>
std::vector<BenchRecord> bench_add(const Matrix<V>&, const Matrix<V>&, const std::string&, const BenchOptions&) {
  throw Error("this build has no GPU support (configure with -Dcuda=enabled)");
}
template std::vector<BenchRecord> bench_add(const Matrix<float>&, const Matrix<float>&, const std::string&,
                                            const BenchOptions&);
template std::vector<BenchRecord> bench_add(const Matrix<double>&, const Matrix<double>&, const std::string&,
                                            const BenchOptions&);
template <class V>
std::vector<BenchRecord> bench_conversion_gpu(const Matrix<V>&, const std::string&, const BenchOptions&, int) {
  throw Error("this build has no GPU support (configure with -Dcuda=enabled)");
}
template std::vector<BenchRecord> bench_conversion_gpu(const Matrix<float>&, const std::string&, const BenchOptions&,
                                                       int);
template std::vector<BenchRecord> bench_conversion_gpu(const Matrix<double>&, const std::string&, const BenchOptions&,
                                                       int);
}  // namespace hisparse::cli
