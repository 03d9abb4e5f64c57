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
// Errors are Status values (Gloo's exceptions end here): kIoError when a
// peer is unreachable, gone, or slower than World::timeout.
// Thread safety: one thread at a time (the trainer's replica 0 or its main
// thread, never both at once).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "trainer/allreduce.h"
#include "trainer/dist/world.h"

namespace gloo {
class Context;
}

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
  template <typename Fn>
  Status guarded(const char* what, Fn&& fn);

  World world_;
  std::string address_;
  std::unique_ptr<RendezvousServer> server_;  // rank 0 only
  std::unique_ptr<RendezvousClient> client_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;  // every rank makes the same calls, so the tags agree
};

// The local address that a packet to `host` would leave from (step 2
// above), e.g. "10.0.0.2"; kIoError when there is no route.
Result<std::string> local_address_towards(const std::string& host);

}  // namespace swept::trainer
