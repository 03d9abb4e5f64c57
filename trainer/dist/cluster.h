// Cluster: the processes of a parameter-server run and which one this is,
// read once from the environment, the way TensorFlow reads it:
//
//   TF_CONFIG = {"cluster": {"worker": ["host:port", ...], "ps": ["host:port", ...]},
//                "task": {"type": "worker" | "ps", "index": i}}
//   SWEPT_ROLE = worker | ps, SWEPT_ROLE_INDEX = i   (what swept's agent also
//                sets; when TF_CONFIG has a "task" too, the two must agree)
//
// The cluster (every address) comes only from TF_CONFIG: the servers bind
// the port of their own entry on every interface, the workers connect to
// every "ps" entry. A worker's port is not used (TensorFlow's workers serve
// there; swept-train's do not), only the count and the index.
// Errors name the variable and what to set (the trainer exits 2).
// Thread-safe: pure.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/options.h"

namespace swept::trainer {

enum class Role { kWorker, kServer };

struct Endpoint {
  std::string host;
  int port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

struct Cluster {
  std::vector<Endpoint> workers;
  std::vector<Endpoint> servers;  // TF_CONFIG's "ps"
  Role role = Role::kWorker;
  int index = 0;  // within its role
  std::string role_name() const { return role == Role::kWorker ? "worker" : "ps"; }
};

// Errors (kInvalidArgument): TF_CONFIG unset or not JSON of the shape above,
// no "ps" or no "worker" entries, an entry that is not "host:port", a task
// type other than worker/ps, an index out of range, a "task" and
// SWEPT_ROLE/SWEPT_ROLE_INDEX that disagree, or neither of them.
Result<Cluster> cluster_from_env(const EnvLookup& env);

// The flags that depend on the cluster: --backup_workers below the workers,
// --max_staleness meaningful, the batch divisible by the workers.
Status check_ps_config(const TrainConfig& config, const Cluster& cluster);

}  // namespace swept::trainer
