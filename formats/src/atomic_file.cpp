#include "hisparse/formats/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/vfs.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <streambuf>
#include <string>
#include <system_error>

#include "hisparse/formats/error.hpp"

namespace hisparse {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int e) { return std::generic_category().message(e); }

// Paths in messages are escaped (printable_text): a file name is input text,
// and its bytes must not reach the terminal as escape sequences.
std::string shown(const fs::path& p) { return printable_text(p.string()); }

[[noreturn]] void fail(const fs::path& target, const std::string& what, int e) {
  throw Error(shown(target) + ": " + what + " (" + errno_text(e) + ")");
}

// ---------------------------------------------------------------------------
// Temporary files still alive, for the signal handler. The handler may only
// use async-signal-safe calls, so the registry is a fixed array of paths with
// a lock-free state each; nothing is allocated or locked on the handler's side.

enum SlotState : int { slot_free = 0, slot_filling = 1, slot_live = 2, slot_unlinking = 3 };

struct TempSlot {
  std::atomic<int> state{slot_free};
  char path[PATH_MAX];
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

// Concurrent writes beyond this many are not removed on a signal (they still
// work; a full registry only loses the clean-up).
constexpr int max_live_temps = 64;
TempSlot live_temps[max_live_temps];

constexpr int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGXFSZ};

extern "C" void remove_temps_and_die(int sig) {
  const int saved_errno = errno;
  for (TempSlot& s : live_temps) {
    // Claiming the slot (live -> unlinking) keeps a writer in another thread
    // from reusing the path while it is being unlinked.
    int expected = slot_live;
    if (s.state.compare_exchange_strong(expected, slot_unlinking)) ::unlink(s.path);
  }
  // Die of the signal, so that the exit status says so: back to the default
  // action and raise it again. It is blocked while this handler runs, so it is
  // delivered (and kills) as soon as the handler returns.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
  errno = saved_errno;
}

// Installed on first use rather than by main(), so that every program that
// writes through this library cleans up. Signals the program ignores (nohup's
// SIGHUP, a background job's SIGINT) or handles itself are left alone.
void install_cleanup_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = remove_temps_and_die;
    sigemptyset(&sa.sa_mask);
    // One handler run at a time: a second signal waits, and then kills.
    for (int sig : cleanup_signals) sigaddset(&sa.sa_mask, sig);
    sa.sa_flags = SA_RESTART;
    for (int sig : cleanup_signals) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0) continue;
      if ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_DFL) ::sigaction(sig, &sa, nullptr);
    }
  });
}

// Returns the slot, or -1 when the path does not fit or every slot is taken.
int register_temp(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  install_cleanup_handlers();
  for (int i = 0; i < max_live_temps; ++i) {
    int expected = slot_free;
    if (live_temps[i].state.compare_exchange_strong(expected, slot_filling)) {
      std::memcpy(live_temps[i].path, path.c_str(), path.size() + 1);
      live_temps[i].state.store(slot_live, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot < 0) return;
  // Fails only when a signal handler has claimed the slot; the process is
  // dying then, and the slot need not come back.
  int expected = slot_live;
  live_temps[slot].state.compare_exchange_strong(expected, slot_free);
}

// ---------------------------------------------------------------------------
// An output stream buffer over a file descriptor that throws at the first
// failed write, with the target and errno's text, instead of setting a flag
// that is looked at only after all the work is done.

class FdBuf : public std::streambuf {
 public:
  FdBuf(int fd, const fs::path& target) : fd_(fd), target_(target), buf_(new char[capacity]) {
    setp(buf_.get(), buf_.get() + capacity);
  }

  void flush_buffer() {
    const auto n = static_cast<std::size_t>(pptr() - pbase());
    setp(buf_.get(), buf_.get() + capacity);
    write_all(buf_.get(), n);
  }

  // A write error the caller's code might have swallowed, or 0.
  [[nodiscard]] int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override {
    flush_buffer();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }

  std::streamsize xsputn(const char* s, std::streamsize count) override {
    const auto n = static_cast<std::size_t>(count);
    if (n <= static_cast<std::size_t>(epptr() - pptr())) {
      std::memcpy(pptr(), s, n);
      pbump(static_cast<int>(n));
      return count;
    }
    flush_buffer();
    if (n >= capacity) {
      write_all(s, n);  // large blocks (a node pool) skip the copy
    } else {
      std::memcpy(pptr(), s, n);
      pbump(static_cast<int>(n));
    }
    return count;
  }

  int sync() override {
    flush_buffer();
    return 0;
  }

 private:
  static constexpr std::size_t capacity = std::size_t{1} << 18;

  void write_all(const char* p, std::size_t n) {
    if (error_ != 0) fail(target_, "write failed", error_);
    while (n > 0) {
      const ssize_t k = ::write(fd_, p, std::min<std::size_t>(n, std::size_t{1} << 30));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        // write() returning 0 for a non-empty request: no progress is possible.
        error_ = k < 0 ? errno : EIO;
        fail(target_, "write failed", error_);
      }
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }

  int fd_;
  const fs::path& target_;
  std::unique_ptr<char[]> buf_;
  int error_ = 0;
};

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  // close() can report a write error (NFS, quotas), so its result counts.
  int release_and_close() {
    const int f = fd;
    fd = -1;
    return ::close(f) == 0 ? 0 : errno;
  }
};

// Runs `write` on a stream over fd; throws at the first failed write.
void write_through(int fd, const fs::path& target, const std::function<void(std::ostream&)>& write) {
  FdBuf buf(fd, target);
  std::ostream os(&buf);
  os.exceptions(std::ios::badbit);
  write(os);
  if (buf.error() != 0) fail(target, "write failed", buf.error());
  buf.flush_buffer();
  if (!os) throw Error(shown(target) + ": write failed");
}

// ---------------------------------------------------------------------------
// What the target names.

struct Resolved {
  fs::path path;                  // the file to replace or write to
  bool direct = false;            // write through: no temporary file, no rename
  std::optional<struct stat> st;  // of path, when it exists
};

bool on_procfs([[maybe_unused]] const fs::path& dir) {
#ifdef __linux__
  struct statfs s {};
  const std::string d = dir.empty() ? std::string(".") : dir.string();
  constexpr decltype(s.f_type) proc_super_magic = 0x9fa0;
  return ::statfs(d.c_str(), &s) == 0 && s.f_type == proc_super_magic;
#else
  return false;
#endif
}

Resolved resolve(const fs::path& target) {
  fs::path p = target;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      const int e = errno;  // saved before building the message allocates
      if (e == ENOENT) return {p, false, std::nullopt};  // a new file (or a dangling link's target)
      fail(target, "cannot access " + shown(p), e);
    }
    if (S_ISLNK(st.st_mode)) {
      if (hops >= 40) fail(target, "cannot follow symbolic links", ELOOP);
      // /proc/self/fd/N (behind /dev/stdout, /dev/fd/N) is no path: for a
      // pipe readlink gives "pipe:[123]". Only open() resolves it right.
      if (on_procfs(p.parent_path())) {
        if (::stat(p.c_str(), &st) != 0) {
          const int e = errno;
          fail(target, "cannot access " + shown(p), e);
        }
        if (S_ISDIR(st.st_mode)) fail(target, "cannot write", EISDIR);
        return {p, true, st};
      }
      std::string link(PATH_MAX, '\0');
      const ssize_t n = ::readlink(p.c_str(), link.data(), link.size());
      if (n < 0) {
        const int e = errno;
        fail(target, "cannot read the symbolic link " + shown(p), e);
      }
      if (static_cast<std::size_t>(n) >= link.size())
        fail(target, "cannot read the symbolic link " + shown(p), ENAMETOOLONG);
      link.resize(static_cast<std::size_t>(n));
      const fs::path next(link);
      p = next.is_absolute() ? next : p.parent_path() / next;
      continue;
    }
    if (S_ISREG(st.st_mode)) return {p, false, st};
    if (S_ISDIR(st.st_mode)) fail(target, "cannot write", EISDIR);
    return {p, true, st};  // a device, a FIFO, a socket (open() will refuse that)
  }
}

// A new temporary file beside `final_path`, registered for the signal
// handler. 0666 less the umask, as for any new file; O_EXCL, so that it is
// never someone else's file.
struct Temp {
  std::string path;
  int slot = -1;
  Fd fd;
};

void create_temp(const fs::path& target, const fs::path& final_path, Temp& t) {
  std::random_device rd;
  const fs::path dir = final_path.parent_path();
  bool short_name = false;
  for (int attempt = 0; attempt < 100; ++attempt) {
    // <name>.tmp<random>; a name near NAME_MAX gets a short one instead.
    const std::string suffix = ".tmp" + std::to_string(rd());
    t.path = short_name ? (dir / (".hisparse" + suffix)).string() : final_path.string() + suffix;
    // Registered before it exists: a signal right after open() still finds it.
    t.slot = register_temp(t.path);
    const int fd = ::open(t.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      t.fd.fd = fd;
      return;
    }
    const int e = errno;
    unregister_temp(t.slot);
    t.slot = -1;
    if (e == EEXIST) continue;
    if (e == ENAMETOOLONG && !short_name) {
      short_name = true;
      continue;
    }
    fail(target, "cannot create a temporary file in " + (dir.empty() ? std::string(".") : shown(dir)), e);
  }
  fail(target, "cannot create a temporary file in " + (dir.empty() ? std::string(".") : shown(dir)), EEXIST);
}

void remove_temp(Temp& t) {
  if (t.fd.fd >= 0) t.fd.release_and_close();
  ::unlink(t.path.c_str());
  unregister_temp(t.slot);
  t.slot = -1;
}

void write_direct(const fs::path& target, const Resolved& r, const std::function<void(std::ostream&)>& write) {
  // No O_TRUNC: devices and FIFOs ignore it, and a regular file reached
  // through /proc/self/fd (stdout redirected to a file) was opened by the
  // shell already; appending keeps what the program printed before.
  int flags = O_WRONLY | O_NOCTTY | O_CLOEXEC;
  if (r.st && S_ISREG(r.st->st_mode)) flags |= O_APPEND;
  int fd;
  do fd = ::open(r.path.c_str(), flags);
  while (fd < 0 && errno == EINTR);  // a FIFO's open() waits for a reader
  if (fd < 0) {
    const int e = errno;
    fail(target, "cannot open for writing", e);
  }
  Fd f(fd);
  write_through(fd, target, write);
  if (const int e = f.release_and_close()) fail(target, "write failed", e);
}

}  // namespace

void write_file_atomically(const fs::path& target, const std::function<void(std::ostream&)>& write) {
  const Resolved r = resolve(target);
  if (r.direct) {
    write_direct(target, r, write);
    return;
  }
  Temp t;
  create_temp(target, r.path, t);
  try {
    if (r.st) {
      // Replacing a file must not change who may read it: owner and group
      // first (chown clears set-id bits), then the mode. Only root may give a
      // file away, so a failed chown is not an error; a failed chmod is.
      if (::fchown(t.fd.fd, r.st->st_uid, r.st->st_gid) != 0)
        (void)!::fchown(t.fd.fd, static_cast<uid_t>(-1), r.st->st_gid);
      if (::fchmod(t.fd.fd, r.st->st_mode & 07777) != 0) {
        const int e = errno;
        fail(target, "cannot set the permissions of the temporary file " + shown(t.path), e);
      }
    }
    write_through(t.fd.fd, target, write);
    if (const int e = t.fd.release_and_close()) fail(target, "write failed", e);
    if (::rename(t.path.c_str(), r.path.c_str()) != 0) {
      const int e = errno;
      fail(target, "cannot rename the temporary file " + shown(t.path) + " to " + shown(r.path), e);
    }
    unregister_temp(t.slot);
  } catch (...) {
    remove_temp(t);
    throw;
  }
}

void check_output_writable(const fs::path& target) {
  const Resolved r = resolve(target);
  if (r.direct) return;
  Temp t;
  create_temp(target, r.path, t);
  remove_temp(t);
}

}  // namespace hisparse
