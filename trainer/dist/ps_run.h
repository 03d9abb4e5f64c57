// A run with --strategy=ps: this process's role from the environment
// (cluster.h), then either the parameter server (ps_server.h) or a worker's
// loop (pull, compute, push), worker 0 printing the metric lines.
// Thread safety: called once, from main.
#pragma once

#include <atomic>
#include <ostream>

#include "trainer/options.h"

namespace swept::trainer {

// Returns the process exit code (common/exit_codes.h): 2 for a bad
// TF_CONFIG/SWEPT_ROLE or flags the cluster rules out, 1 when a peer is
// lost (the attempt ends), 130 on a stop request.
int run_parameter_server_strategy(const TrainConfig& config, const EnvLookup& env, std::ostream& metrics,
                                  const std::atomic<bool>& stop_requested);

}  // namespace swept::trainer
