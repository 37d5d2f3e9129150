#include "progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "hisparse/formats/error.hpp"

namespace hisparse::cli {
namespace {

std::chrono::milliseconds delay_from_environment() {
  if (const char* s = std::getenv("HISPARSE_PROGRESS_DELAY_MS"); s && *s) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (*end == '\0' && v >= 0) return std::chrono::milliseconds(v);
  }
  return Progress::default_delay;
}

// The terminal's width, so that a long line is cut rather than wrapped (a
// wrapped line cannot be rewritten in place with \r).
std::size_t terminal_columns() {
  winsize w{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

void write_stderr(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1f s" : "%.0f s", s);
  return buf;
}

constexpr const char* erase_line = "\r\033[K";

}  // namespace

Progress::Progress() : Progress(::isatty(STDERR_FILENO) == 1, delay_from_environment()) {}

Progress::Progress(bool enabled, std::chrono::milliseconds delay)
    : enabled_(enabled), delay_(delay), start_(clock::now()), phase_start_(start_) {
  if (enabled_) thread_ = std::thread([this] { run(); });
}

Progress::~Progress() {
  stop_thread();
  if (enabled_ && !finished_ && shown_) write_stderr(erase_line);
}

void Progress::stop_thread() {
  {
    const std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string Progress::human_bytes(std::uint64_t n) {
  static constexpr const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 999.5 && u < 5) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  else std::snprintf(buf, sizeof buf, v < 9.95 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

void Progress::phase(const std::string& text) {
  if (!enabled_) return;
  const std::lock_guard lock(m_);
  const auto now = clock::now();
  if (!phase_.empty()) phases_.emplace_back(phase_, std::chrono::duration<double>(now - phase_start_).count());
  phase_ = printable_text(text);
  phase_start_ = now;
  have_bytes_ = false;
  done_ = total_ = 0;
}

void Progress::bytes(std::uint64_t done, std::uint64_t total) {
  if (!enabled_) return;
  const std::lock_guard lock(m_);
  done_ = done;
  total_ = total;
  have_bytes_ = true;
}

void Progress::note(const std::string& text) {
  if (!enabled_) {
    write_stderr(text + "\n");
    return;
  }
  const std::lock_guard lock(m_);
  if (shown_) {
    write_stderr(std::string(erase_line) + text + "\n");
    drawn_.clear();
    draw_locked(true);
  } else {
    write_stderr(text + "\n");
  }
}

std::string Progress::line_locked() const {
  std::string s = phase_;
  if (have_bytes_) {
    if (total_ > 0) {
      const double pct = 100.0 * static_cast<double>(std::min(done_, total_)) / static_cast<double>(total_);
      char buf[16];
      std::snprintf(buf, sizeof buf, "%.0f%%", std::min(pct, 100.0));
      s += ": " + std::string(buf) + " (" + human_bytes(done_) + " of " + human_bytes(total_) + ")";
    } else {
      s += ": " + human_bytes(done_);
    }
  } else if (!s.empty()) {
    const double t = std::chrono::duration<double>(clock::now() - phase_start_).count();
    s += " (" + seconds_text(t) + ")";
  }
  return s;
}

void Progress::draw_locked(bool force) {
  if (phase_.empty()) return;
  if (!force && clock::now() - start_ < delay_) return;
  std::string s = line_locked();
  const std::size_t cols = terminal_columns();
  if (s.size() >= cols) {
    std::size_t keep = cols > 4 ? cols - 4 : 0;
    // Not inside a UTF-8 sequence (printable_text keeps valid ones).
    while (keep > 0 && (static_cast<unsigned char>(s[keep]) & 0xC0) == 0x80) --keep;
    s.resize(keep);
    s += "...";
  }
  if (s == drawn_) return;
  write_stderr(erase_line + s);
  drawn_ = std::move(s);
  shown_ = true;
}

void Progress::run() {
  std::unique_lock lock(m_);
  // Ten updates a second at most: one draw per wake-up.
  while (!cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; })) draw_locked(false);
}

void Progress::finish(const std::string& headline) {
  if (!enabled_ || finished_) return;
  stop_thread();
  finished_ = true;
  const auto now = clock::now();
  if (!shown_ && now - start_ < delay_) return;
  if (headline.empty()) {
    if (shown_) write_stderr(erase_line);
    return;
  }
  if (!phase_.empty()) phases_.emplace_back(phase_, std::chrono::duration<double>(now - phase_start_).count());
  std::string s = std::string(erase_line) + printable_text(headline) + " in " +
                  seconds_text(std::chrono::duration<double>(now - start_).count());
  if (!phases_.empty()) {
    s += " (";
    for (std::size_t i = 0; i < phases_.size(); ++i)
      s += (i ? ", " : "") + phases_[i].first + " " + seconds_text(phases_[i].second);
    s += ")";
  }
  write_stderr(s + "\n");
}

}  // namespace hisparse::cli
