// ProcessGroup: the processes of a multi-process run, joined. Rank 0 serves
// the rendezvous (rendezvous.h) at MASTER_PORT, every rank connects to it,
// and Gloo's full-mesh connect over that store gives each pair of processes a
// TCP connection; the collectives (sum, all-gather, broadcast) then run on
// Gloo, the library PyTorch uses for CPU tensors, so the bytes travel the
// way they do under torch.distributed's "gloo" backend.
//
// Which address Gloo binds and advertises to the others, in this order:
//  1. GLOO_SOCKET_IFNAME (World::socket_ifname): that interface's address;
//  2. else the local address of a route to MASTER_ADDR (a UDP socket
//     connected there, never sent on: the kernel picks the source address
//     it would use), which is the address the other hosts can reach;
//  3. else the host name.
// Not the host name first: in containers and network namespaces it often
// resolves to 127.0.0.1, and the others then wait on an address they cannot
// reach until they time out.
//
// sum() with exactly two processes is not Gloo's ring but one exchange:
// each rank sends its whole buffer to the other and adds what it receives
// (a + b on one side, b + a on the other: the same bits, as float addition
// is commutative). A ring of two moves the same bytes each way (half in the
// reduce-scatter, half in the all-gather) but in two dependent phases, each
// a rendezvous of Gloo's unbound buffers (a "ready to receive" notice must
// reach the sender before its data goes); the exchange is one phase. Large
// buffers go in segments, so the sum of one overlaps the arrival of the next.
// Each rank also posts the receive of its NEXT sum of the same length as
// soon as this one is done (a "lane" per length: the gradient, the stop
// check), so the peer's next send finds it posted and leaves at once from
// the peer's own thread, with no notice to wait for; a rank that arrives
// late finds the other's data already received.
//
// Errors are Status values (Gloo's exceptions end here): kIoError when a
// peer is unreachable, gone, or slower than World::timeout.
// Thread safety: one thread at a time (the trainer's replica 0 or its main
// thread, never both at once).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/allreduce.h"
#include "trainer/dist/world.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace swept::trainer {

class RendezvousServer;
class RendezvousClient;

class ProcessGroup final : public CrossProcess {
 public:
  // Joins the world (world.size > 1): blocks until every rank has joined or
  // world.timeout has passed.
  static Result<std::unique_ptr<ProcessGroup>> join(const World& world);
  ~ProcessGroup() override;

  int size() const override { return world_.size; }
  int rank() const override { return world_.rank; }
  Status sum(float* data, size_t count) override;
  Status all_gather(const float* in, size_t count, float* out) override;
  Status broadcast(std::vector<char>& bytes) override;

  // The rendezvous store, for what else the ranks exchange (NCCL's id).
  RendezvousClient& store() { return *client_; }
  // The address Gloo advertises, and how it was chosen (for the log).
  const std::string& address() const { return address_; }

 private:
  ProcessGroup() = default;
  Status connect_mesh();
  // The two-process sum (see above); throws what Gloo throws.
  void exchange_sum(float* data, size_t count);
  template <typename Fn>
  Status guarded(const char* what, Fn&& fn);

  World world_;
  std::string address_;
  std::unique_ptr<RendezvousServer> server_;  // rank 0 only
  std::unique_ptr<RendezvousClient> client_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;  // every rank makes the same calls, so the tags agree
  // exchange_sum's receive areas, one lane per element count (the peer's
  // buffer lands in `scratch`, registered with Gloo as `buffer`). Both ranks
  // make the same calls, so lane numbers (order of first use) and sequence
  // numbers agree and make the slots of the messages.
  struct Lane {
    uint64_t index = 0;
    uint64_t seq = 0;     // the sum this lane does next
    bool posted = false;  // its receive is already posted
    std::vector<float> scratch;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  };
  std::map<size_t, Lane> lanes_;
  uint64_t next_lane_ = 0;
};

// The local address that a packet to `host` would leave from (step 2
// above), e.g. "10.0.0.2"; kIoError when there is no route.
Result<std::string> local_address_towards(const std::string& host);

}  // namespace swept::trainer
