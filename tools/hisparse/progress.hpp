#pragma once
// A one-line progress display on stderr for long reads and conversions:
//
//   reading A.mtx: 41% (512 MB of 1.2 GB)
//   building on the GPU (0.4 s)
//   writing B.hsp (1.1 s)
//
// rewritten in place (\r, then erase to the end of the line) by a helper
// thread, at most ten times a second, and only when stderr is a terminal
// (isatty(2)): piped or redirected, nothing at all is written. Work that ends
// quickly shows nothing either: the line appears once the work has taken
// `delay` (0.3 s; HISPARSE_PROGRESS_DELAY_MS overrides it, for tests). finish()
// replaces it with a summary and a newline; destroyed without finish() (an
// error is on its way), it erases the line, so the message starts on a clean
// one.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hisparse::cli {

class Progress {
 public:
  static constexpr std::chrono::milliseconds default_delay{300};

  // On when stderr is a terminal, with the default delay (or the environment's).
  Progress();
  // On only where `enabled`; the line appears after `delay`.
  Progress(bool enabled, std::chrono::milliseconds delay);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  [[nodiscard]] bool enabled() const { return enabled_; }

  // Starts a phase ("reading A.mtx", "building on the GPU", "writing B.hsp"):
  // the previous one ends and its time goes into the summary. Shown with its
  // elapsed time until bytes() says more. The text is shown escaped
  // (printable_text).
  void phase(const std::string& text);
  // Bytes of the current phase done, of total (0: unknown, e.g. a FIFO).
  // Cheap: only stores the numbers; the helper thread draws them.
  void bytes(std::uint64_t done, std::uint64_t total);
  // A message of its own line (e.g. a fallback note), on stderr whether or
  // not it is a terminal; the progress line goes on below it.
  void note(const std::string& text);
  // Ends the display. Where the line was shown (or the delay has passed), it
  // becomes "HEADLINE in 2.3 s (reading A.mtx 1.9 s, building on the GPU
  // 0.1 s, writing B.hsp 0.3 s)" and a newline; with an empty headline it is
  // erased instead. Later calls do nothing.
  void finish(const std::string& headline);

  // "512 MB", "1.2 GB", "900 B": decimal units, three significant digits at most.
  static std::string human_bytes(std::uint64_t n);

 private:
  using clock = std::chrono::steady_clock;
  void run();
  void draw_locked(bool force);
  std::string line_locked() const;
  void stop_thread();

  bool enabled_ = false;
  std::chrono::milliseconds delay_;
  clock::time_point start_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false, finished_ = false, shown_ = false;
  std::string phase_;
  clock::time_point phase_start_;
  std::uint64_t done_ = 0, total_ = 0;
  bool have_bytes_ = false;
  std::string drawn_;  // the line as last drawn
  std::vector<std::pair<std::string, double>> phases_;  // finished phases and their seconds
  std::thread thread_;
};

}  // namespace hisparse::cli
