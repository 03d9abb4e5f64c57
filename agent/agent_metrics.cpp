// The agent's metrics path (agent/agent_loop.h): a trial's metric points and
// log become numbered METRICS batches, kept until the scheduler acknowledges
// them (bounded while it is away), and each trial's outbox sends
// TRIAL_STARTED, then the batches, then the exit, in that order.
#include <algorithm>
#include <utility>

#include "agent/agent_loop.h"

namespace swept::agent::loop {
namespace {

// Unacknowledged records kept per trial while the scheduler is away (the
// protocol asks for at least 65,536); older batches are dropped beyond this.
constexpr size_t kMaxUnackedRecordsPerTrial = 262144;

}  // namespace

// Moves the supervisor's pending metrics and log into numbered batches.
void Agent::make_batches(const TrialKey& key, HostedTrial& t, int64_t now) {
  std::vector<MetricPoint> points = t.supervisor->take_metrics();
  log_dropped_points(key, t);
  PendingLog::Taken log = t.supervisor->take_log();
  t.last_batch_ms = now;
  if (points.empty() && log.text.empty() && log.dropped == 0) return;
  size_t next = 0;
  do {
    pr::Metrics batch;
    batch.trial_id = key.trial_id;
    batch.attempt = key.attempt;
    batch.seq = t.next_seq++;
    size_t end = std::min(points.size(), next + kMaxRecordsPerBatch);
    for (; next < end; ++next) {
      batch.records.push_back(pr::MetricRecord{points[next].step, std::move(points[next].name), points[next].value});
    }
    if (!log.text.empty() || log.dropped) {  // the log rides on the first batch
      batch.log = std::move(log.text);
      batch.log_dropped = static_cast<int64_t>(log.dropped);
      log = {};
    }
    t.unacked_records += batch.records.size();
    t.unacked.push_back(std::move(batch));
  } while (next < points.size());
  bound_unacked(key, t);
  send_outbox(key, t);
}

void Agent::bound_unacked(const TrialKey& key, HostedTrial& t) {
  uint64_t dropped_before = t.dropped_records;
  while (t.unacked_records > kMaxUnackedRecordsPerTrial && t.unacked.size() > 1) {
    t.dropped_records += t.unacked.front().records.size();
    t.unacked_records -= t.unacked.front().records.size();
    t.unacked.pop_front();
  }
  if (t.dropped_records != dropped_before) {
    log::warn(describe(key) + ": " + std::to_string(t.dropped_records) +
              " metric records dropped so far, unacknowledged while the scheduler is away");
  }
}

void Agent::log_dropped_points(const TrialKey& key, HostedTrial& t) {
  const uint64_t dropped = t.supervisor->dropped_metrics();
  if (dropped == t.dropped_points_logged) return;
  t.dropped_points_logged = dropped;
  log::warn(describe(key) + ": " + std::to_string(dropped) +
            " metric points dropped so far, printed faster than the agent could take them");
}

void Agent::apply_acks(const std::vector<pr::MetricsAck>& acks) {
  for (const auto& a : acks) {
    auto it = trials_.find(TrialKey{a.trial_id, a.attempt});
    if (it == trials_.end()) continue;
    HostedTrial& t = it->second;
    while (!t.unacked.empty() && t.unacked.front().seq <= a.seq) {
      t.unacked_records -= t.unacked.front().records.size();
      t.unacked.pop_front();
    }
    t.sent_seq = std::max(t.sent_seq, a.seq);
  }
}

// Sends, in order, the trial's TRIAL_STARTED if it is still due, the
// batches not yet sent on this connection and then, once they are all out,
// the exit record. Stops at the first refusal (a full queue) so that order
// holds; the rest goes on a later turn.
void Agent::send_outbox(const TrialKey& key, HostedTrial& t) {
  if (link_state_ != Link::kRegistered) return;
  if (t.supervisor && !t.started_reported) {
    send_trial_started(key, t);
    if (!t.started_reported) return;
  }
  for (const pr::Metrics& batch : t.unacked) {
    if (batch.seq <= t.sent_seq) continue;
    if (!send(batch)) return;
    t.sent_seq = batch.seq;
  }
  if (t.exited && !t.exit_sent) t.exit_sent = send(*t.exited);
}

}  // namespace swept::agent::loop
