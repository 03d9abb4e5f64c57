// NCCL's stand-in across processes (see nccl_emu_net.h). Wire, over one TCP
// connection per rank to the root, host byte order (one host):
//   rank -> root, once:   "SWNC", u32 nranks, u32 rank
//   rank -> root, per collective: u64 count, u32 average, count floats
//   root -> rank, per collective: count floats (the result)
// The root reads the ranks in rank order each round, so a rank that sent
// first simply waits in its read; a rank whose count differs from rank 0's
// ends the round for everyone (the root closes all connections).
#include "trainer/cuda/emu/nccl_emu_net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace swept::cuda::emu::net {
namespace {

constexpr char kMagic[4] = {'S', 'W', 'N', 'C'};

bool write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// The id: magic, the root's port (loopback).
struct IdLayout {
  char magic[4];
  uint16_t port;
};
static_assert(sizeof(IdLayout) <= NCCL_UNIQUE_ID_BYTES);

// Accepts the ranks (in any order), then serves rounds until a connection
// fails or closes; then closes them all.
void serve(int listener) {
  std::vector<int> ranks;
  uint32_t expected = 0;
  int joined = 0;
  while (expected == 0 || joined < static_cast<int>(expected)) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) break;
    char magic[4];
    uint32_t hello[2];
    if (!read_all(fd, magic, sizeof magic) || std::memcmp(magic, kMagic, 4) != 0 || !read_all(fd, hello, sizeof hello) ||
        hello[0] == 0 || hello[1] >= hello[0] || (expected != 0 && hello[0] != expected) ||
        (!ranks.empty() && ranks[hello[1]] >= 0)) {
      ::close(fd);
      continue;
    }
    if (expected == 0) {
      expected = hello[0];
      ranks.assign(expected, -1);
    }
    ranks[hello[1]] = fd;
    ++joined;
  }
  ::close(listener);
  std::vector<float> sum, in;
  for (bool ok = joined > 0; ok;) {
    uint64_t count = 0;
    uint32_t average = 0;
    for (size_t r = 0; ok && r < ranks.size(); ++r) {
      uint64_t c = 0;
      uint32_t avg = 0;
      ok = read_all(ranks[r], &c, sizeof c) && read_all(ranks[r], &avg, sizeof avg) && (r == 0 || c == count);
      if (!ok) break;
      count = c;
      average = avg;
      in.resize(count);
      ok = read_all(ranks[r], in.data(), count * sizeof(float));
      if (r == 0) sum.assign(count, 0.f);
      // The in-process clique's order: 0.f + rank 0 + rank 1 + ...
      for (size_t i = 0; ok && i < count; ++i) sum[i] += in[i];
    }
    if (ok && average)
      for (float& v : sum) v = v / float(ranks.size());
    for (size_t r = 0; ok && r < ranks.size(); ++r) ok = write_all(ranks[r], sum.data(), count * sizeof(float));
  }
  for (int fd : ranks)
    if (fd >= 0) ::close(fd);
}

}  // namespace

struct Link {
  int fd = -1;
  int rank = 0;
};

bool make_unique_id(ncclUniqueId* id) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 64) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(listener);
    return false;
  }
  IdLayout layout{};
  std::memcpy(layout.magic, kMagic, 4);
  layout.port = ntohs(a.sin_port);
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, &layout, sizeof layout);
  std::thread(serve, listener).detach();  // ends when the ranks are gone
  return true;
}

std::shared_ptr<Link> join(const ncclUniqueId& id, int nranks, int rank) {
  IdLayout layout{};
  std::memcpy(&layout, id.internal, sizeof layout);
  if (std::memcmp(layout.magic, kMagic, 4) != 0 || nranks < 1 || rank < 0 || rank >= nranks) return nullptr;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(layout.port);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const uint32_t hello[2] = {static_cast<uint32_t>(nranks), static_cast<uint32_t>(rank)};
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || !write_all(fd, kMagic, sizeof kMagic) ||
      !write_all(fd, hello, sizeof hello)) {
    ::close(fd);
    return nullptr;
  }
  auto link = std::make_shared<Link>();
  link->fd = fd;
  link->rank = rank;
  return link;
}

void all_reduce(Link& link, const float* send, float* recv, size_t count, bool average) {
  const uint64_t c = count;
  const uint32_t avg = average ? 1 : 0;
  const bool ok = link.fd >= 0 && write_all(link.fd, &c, sizeof c) && write_all(link.fd, &avg, sizeof avg) &&
                  write_all(link.fd, send, count * sizeof(float)) && read_all(link.fd, recv, count * sizeof(float));
  if (!ok) {
    std::fprintf(stderr,
                 "NCCL emulation: rank %d's all-reduce lost its peers (a process of the communicator ended, or "
                 "ranks disagreed on the count): ncclRemoteError; ending this process as a GPU's would hang\n",
                 link.rank);
    std::_Exit(1);
  }
}

void close(Link& link) {
  if (link.fd >= 0) {
    ::shutdown(link.fd, SHUT_RDWR);
    ::close(link.fd);
    link.fd = -1;
  }
}

}  // namespace swept::cuda::emu::net
