#pragma once
// Output files are written completely or not at all: the content goes to a
// temporary file beside the target, which is renamed over it only after a
// successful flush. A failure leaves the target untouched.
#include <filesystem>
#include <functional>
#include <ostream>

namespace hisparse {

void write_file_atomically(const std::filesystem::path& target,
                           const std::function<void(std::ostream&)>& write);

}  // namespace hisparse
