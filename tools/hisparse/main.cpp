// The `hisparse` command line (contract: shared/design/cli.md). Exit codes:
// 0 success, 1 the work failed (one message on stderr), 2 a usage error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

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
  hisparse::cli::add_edit_command(app);
  hisparse::cli::add_demo_command(app);
  hisparse::cli::add_bench_command(app);
  hisparse::cli::add_gen_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's messages repeat the raw arguments ("The following argument was
    // not expected: ..."), so what it says is shown escaped (printable_text),
    // like every other message; its own trailer ("Run with --help ...") and
    // line ends are kept as they are.
    std::ostringstream err;
    app.exit(e, std::cout, err);
    const std::string text = err.str(), what = e.what();
    // The message comes first; what follows is CLI11's own text. Should the
    // format ever differ, all of it is escaped (line ends included).
    const std::size_t n = text.compare(0, what.size(), what) == 0 ? what.size() : text.size();
    std::string shown = hisparse::printable_text(std::string_view(text).substr(0, n)) + text.substr(n);
    if (!shown.empty() && shown.back() != '\n') shown += '\n';
    std::fputs(shown.c_str(), stderr);
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
