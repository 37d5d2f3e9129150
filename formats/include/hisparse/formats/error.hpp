#pragma once
// One exception type for everything the library rejects: bad files, bad
// arguments, limits exceeded. The message always says what and where.
#include <stdexcept>
#include <string>

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

}  // namespace hisparse
