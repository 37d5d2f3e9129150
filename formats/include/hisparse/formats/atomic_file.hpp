#pragma once
// Every output of the library and the tool goes through write_file_atomically.
// What happens depends on what the target path names (docs/reliability.md,
// "Outputs"):
//
// - Nothing yet, or a regular file: the content goes to a temporary file
//   beside it (`<name>.tmp<random>`), which is renamed over the target only
//   after everything was written. A failure (an exception from `write`, a
//   failed write, a signal) leaves the target as it was and no temporary file.
//   A replaced file keeps its permission bits, and its owner and group where
//   the process may set them; a new file gets 0666 less the umask.
// - A symbolic link: followed to its final target, which is replaced as
//   above; the link stays a link.
// - Something else that can be opened for writing (a character or block
//   device, a FIFO, /dev/stdout and other /proc/self/fd links): written
//   through directly, with no temporary file and no rename, so a failure part
//   way leaves whatever was written. Nothing can make such a write all or
//   nothing. A regular file reached through a /proc link is appended to.
// - A directory: an error.
//
// Writes are checked as they happen: the first failed write throws
// hisparse::Error ("target: write failed (errno text)") out of the stream
// given to `write`, so a full disk stops the work at once rather than at the
// end. `write` must not clear the stream's exception mask.
//
// While a temporary file exists, SIGINT, SIGTERM, SIGHUP and SIGXFSZ remove it
// before the process dies of the signal (the handlers are installed on first
// use, only for signals still at their default action; an ignored or handled
// signal is left alone). Renaming does not sync the data to disk: the
// guarantee is against failures of the process, not of the machine.
#include <filesystem>
#include <functional>
#include <ostream>

namespace hisparse {

void write_file_atomically(const std::filesystem::path& target,
                           const std::function<void(std::ostream&)>& write);

// Checks, before long work, that write_file_atomically(target, ...) can get
// started: the target is not a directory, and a temporary file can be
// created beside it (one is made and removed at once). Throws hisparse::Error
// naming target otherwise. Targets that are written through directly are not
// opened (opening a FIFO would wait for a reader).
void check_output_writable(const std::filesystem::path& target);

}  // namespace hisparse
