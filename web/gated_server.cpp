// GatedServer: httplib's request handling behind a gate on unauthenticated
// connections. See gated_server.h for the policy; this file holds its parts:
// the gate's bookkeeping, a Stream over a non-blocking socket (plain or TLS)
// whose every wait has a deadline, and the per-connection loop (handshake,
// then requests while keep-alive allows).
//
// Why non-blocking sockets with poll(): a blocking read waits per call
// (SO_RCVTIMEO), so a client sending one byte every second would never time
// out; with poll() each wait is bounded by an absolute deadline, and a
// socket shut down by the gate wakes its poll at once. Waits are sliced so
// that a worker also notices the server stopping.
#include "web/gated_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

#include "common/log.h"

namespace swept::web {

using Clock = std::chrono::steady_clock;

// ---- the gate -------------------------------------------------------------

uint64_t ConnectionGate::admit(int fd) {
  MutexLock lock(mu_);
  const uint64_t ticket = next_ticket_++;
  waiting_.emplace(ticket, fd);
  while (static_cast<int>(waiting_.size()) > max_) {
    // The oldest that has nothing unread goes first: a client whose request
    // already sits in its socket (its worker not yet scheduled, on a loaded
    // host) is about to authenticate, and a flood of idle connections must
    // not push it out. Only when every one has bytes waiting does the oldest go.
    auto oldest = waiting_.begin();
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      int unread = 0;
      if (::ioctl(it->second, FIONREAD, &unread) == 0 && unread == 0) {
        oldest = it;
        break;
      }
    }
    ::shutdown(oldest->second, SHUT_RDWR);  // its worker wakes, reads EOF and closes it
    waiting_.erase(oldest);
    ++evicted_;
    const auto now = Clock::now();
    if (now - last_warning_ > std::chrono::minutes(1)) {
      last_warning_ = now;
      log::warn("web: more than " + std::to_string(max_) +
                " connections have not authenticated; closing the oldest of them (" + std::to_string(evicted_) +
                " so far). A slow or hostile client? --max-unauthenticated sets the limit");
    }
  }
  return ticket;
}

void ConnectionGate::authenticated(uint64_t ticket) {
  MutexLock lock(mu_);
  waiting_.erase(ticket);
}

void ConnectionGate::release(uint64_t ticket) {
  MutexLock lock(mu_);
  waiting_.erase(ticket);
}

int ConnectionGate::unauthenticated() const {
  MutexLock lock(mu_);
  return static_cast<int>(waiting_.size());
}

uint64_t ConnectionGate::evicted() const {
  MutexLock lock(mu_);
  return evicted_;
}

namespace {

// ---- waiting with deadlines -----------------------------------------------

enum class Wait { kReady, kTimedOut, kStopped };

// Waits until `fd` has `events` (POLLIN / POLLOUT), `deadline` passes, or
// the server stops (`listening` becomes INVALID_SOCKET). Errors and hang-ups
// count as ready: the read or write that follows reports them.
Wait wait_for(int fd, short events, Clock::time_point deadline, const std::atomic<socket_t>& listening) {
  while (true) {
    if (listening == INVALID_SOCKET) return Wait::kStopped;
    const auto now = Clock::now();
    if (now >= deadline) return Wait::kTimedOut;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
    if (n > 0) return Wait::kReady;
    if (n < 0 && errno != EINTR) return Wait::kReady;
  }
}

Clock::duration seconds_usec(time_t sec, time_t usec) {
  return std::chrono::seconds(sec) + std::chrono::microseconds(usec);
}

// ---- one connection -------------------------------------------------------

// A connection's byte stream for httplib::Server::process_request: reads
// are buffered (the request parser reads a byte at a time), every wait ends
// at a deadline, and TLS goes through `ssl` when set.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(int fd, SSL* ssl, const std::atomic<socket_t>& listening, Clock::duration read_timeout,
             Clock::duration write_timeout)
      : fd_(fd), ssl_(ssl), listening_(listening), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  // Until lifted, no read waits past `deadline` (the unauthenticated budget).
  void set_read_limit(std::optional<Clock::time_point> deadline) { limit_ = deadline; }

  bool is_readable() const override { return buffered() || wait_readable(read_deadline()) == Wait::kReady; }

  bool is_writable() const override {
    if (wait_for(fd_, POLLOUT, Clock::now() + write_timeout_, listening_) != Wait::kReady) return false;
    // A peer that closed (the browser tab went away) shows as readable with
    // nothing to read: an event stream must stop writing to it.
    char c;
    const ssize_t r = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return !(r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR));
  }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered()) {
      const size_t n = std::min(size, end_ - begin_);
      std::memcpy(ptr, buf_.data() + begin_, n);
      begin_ += n;
      return static_cast<ssize_t>(n);
    }
    const auto deadline = read_deadline();
    if (size >= buf_.size()) return read_some(ptr, size, deadline);
    const ssize_t n = read_some(buf_.data(), buf_.size(), deadline);
    if (n <= 0) return n;
    begin_ = 0;
    end_ = static_cast<size_t>(n);
    return read(ptr, size);
  }

  ssize_t write(const char* ptr, size_t size) override {
    const auto deadline = Clock::now() + write_timeout_;
    while (true) {
      ssize_t n;
      bool want_read = false;
      if (ssl_) {
        ERR_clear_error();
        n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
        if (n <= 0) {
          const int e = SSL_get_error(ssl_, static_cast<int>(n));
          if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) return -1;
          want_read = e == SSL_ERROR_WANT_READ;
        }
      } else {
        n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
      }
      if (n > 0) return n;
      if (wait_for(fd_, want_read ? POLLIN : POLLOUT, deadline, listening_) != Wait::kReady) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
  socket_t socket() const override { return fd_; }

  // Waits for the next request on a kept-alive connection, until `deadline`.
  bool wait_request(Clock::time_point deadline) const {
    if (limit_) deadline = std::min(deadline, *limit_);
    return buffered() || (ssl_ && SSL_pending(ssl_) > 0) || wait_readable(deadline) == Wait::kReady;
  }

 private:
  bool buffered() const { return begin_ < end_; }

  Clock::time_point read_deadline() const {
    const auto d = Clock::now() + read_timeout_;
    return limit_ ? std::min(d, *limit_) : d;
  }

  Wait wait_readable(Clock::time_point deadline) const {
    if (ssl_ && SSL_pending(ssl_) > 0) return Wait::kReady;
    return wait_for(fd_, POLLIN, deadline, listening_);
  }

  // One read of at most `size` bytes: > 0 bytes, 0 at the end of the
  // stream, -1 on an error or when the deadline passes first.
  ssize_t read_some(char* ptr, size_t size, Clock::time_point deadline) {
    while (true) {
      ssize_t n;
      bool want_write = false;
      if (ssl_) {
        ERR_clear_error();
        n = SSL_read(ssl_, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
        if (n <= 0) {
          const int e = SSL_get_error(ssl_, static_cast<int>(n));
          if (e == SSL_ERROR_ZERO_RETURN) return 0;
          if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return -1;
          want_write = e == SSL_ERROR_WANT_WRITE;
        }
      } else {
        n = ::recv(fd_, ptr, size, 0);
        if (n == 0) return 0;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
      }
      if (n > 0) return n;
      if (wait_for(fd_, want_write ? POLLOUT : POLLIN, deadline, listening_) != Wait::kReady) return -1;
    }
  }

  void address(bool remote, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    auto* sa = reinterpret_cast<sockaddr*>(&addr);
    if ((remote ? ::getpeername(fd_, sa, &len) : ::getsockname(fd_, sa, &len)) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
      port = ntohs(in->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
      port = ntohs(in6->sin6_port);
    }
    ip = text;
  }

  const int fd_;
  SSL* const ssl_;
  const std::atomic<socket_t>& listening_;
  const Clock::duration read_timeout_, write_timeout_;
  std::optional<Clock::time_point> limit_;
  std::array<char, 4096> buf_{};
  size_t begin_ = 0, end_ = 0;
};

// What the thread serving a connection knows of it, for
// mark_connection_authenticated() (called from a handler on that thread).
struct ConnectionState {
  ConnectionGate* gate;
  uint64_t ticket;
  ConnStream* stream;
  bool authenticated = false;
  bool close_after_response = false;
};
thread_local ConnectionState* tl_connection = nullptr;

// The TLS handshake of a new connection, within `deadline`.
bool tls_accept(SSL* ssl, int fd, Clock::time_point deadline, const std::atomic<socket_t>& listening) {
  while (true) {
    ERR_clear_error();
    const int r = SSL_accept(ssl);
    if (r == 1) return true;
    const int e = SSL_get_error(ssl, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return false;
    if (wait_for(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, listening) != Wait::kReady) return false;
  }
}

}  // namespace

void mark_connection_authenticated() {
  ConnectionState* c = tl_connection;
  if (!c || c->authenticated) return;
  c->authenticated = true;
  c->gate->authenticated(c->ticket);
  c->stream->set_read_limit(std::nullopt);
}

void close_connection_after_response() {
  if (tl_connection) tl_connection->close_after_response = true;
}

GatedServer::GatedServer(const GateOptions& options, SSL_CTX* tls)
    : options_(options), tls_(tls), gate_(options.max_unauthenticated) {}

GatedServer::~GatedServer() {
  if (tls_) SSL_CTX_free(tls_);
}

bool GatedServer::process_and_close_socket(socket_t sock) {
  const auto accepted = Clock::now();
  const auto budget_end = accepted + options_.unauthenticated_timeout;
  const uint64_t ticket = gate_.admit(sock);
  ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK);

  SSL* ssl = nullptr;
  bool ok = true;
  if (tls_) {
    ssl = SSL_new(tls_);
    ok = ssl && SSL_set_fd(ssl, sock) == 1 && tls_accept(ssl, sock, budget_end, svr_sock_);
  }
  bool served = false;
  if (ok) {
    ConnStream stream(sock, ssl, svr_sock_, seconds_usec(read_timeout_sec_, read_timeout_usec_),
                      seconds_usec(write_timeout_sec_, write_timeout_usec_));
    stream.set_read_limit(budget_end);
    ConnectionState state{&gate_, ticket, &stream};
    tl_connection = &state;
    // httplib's keep-alive loop: requests while the client keeps the
    // connection, at most keep_alive_max_count_ of them; the last says close.
    for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
      if (!stream.wait_request(Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_))) break;
      bool closed = false;
      served = process_request(stream, left == 1, closed, nullptr);
      if (!served || closed || state.close_after_response) break;
    }
    tl_connection = nullptr;
  }
  gate_.release(ticket);  // before close(): the gate must never shut down a reused descriptor
  if (ssl) {
    if (ok && served) SSL_shutdown(ssl);  // best effort (the socket is non-blocking); never after a fatal error
    SSL_free(ssl);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return served;
}

}  // namespace swept::web
