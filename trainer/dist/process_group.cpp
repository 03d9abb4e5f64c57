// ProcessGroup over Gloo (see process_group.h). Each collective is one Gloo
// call with the next tag; Gloo's exceptions (a peer closed its connection, a
// timeout) are caught here and become kIoError, so the trainer sees the one
// error type and exits 1 with the message instead of hanging or aborting.
#include "trainer/dist/process_group.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "common/log.h"
#include "common/net.h"
#include "trainer/dist/rendezvous.h"

namespace swept::trainer {

Result<std::string> local_address_towards(const std::string& host) {
  Result<std::string> local = source_address_toward(host, "9");
  if (!local.ok())
    return Status::IoError("MASTER_ADDR=" + host + ": " + local.status().message() +
                           ": set GLOO_SOCKET_IFNAME to the interface that reaches it");
  return local;
}

Result<std::unique_ptr<ProcessGroup>> ProcessGroup::join(const World& world) {
  // A misspelt interface is bad input (exit 2), found before any waiting.
  if (!world.socket_ifname.empty() && ::if_nametoindex(world.socket_ifname.c_str()) == 0)
    return Status::InvalidArgument("GLOO_SOCKET_IFNAME=" + world.socket_ifname +
                                   " names no network interface of this host: name the one that carries the "
                                   "address the other hosts reach (`ip -brief address` lists them), or unset it");
  std::unique_ptr<ProcessGroup> g(new ProcessGroup());
  g->world_ = world;
  if (world.rank == 0) {
    Result<std::unique_ptr<RendezvousServer>> server = RendezvousServer::start(world.master_port);
    if (!server.ok()) return server.status();
    g->server_ = std::move(*server);
  }
  // Rank 0 reaches its own server on loopback: MASTER_ADDR names it as the
  // others see it, which need not be routable from itself (NAT, a proxy).
  const std::string host = world.rank == 0 ? std::string("127.0.0.1") : world.master_addr;
  Result<std::unique_ptr<RendezvousClient>> client =
      RendezvousClient::connect(host, world.master_port, world.rank, world.timeout);
  if (!client.ok()) return client.status();
  g->client_ = std::move(*client);
  SWEPT_RETURN_IF_ERROR(g->connect_mesh());
  log::info("rank " + std::to_string(world.rank) + " of " + std::to_string(world.size) + " joined (" + world.source +
            " environment, rendezvous " + world.master_addr + ":" + std::to_string(world.master_port) +
            ", Gloo on " + g->address_ + ")");
  return g;
}

ProcessGroup::~ProcessGroup() {
  // Gloo's pairs close before the rendezvous goes: a rank still reading a
  // key from rank 0's store is past it by the time any rank gets here.
  lanes_.clear();  // their buffers are registered with the context: they go first
  context_.reset();
  client_.reset();
  server_.reset();
}

Status ProcessGroup::connect_mesh() {
  gloo::transport::tcp::attr attr;
  if (!world_.socket_ifname.empty()) {
    attr.iface = world_.socket_ifname;
    address_ = "interface " + world_.socket_ifname + " (GLOO_SOCKET_IFNAME)";
  } else if (Result<std::string> local = local_address_towards(world_.master_addr); local.ok()) {
    attr.hostname = *local;
    address_ = *local + " (the route to MASTER_ADDR)";
  } else {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    attr.hostname = name;
    address_ = std::string(name) + " (the host name: " + local.status().message() + ")";
  }
  try {
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(world_.rank, world_.size);
    context->setTimeout(world_.timeout);
    GlooStore store(*client_);
    context->connectFullMesh(store, device);
    context_ = std::move(context);
  } catch (const GlooStore::Failure& f) {
    return f.status();
  } catch (const std::exception& e) {
    return Status::IoError("rank " + std::to_string(world_.rank) + " could not connect to its " +
                           std::to_string(world_.size - 1) + " peers through Gloo on " + address_ + ": " + e.what() +
                           " (GLOO_SOCKET_IFNAME names the interface the others reach this host by)");
  }
  return Status::Ok();
}

template <typename Fn>
Status ProcessGroup::guarded(const char* what, Fn&& fn) {
  try {
    fn();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::IoError(std::string(what) + " across " + std::to_string(world_.size) + " processes failed on rank " +
                           std::to_string(world_.rank) + ": " + e.what() +
                           " (a peer process ended or is unreachable: see its log)");
  }
}

namespace {

// Slots of exchange_sum's messages: this prefix in the top byte (Gloo's own
// collectives use 0x01-0x08 there, gloo/types.h, so the two never match each
// other's messages), the lane in the next 16 bits, the sequence below.
constexpr uint64_t kExchangeSlotPrefix = 0x53;
uint64_t exchange_slot(uint64_t lane, uint64_t seq) {
  return (kExchangeSlotPrefix << 56) | ((lane & 0xffff) << 40) | (seq & ((uint64_t{1} << 40) - 1));
}
// Segment size of the exchange: one message up to this many floats (1 MiB),
// so the MLP's 318 KB gradient is one message, and a 64 MB buffer is 64
// whose sums overlap the transfer of the rest.
constexpr size_t kSegmentFloats = size_t{1} << 18;
// Lanes kept: the trainer uses two (gradient, stop check); a caller of many
// lengths (allreduce_bench) drops its oldest lane, and with it that lane's
// posted receive, which the peer drops at the same call and never sends to.
constexpr size_t kMaxLanes = 4;

}  // namespace

void ProcessGroup::exchange_sum(float* data, size_t count) {
  auto found = lanes_.find(count);
  if (found == lanes_.end()) {
    if (lanes_.size() >= kMaxLanes) {
      auto oldest = std::min_element(lanes_.begin(), lanes_.end(),
                                     [](const auto& a, const auto& b) { return a.second.index < b.second.index; });
      lanes_.erase(oldest);
    }
    Lane lane;
    lane.index = next_lane_++;
    lane.scratch.assign(count, 0.0f);
    lane.buffer = context_->createUnboundBuffer(lane.scratch.data(), count * sizeof(float));
    found = lanes_.emplace(count, std::move(lane)).first;
  }
  Lane& lane = found->second;
  const int peer = 1 - world_.rank;
  const size_t segments = (count + kSegmentFloats - 1) / kSegmentFloats;
  auto offset = [](size_t k) { return k * kSegmentFloats * sizeof(float); };
  auto length = [&](size_t k) { return std::min(kSegmentFloats, count - k * kSegmentFloats) * sizeof(float); };
  auto post = [&](uint64_t seq) {
    for (size_t k = 0; k < segments; ++k) lane.buffer->recv(peer, exchange_slot(lane.index, seq), offset(k), length(k));
  };
  // Every receive is posted before any send (at the latest here, usually by
  // the previous call), so each side's "ready" notices travel before its data.
  if (!lane.posted) post(lane.seq);
  lane.posted = false;
  std::unique_ptr<gloo::transport::UnboundBuffer> mine = context_->createUnboundBuffer(data, count * sizeof(float));
  const uint64_t slot = exchange_slot(lane.index, lane.seq);
  for (size_t k = 0; k < segments; ++k) mine->send(peer, slot, offset(k), length(k));
  const auto timeout = context_->getTimeout();
  // Segments arrive and leave in order (one TCP connection each way). A
  // segment is summed in place only once it has also left: the peer must get
  // this rank's values, not the sums.
  for (size_t k = 0; k < segments; ++k) {
    if (!lane.buffer->waitRecv(timeout) || !mine->waitSend(timeout))
      throw std::runtime_error("the exchange with rank " + std::to_string(peer) + " was aborted");
    float* out = data + k * kSegmentFloats;
    const float* in = lane.scratch.data() + k * kSegmentFloats;
    const size_t n = length(k) / sizeof(float);
    for (size_t i = 0; i < n; ++i) out[i] += in[i];
  }
  // The scratch is read: the peer's next data of this length may land in it.
  ++lane.seq;
  post(lane.seq);
  lane.posted = true;
}

Status ProcessGroup::sum(float* data, size_t count) {
  if (count == 0) return Status::Ok();
  if (world_.size == 2) return guarded("the gradient all-reduce", [&] { exchange_sum(data, count); });
  return guarded("the gradient all-reduce", [&] {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, count);
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(tag_++);
    gloo::allreduce(opts);
  });
}

Status ProcessGroup::all_gather(const float* in, size_t count, float* out) {
  if (count == 0) return Status::Ok();
  return guarded("an all-gather", [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<float*>(in), count);  // Gloo only reads it
    opts.setOutput(out, count * static_cast<size_t>(world_.size));
    opts.setTag(tag_++);
    gloo::allgather(opts);
  });
}

Status ProcessGroup::broadcast(std::vector<char>& bytes) {
  uint64_t n = bytes.size();
  auto one = [&](void* data, size_t size) {
    gloo::BroadcastOptions opts(context_);
    if (world_.rank == 0) opts.setInput(static_cast<char*>(data), size);
    opts.setOutput(static_cast<char*>(data), size);
    opts.setRoot(0);
    opts.setTag(tag_++);
    gloo::broadcast(opts);
  };
  return guarded("a broadcast", [&] {
    one(&n, sizeof n);
    bytes.resize(n);
    if (n > 0) one(bytes.data(), n);
  });
}

}  // namespace swept::trainer
