// The `hisparse` command line (contract: shared/design/cli.md). Exit codes:
// 0 success, 1 the work failed (one message on stderr), 2 a usage error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "hisparse/formats/error.hpp"
#include "matrix_io.hpp"

int main(int argc, char** argv) {
  CLI::App app{"hisparse: hierarchical sparse matrices (HiSparse) on the GPU and the host"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hisparse 0.1.0");
  hisparse::cli::add_info_command(app);
  hisparse::cli::add_convert_command(app);
  hisparse::cli::add_spmv_command(app);
  hisparse::cli::add_add_command(app);
  hisparse::cli::add_demo_command(app);
  hisparse::cli::add_bench_command(app);
  hisparse::cli::add_gen_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const hisparse::cli::UsageError& e) {
    std::fprintf(stderr, "hisparse: usage error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hisparse: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
