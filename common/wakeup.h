// Wakeup: a file descriptor that an event loop polls next to its sockets, so
// that another thread (or a signal handler) can end its wait at once instead
// of the loop noticing a flag at its next timeout. An eventfd: notify() adds
// one, the loop drain()s it after poll says it is readable.
// Thread safety: notify() from any thread, and from a signal handler (it is a
// single write(2)); drain() on the polling thread only.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace swept {

class Wakeup {
 public:
  Wakeup() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~Wakeup() {
    if (fd_ >= 0) ::close(fd_);
  }
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // -1 when the kernel refused an eventfd (out of descriptors): the loop then
  // falls back to noticing flags at its timeout, as without one.
  int fd() const { return fd_; }
  void notify() const {
    if (fd_ < 0) return;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof one);  // EAGAIN: already pending
  }
  void drain() const {
    if (fd_ < 0) return;
    uint64_t count = 0;
    [[maybe_unused]] ssize_t n = ::read(fd_, &count, sizeof count);
  }

 private:
  int fd_;
};

}  // namespace swept
