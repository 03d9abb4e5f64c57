// A worker's side of the parameter servers (ps_protocol.h): one DEALER per
// server, a request to every server at once and their replies gathered, the
// full parameter vector assembled from the slices.
//
// Every wait is bounded: by the world timeout (SWEPT_RENDEZVOUS_TIMEOUT)
// while the servers do not answer at all, and a server whose connection
// drops (it ended: failure, signal) is reported at once through a socket
// monitor, never waited on. A kAbort reply (the server ended the attempt:
// another worker was lost) is kIoError carrying the server's reason.
// Thread safety: one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "common/status.h"
#include "trainer/dist/cluster.h"
#include "trainer/dist/ps_protocol.h"

namespace swept::trainer {

// What a pull returns besides the parameters: server 0's view.
struct PullResult {
  int64_t min_version = 0;  // the lowest version among the servers' slices
  int64_t version0 = 0;     // server 0's version (async: updates applied in all)
  int64_t unit = -1;        // the unit of work handed out (kWantUnitFlag), -1 none
  PsReply stats;            // server 0's staleness counters
  bool stopped = false;     // the stop flag was set while waiting: nothing else is valid
};

class PsClient {
 public:
  // Connects to every server of `cluster` and says hello (checks that they
  // serve the same workers and model). Errors: kIoError (a server not
  // answering within `timeout`), kInvalidArgument (the server refused:
  // another TF_CONFIG or model). Every wait also ends, within 100 ms, once
  // *stop is true (SIGTERM: a sync pull may wait long for a straggler), with
  // PullResult::stopped.
  static Result<std::unique_ptr<PsClient>> connect(const Cluster& cluster, size_t total_params,
                                                   std::chrono::milliseconds timeout,
                                                   const std::atomic<bool>* stop = nullptr);
  ~PsClient();

  // Pushes `grad` (all parameters' gradient; null: nothing to push)
  // computed on the versions of the last pull, with the learning rate `lr`;
  // then pulls every slice into `params` once each server's version reaches
  // min_version. want_unit: ask server 0 for the next of `total_units`.
  Result<PullResult> step(const float* grad, double lr, int64_t min_version, bool want_unit, int64_t total_units,
                          std::vector<float>& params);
  // Says this worker is done. wait_all (worker 0): waits until every worker
  // is, and pulls the final parameters into *params.
  Result<PullResult> done(bool wait_all, std::vector<float>* params);
  // Worker 0's last word: every server stops.
  Status stop();

 private:
  struct Link;
  PsClient() = default;
  Status send(size_t server, const PsRequest& req, const void* payload, size_t bytes);
  Result<PullResult> gather(const char* what, std::vector<float>* params);

  int worker_ = 0;
  int workers_ = 0;
  std::chrono::milliseconds timeout_{0};
  const std::atomic<bool>* stop_ = nullptr;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<std::pair<size_t, size_t>> slices_;
  std::vector<int64_t> versions_;  // of each server's slice at the last pull
};

}  // namespace swept::trainer
