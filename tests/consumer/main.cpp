// Builds a small matrix through the public headers, multiplies it by x and by
// x transposed with the reference SpMV, and checks the results by hand.
#include <cstdio>
#include <vector>

#include "hisparse/formats/builder.hpp"
#include "hisparse/formats/validate.hpp"
#include "hisparse/ops/spmv_reference.hpp"

int main() {
  // A = [[1 2 0], [0 0 3]]
  hisparse::Coo<double> coo{2, 3, {0, 0, 1}, {0, 1, 2}, {1.0, 2.0, 3.0}};
  const auto a = hisparse::build_matrix(coo, 2);
  hisparse::validate(a.content());
  std::vector<double> x{1.0, 10.0, 100.0}, y(2);
  hisparse::ops::spmv_reference<double>(a, x, y);
  std::vector<double> xt{1.0, 2.0}, yt(3);
  hisparse::ops::spmv_reference<double>(a.transpose(), xt, yt);
  const bool ok = y[0] == 21.0 && y[1] == 300.0 && yt[0] == 1.0 && yt[1] == 2.0 && yt[2] == 6.0;
  std::printf("consumer: y = [%g %g], A^T x = [%g %g %g]: %s\n", y[0], y[1], yt[0], yt[1], yt[2], ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
