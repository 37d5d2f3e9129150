#pragma once
// One exception type for everything the library rejects: bad files, bad
// arguments, limits exceeded. The message always says what and where.
#include <stdexcept>
#include <string>
#include <string_view>

namespace hisparse {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Raised when an input exceeds a documented limit of the format (see
// docs/format.md, "Limits").
class LimitError : public Error {
 public:
  using Error::Error;
};

// Input text as it may appear in a message: printable ASCII and valid UTF-8
// pass through; control bytes (C0, DEL, C1), bytes that are not valid UTF-8
// and the bidirectional-override code points are written as escapes (\x1b,
// \t, \u202e), and a backslash as \\, so what is shown is unambiguous and a
// terminal escape sequence in a hostile file or file name stays inert. Every
// message of the library that quotes input text (tokens, file names) goes
// through it (docs/reliability.md, "Error messages").
std::string printable_text(std::string_view text);

}  // namespace hisparse
