#pragma once
// Each subcommand of the `hisparse` tool registers itself on the CLI11 app
// and runs through the callback it sets (contract: shared/design/cli.md).
#include <CLI/CLI.hpp>

namespace hisparse::cli {

void add_info_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_spmv_command(CLI::App& app);
void add_add_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_gen_command(CLI::App& app);
void add_edit_command(CLI::App& app);

}  // namespace hisparse::cli
