// A parameter server: one slice of the model's parameters (ps_protocol.h's
// ps_slice), its optimiser state (momentum's velocity, Adam's m and v), and
// the rule that turns the workers' pushed gradients into updates:
//
//   async           every push is applied as it arrives (its staleness is
//                   recorded); with --max_staleness=S a worker's pull waits
//                   while it has pushed more than S times more than the
//                   slowest unfinished worker (stale synchronous parallel).
//   sync, K backups each version takes the first N - K gradients computed on
//                   it, applies their mean (summed in worker order, so the
//                   result does not depend on arrival order) and counts the
//                   later ones as dropped. K = 0: plain synchronous training,
//                   the same update as the all-reduce.
//
// The update is the CPU backend's optimizer_update, per piece of each tensor
// in the slice, with the learning rate the pushing worker's schedule gave
// and Adam's corrections from this server's own count of updates, so a
// synchronous run applies exactly the all-reduce's arithmetic.
//
// A worker lost before it said it was done (its connection dropped: killed,
// crashed) ends the attempt: every worker is told (kAbort) and the server
// exits 1, so the gang ends as one and is retried (trainer/README.md).
// Thread safety: run on one thread; `stop` may be set from any.
#pragma once

#include <atomic>

#include "trainer/dist/cluster.h"
#include "trainer/options.h"

namespace swept::trainer {

// Serves cluster.servers[cluster.index] until worker 0 sends kStop (returns
// kExitOk), a worker is lost (kExitFailure), `stop` becomes true
// (kExitInterrupted; the workers are told) or the port cannot be bound
// (kExitFailure, naming it).
int serve_parameters(const TrainConfig& config, const Cluster& cluster, const std::atomic<bool>& stop);

}  // namespace swept::trainer
