// World: which process of a multi-process run this is, read once from the
// environment that torchrun (and swept's agent, docs/protocol.md) sets, or
// from Slurm's when RANK is absent. The contract, exactly (trainer/README.md,
// "Across processes and hosts"):
//
//   WORLD_SIZE        processes in the run (1 .. 65536); with RANK, or neither
//   RANK              this process, 0 .. WORLD_SIZE-1
//   LOCAL_RANK        this process on its host (default 0): picks its GPUs
//   LOCAL_WORLD_SIZE  processes on this host (default 1)
//   MASTER_ADDR       rank 0's host as the others reach it; required when WORLD_SIZE > 1
//   MASTER_PORT       rank 0's rendezvous port (default 29500, torchrun's)
//   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID: RANK, WORLD_SIZE, LOCAL_RANK
//                     when neither RANK nor WORLD_SIZE is set and MASTER_ADDR
//                     is (srun; a process merely started inside an srun
//                     task, like a swept agent's trial, has no MASTER_ADDR)
//   SWEPT_RENDEZVOUS_TIMEOUT  seconds (default 300) a rank may wait for the
//                     rendezvous, and for any one collective, before it gives up
//   GLOO_SOCKET_IFNAME  the network interface Gloo binds (else the one that
//                     routes to MASTER_ADDR; see process_group.h)
//
// None of them set: one process (the run of every earlier version).
// Thread-safe: pure.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"
#include "trainer/options.h"

namespace swept::trainer {

struct World {
  int size = 1;
  int rank = 0;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr;  // empty when size == 1
  int master_port = 29500;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  std::string socket_ifname;  // GLOO_SOCKET_IFNAME's first name, or empty
  std::string source = "none";  // "torchrun" (RANK/WORLD_SIZE), "slurm" or "none", for the logs

  bool distributed() const { return size > 1; }
};

// Errors (kInvalidArgument, the trainer exits 2): a value that is not a
// whole number in range, RANK without WORLD_SIZE or the reverse, RANK >=
// WORLD_SIZE, LOCAL_RANK >= LOCAL_WORLD_SIZE, WORLD_SIZE > 1 without
// MASTER_ADDR, a bad MASTER_PORT or SWEPT_RENDEZVOUS_TIMEOUT. Each message
// names the variable and what to set.
Result<World> world_from_env(const EnvLookup& env);

}  // namespace swept::trainer
