// write_file_atomically: what each kind of target gets (new file, regular
// file, symbolic link, device, FIFO, directory), modes and owners, write
// errors stopping the work at once, and temporary files removed on failures
// and on signals. Failures that need a process of their own (a file size
// limit, a signal) run in a forked child.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "hisparse/formats/atomic_file.hpp"
#include "hisparse/formats/error.hpp"

using namespace hisparse;
namespace fs = std::filesystem;

namespace {

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hisparse-atomic-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  [[nodiscard]] fs::path path(const std::string& name) const { return dir_ / name; }

  // Names in the directory: what a failure may leave behind.
  [[nodiscard]] std::set<std::string> names() const {
    std::set<std::string> s;
    for (const auto& e : fs::directory_iterator(dir_)) s.insert(e.path().filename().string());
    return s;
  }

  fs::path dir_;
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_plain(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

void write_text(const fs::path& p, const std::string& s) {
  write_file_atomically(p, [&](std::ostream& os) { os << s; });
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode;
}

mode_t current_umask() {
  const mode_t m = ::umask(022);
  ::umask(m);
  return m;
}

// Runs f in a forked child; its return value is the child's exit code.
template <class F>
int in_child(F f, int* signal_out = nullptr) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(f());
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  if (signal_out) *signal_out = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_F(AtomicFile, NewFileGetsContentAndUmaskMode) {
  write_text(path("a.txt"), "hello\n");
  EXPECT_EQ(read_all(path("a.txt")), "hello\n");
  EXPECT_TRUE(S_ISREG(mode_of(path("a.txt"))));
  EXPECT_EQ(mode_of(path("a.txt")) & 07777, 0666 & ~current_umask());
  EXPECT_EQ(names(), std::set<std::string>{"a.txt"});
}

TEST_F(AtomicFile, ReplacedFileKeepsItsMode) {
  write_plain(path("a.txt"), "old");
  for (const mode_t m : {0600, 0640, 0444, 0755}) {
    ASSERT_EQ(::chmod(path("a.txt").c_str(), m), 0);
    write_text(path("a.txt"), "new " + std::to_string(m));
    EXPECT_EQ(read_all(path("a.txt")), "new " + std::to_string(m));
    EXPECT_EQ(mode_of(path("a.txt")) & 07777, m);
  }
  EXPECT_EQ(names(), std::set<std::string>{"a.txt"});
}

TEST_F(AtomicFile, ReplacedFileKeepsItsOwnerAsRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root can give a file away";
  write_plain(path("a.txt"), "old");
  ASSERT_EQ(::chown(path("a.txt").c_str(), 12345, 23456), 0);
  write_text(path("a.txt"), "new");
  struct stat st {};
  ASSERT_EQ(::stat(path("a.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 12345u);
  EXPECT_EQ(st.st_gid, 23456u);
  EXPECT_EQ(read_all(path("a.txt")), "new");
}

TEST_F(AtomicFile, SymlinkIsFollowedAndStaysALink) {
  fs::create_directories(path("real"));
  write_plain(path("real/target.txt"), "old");
  ASSERT_EQ(::chmod(path("real/target.txt").c_str(), 0600), 0);
  fs::create_symlink("real/target.txt", path("link.txt"));  // relative to the link's directory
  fs::create_symlink(path("link.txt"), path("chain.txt"));  // absolute, to another link
  write_text(path("link.txt"), "through the link");
  EXPECT_TRUE(fs::is_symlink(path("link.txt")));
  EXPECT_EQ(fs::read_symlink(path("link.txt")), "real/target.txt");
  EXPECT_EQ(read_all(path("real/target.txt")), "through the link");
  EXPECT_EQ(mode_of(path("real/target.txt")) & 07777, 0600);
  write_text(path("chain.txt"), "through two links");
  EXPECT_TRUE(fs::is_symlink(path("chain.txt")));
  EXPECT_TRUE(fs::is_symlink(path("link.txt")));
  EXPECT_EQ(read_all(path("real/target.txt")), "through two links");
  EXPECT_EQ(names(), (std::set<std::string>{"chain.txt", "link.txt", "real"}));
  for (const auto& e : fs::directory_iterator(path("real"))) EXPECT_EQ(e.path().filename(), "target.txt");
}

TEST_F(AtomicFile, DanglingSymlinkCreatesItsTarget) {
  fs::create_symlink("new.txt", path("dangling.txt"));
  write_text(path("dangling.txt"), "created");
  EXPECT_TRUE(fs::is_symlink(path("dangling.txt")));
  EXPECT_EQ(read_all(path("new.txt")), "created");
  EXPECT_EQ(names(), (std::set<std::string>{"dangling.txt", "new.txt"}));
}

TEST_F(AtomicFile, SymlinkLoopIsAnError) {
  fs::create_symlink("b", path("a"));
  fs::create_symlink("a", path("b"));
  try {
    write_text(path("a"), "x");
    ADD_FAILURE() << "wrote through a symlink loop";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic links"), std::string::npos) << e.what();
  }
  EXPECT_EQ(names(), (std::set<std::string>{"a", "b"}));
}

TEST_F(AtomicFile, DirectoryIsRefused) {
  fs::create_directories(path("d"));
  try {
    write_text(path("d"), "x");
    ADD_FAILURE() << "wrote over a directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path("d").string() + ": "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Is a directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(path("d")));
  EXPECT_EQ(names(), std::set<std::string>{"d"});
}

TEST_F(AtomicFile, LongNameStillGetsATemporaryFile) {
  const std::string name(250, 'n');  // name + ".tmp<random>" is over NAME_MAX
  write_text(path(name), "long");
  EXPECT_EQ(read_all(path(name)), "long");
  EXPECT_EQ(names(), std::set<std::string>{name});
}

TEST_F(AtomicFile, ThrowingWriterLeavesTargetAndNoTemporaryFile) {
  write_plain(path("a.txt"), "old");
  const std::string block(1 << 20, 'x');
  EXPECT_THROW(write_file_atomically(path("a.txt"),
                                     [&](std::ostream& os) {
                                       for (int k = 0; k < 3; ++k) os << block;
                                       throw std::runtime_error("generator failed");
                                     }),
               std::runtime_error);
  EXPECT_EQ(read_all(path("a.txt")), "old");
  EXPECT_EQ(names(), std::set<std::string>{"a.txt"});
  // A new target is not created either.
  EXPECT_THROW(write_file_atomically(path("b.txt"), [](std::ostream&) { throw Error("bad input"); }), Error);
  EXPECT_EQ(names(), std::set<std::string>{"a.txt"});
}

// A write error on the temporary file: RLIMIT_FSIZE makes write() fail with
// EFBIG once the file reaches the limit (SIGXFSZ ignored, or it would kill).
TEST_F(AtomicFile, WriteErrorStopsAtOnceAndLeavesTargetUntouched) {
  write_plain(path("a.txt"), "old");
  const fs::path target = path("a.txt");
  const int code = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1 << 20, 1 << 20};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
    const std::string block(1 << 16, 'x');
    int blocks = 0;
    try {
      write_file_atomically(target, [&](std::ostream& os) {
        for (; blocks < 1000; ++blocks) os.write(block.data(), static_cast<std::streamsize>(block.size()));
      });
      return 11;  // 64 MB written under a 1 MB limit
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind(target.string() + ": write failed", 0) != 0) return 12;
      if (what.find("(File too large)") == std::string::npos) return 13;
    }
    if (blocks > 40) return 14;  // 1 MB is 16 blocks, plus the buffer
    return 0;
  });
  EXPECT_EQ(code, 0) << "10 setrlimit, 11 no error, 12/13 message, 14 went on writing";
  EXPECT_EQ(read_all(path("a.txt")), "old");
  EXPECT_EQ(names(), std::set<std::string>{"a.txt"});
}

// /dev/full fails every write with ENOSPC: a direct write (a character
// device), so this checks that the first failure stops the writer with a
// clear message, and that a writer swallowing it does not hide it.
TEST_F(AtomicFile, DevFullIsWrittenDirectlyAndFailsAtOnce) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  fs::create_symlink("/dev/full", path("full.txt"));
  const std::string block(1 << 16, 'x');
  int blocks = 0;
  try {
    write_file_atomically(path("full.txt"), [&](std::ostream& os) {
      for (; blocks < 100000; ++blocks) os.write(block.data(), static_cast<std::streamsize>(block.size()));
    });
    ADD_FAILURE() << "wrote to /dev/full";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path("full.txt").string() + ": write failed (No space left on device)");
  }
  EXPECT_LE(blocks, 8);
  EXPECT_THROW(write_file_atomically("/dev/full",
                                     [&](std::ostream& os) {
                                       try {
                                         os << block << block << block << block << block;
                                       } catch (...) {
                                       }
                                     }),
               Error);
  EXPECT_TRUE(fs::is_symlink(path("full.txt")));
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
}

TEST_F(AtomicFile, DeviceIsWrittenThroughNotReplaced) {
  if (!fs::is_character_file("/dev/null")) GTEST_SKIP() << "no /dev/null";
  struct stat before {};
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  fs::create_symlink("/dev/null", path("null.txt"));
  write_text(path("null.txt"), "discarded");
  write_text("/dev/null", "discarded");
  struct stat after {};
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_rdev, before.st_rdev);
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_TRUE(fs::is_symlink(path("null.txt")));
  EXPECT_EQ(names(), std::set<std::string>{"null.txt"});
  // /dev/stdout goes through /proc/self/fd/1, which readlink cannot resolve
  // for a pipe; it is opened as it is (here stdout is whatever gtest has).
  EXPECT_NO_THROW(write_text("/dev/stdout", ""));
}

TEST_F(AtomicFile, FifoIsWrittenThrough) {
  ASSERT_EQ(::mkfifo(path("pipe").c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read_all(path("pipe")); });
  const std::string text(3 << 20, 'f');  // more than a pipe and the buffer hold
  write_text(path("pipe"), text);
  reader.join();
  EXPECT_EQ(got.size(), text.size());
  EXPECT_EQ(got, text);
  EXPECT_TRUE(fs::is_fifo(path("pipe")));
  EXPECT_EQ(names(), std::set<std::string>{"pipe"});
}

TEST_F(AtomicFile, CheckOutputWritable) {
  EXPECT_NO_THROW(check_output_writable(path("a.txt")));
  EXPECT_TRUE(names().empty()) << "the probe leaves nothing";
  try {
    check_output_writable(path("no/such/a.txt"));
    ADD_FAILURE() << "a missing directory passed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path("no/such/a.txt").string() + ": cannot create a temporary file", 0), 0u)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(No such file or directory)"), std::string::npos) << e.what();
  }
  fs::create_directories(path("d"));
  EXPECT_THROW(check_output_writable(path("d")), Error);
  ASSERT_EQ(::mkfifo(path("pipe").c_str(), 0600), 0);
  EXPECT_NO_THROW(check_output_writable(path("pipe")));  // not opened: that would wait for a reader
  EXPECT_EQ(names(), (std::set<std::string>{"d", "pipe"}));
}

// A signal while the temporary file exists: the handler removes it and the
// process still dies of the signal.
TEST_F(AtomicFile, SignalRemovesTemporaryFileAndKills) {
  write_plain(path("a.txt"), "old");
  const fs::path target = path("a.txt");
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGXFSZ}) {
    int died_of = 0;
    const int code = in_child(
        [&] {
          const rlimit no_core{0, 0};  // SIGXFSZ dumps core by default
          ::setrlimit(RLIMIT_CORE, &no_core);
          // A signal ignored where this test runs (SIGINT and SIGHUP of a
          // background job) is left ignored by the library: nothing to test.
          struct sigaction old {};
          ::sigaction(sig, nullptr, &old);
          if ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_IGN) return 30;
          write_file_atomically(target, [&](std::ostream& os) {
            os << std::string(1 << 20, 'x') << std::flush;
            // The temporary file is there now; the signal must remove it.
            int temps = 0;
            for (const auto& e : fs::directory_iterator(target.parent_path()))
              temps += e.path().filename().string().find(".tmp") != std::string::npos;
            if (temps != 1) ::_exit(20);
            ::raise(sig);
          });
          return 21;  // survived the signal
        },
        &died_of);
    if (code == 30) continue;
    EXPECT_EQ(died_of, sig) << "signal " << sig << ", exit code " << code;
    EXPECT_EQ(read_all(target), "old");
    EXPECT_EQ(names(), std::set<std::string>{"a.txt"}) << "signal " << sig;
  }
}

// An ignored signal (nohup's SIGHUP) stays ignored: the write completes.
TEST_F(AtomicFile, IgnoredSignalStaysIgnored) {
  const fs::path target = path("a.txt");
  const int code = in_child([&] {
    ::signal(SIGHUP, SIG_IGN);
    write_file_atomically(target, [](std::ostream& os) {
      os << "before " << std::flush;
      ::raise(SIGHUP);
      os << "after";
    });
    return 0;
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(read_all(target), "before after");
  EXPECT_EQ(names(), std::set<std::string>{"a.txt"});
}
