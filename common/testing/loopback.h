// Loopback sockets for tests (test code only): a raw TCP connection to
// 127.0.0.1, for tests that act as a client no library would be (one that
// never finishes its request); and ports held or found free, for tests that
// need a port nobody serves or one a process they start will bind.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace swept::testing {

// A blocking socket connected to 127.0.0.1:`port`, or -1; from source
// address `from` (127.0.0.N: a server then sees distinct clients) when given.
// The caller closes it.
inline int connect_loopback(int port, const std::string& from = "") {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if ((!from.empty() && (::inet_pton(AF_INET, from.c_str(), &src.sin_addr) != 1 ||
                         ::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0)) ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A TCP port held while the object lives: bound on `addr` (so nothing else
// takes it) and, with `listen`, accepting connections nobody serves; without,
// a connection there is refused. Throws (a failed test) when the kernel gives none.
class HeldPort {
 public:
  explicit HeldPort(bool listen = false, in_addr_t addr = htonl(INADDR_LOOPBACK)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = addr;
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || (listen && ::listen(fd_, 1) != 0) ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("HeldPort: the kernel gave no loopback port");
    port_ = ntohs(a.sin_port);
  }
  ~HeldPort() { ::close(fd_); }
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A loopback port free right now (held, then released): for a process the
// test starts to bind, such as a rendezvous' MASTER_PORT.
inline int free_port() { return HeldPort().port(); }

}  // namespace swept::testing
