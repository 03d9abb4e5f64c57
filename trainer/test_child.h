// swept-train as a child process for the trainer's tests (test code only):
// argv and extra environment in, stdout split into lines and stderr kept,
// every wait bounded by a deadline. Its stdout pipe is shrunk to one page, so
// the child cannot run far ahead of a reader that waits for a line.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace swept::trainer::testing {

using Clock = std::chrono::steady_clock;

inline const std::string kTrainer = std::string(SWEPT_BINARY_DIR) + "/bin/swept-train";

class Child {
 public:
  explicit Child(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    int out[2], err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    ::fcntl(out[1], F_SETPIPE_SZ, 4096);  // back-pressure: the child stays near the reader
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(kTrainer.c_str()));
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(kTrainer.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    out_ = out[0];
    err_ = err[0];
  }
  ~Child() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
    if (out_ >= 0) ::close(out_);
    if (err_ >= 0) ::close(err_);
  }

  // Reads output until `pred` accepts a stdout line (returned) or the
  // deadline passes / output ends (nullopt).
  std::optional<std::string> wait_for_line(const std::function<bool(const std::string&)>& pred, double seconds = 60) {
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    for (;;) {
      while (next_line_ < lines_.size()) {
        const std::string& l = lines_[next_line_++];
        if (pred(l)) return l;
      }
      if (out_ < 0 || Clock::now() > deadline) return std::nullopt;
      pump(deadline);
    }
  }

  // Reads everything until exit; returns the exit code (128 + signal when killed).
  int wait_exit(double seconds = 60) {
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while ((out_ >= 0 || err_ >= 0) && Clock::now() < deadline) pump(deadline);
    REQUIRE_MESSAGE(out_ < 0, "swept-train did not finish in time");
    int st = 0;
    REQUIRE(::waitpid(pid_, &st, 0) == pid_);
    reaped_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

  void signal(int sig) { ::kill(pid_, sig); }
  const std::vector<std::string>& lines() const { return lines_; }
  const std::string& err() const { return err_text_; }

 private:
  void pump(Clock::time_point deadline) {
    pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
    const int ms = static_cast<int>(
        std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    if (::poll(fds, 2, std::min(ms, 1000)) <= 0) return;
    char buf[4096];
    if (out_ >= 0 && (fds[0].revents & (POLLIN | POLLHUP))) {
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) {
        ::close(out_);
        out_ = -1;
      } else {
        partial_.append(buf, static_cast<size_t>(n));
        size_t nl;
        while ((nl = partial_.find('\n')) != std::string::npos) {
          lines_.push_back(partial_.substr(0, nl));
          partial_.erase(0, nl + 1);
        }
      }
    }
    if (err_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP))) {
      const ssize_t n = ::read(err_, buf, sizeof buf);
      if (n <= 0) {
        ::close(err_);
        err_ = -1;
      } else {
        err_text_.append(buf, static_cast<size_t>(n));
      }
    }
  }

  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
  bool reaped_ = false;
  std::string partial_, err_text_;
  std::vector<std::string> lines_;
  size_t next_line_ = 0;
};

}  // namespace swept::trainer::testing
