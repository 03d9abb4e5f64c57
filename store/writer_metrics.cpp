// The writer's metrics and logs (writer.h, "metrics and logs"): METRICS
// batches stored once each (their seq makes a re-sent batch a no-op), the
// latest value per name, the sweep's metric on the trial, and the bounded
// tail of a trial's output.
#include <string>
#include <string_view>
#include <unordered_map>

#include "store/schema.h"
#include "store/writer.h"
#include "store/writer_cached.h"

namespace swept::store {

Result<int64_t> Writer::metrics_seq(int64_t trial_id, int attempt) {
  SWEPT_CACHED(st, "SELECT metrics_seq FROM attempts WHERE trial_id=? AND attempt=?");
  st.bind(1, trial_id);
  st.bind(2, attempt);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  int64_t seq = row ? st.int64(0) : 0;
  st.reset();
  return seq;
}

Result<bool> Writer::add_metrics(const protocol::Metrics& batch, const std::optional<std::string>& metric_name) {
  auto stored = metrics_seq(batch.trial_id, batch.attempt);
  if (!stored.ok()) return stored.status();
  if (batch.seq <= *stored) return false;

  SWEPT_CACHED(ins,
                "INSERT INTO metrics(trial_id, name, step, value) VALUES(?,?,?,?) "
                "ON CONFLICT(trial_id, name, step) DO UPDATE SET value=excluded.value");
  // The latest value per name within this batch: the highest step, the last
  // one printed on ties (docs/metrics.md: a repeated step keeps the last).
  std::unordered_map<std::string_view, const protocol::MetricRecord*> latest;
  const protocol::MetricRecord* metric_last = nullptr;
  for (const auto& r : batch.records) {
    ins.bind(1, batch.trial_id);
    ins.bind(2, std::string_view(r.name));
    ins.bind(3, r.step);
    ins.bind(4, r.value);
    SWEPT_RETURN_IF_ERROR(ins.run());
    auto& slot = latest[r.name];
    if (!slot || r.step >= slot->step) slot = &r;
    if (metric_name && r.name == *metric_name) metric_last = &r;
  }
  SWEPT_CACHED(lat,
                "INSERT INTO trial_latest(trial_id, name, step, value) VALUES(?,?,?,?) "
                "ON CONFLICT(trial_id, name) DO UPDATE SET step=excluded.step, value=excluded.value "
                "WHERE excluded.step >= trial_latest.step");
  for (const auto& [name, r] : latest) {
    lat.bind(1, batch.trial_id);
    lat.bind(2, std::string_view(r->name));
    lat.bind(3, r->step);
    lat.bind(4, r->value);
    SWEPT_RETURN_IF_ERROR(lat.run());
  }
  if (metric_last) {
    SWEPT_CACHED(mv, "UPDATE trials SET metric_value=? WHERE id=?");
    mv.bind(1, metric_last->value);
    mv.bind(2, batch.trial_id);
    SWEPT_RETURN_IF_ERROR(mv.run());
  }
  SWEPT_CACHED(seq, "UPDATE attempts SET metrics_seq=? WHERE trial_id=? AND attempt=?");
  seq.bind(1, batch.seq);
  seq.bind(2, batch.trial_id);
  seq.bind(3, batch.attempt);
  SWEPT_RETURN_IF_ERROR(seq.run());
  if (!batch.log.empty()) SWEPT_RETURN_IF_ERROR(append_log(batch.trial_id, batch.log));
  return true;
}

Status Writer::append_log(int64_t trial_id, const std::string& chunk) {
  if (chunk.empty()) return Status::Ok();
  std::string tail;
  SWEPT_CACHED(get, "SELECT tail FROM trial_logs WHERE trial_id=?");
  get.bind(1, trial_id);
  SWEPT_ASSIGN_OR_RETURN(row, get.step());
  if (row) tail = get.text(0);
  get.reset();
  tail += chunk;
  if (tail.size() > kLogTailBytes) {
    size_t cut = tail.size() - kLogTailBytes;
    // Do not start in the middle of a UTF-8 sequence.
    while (cut < tail.size() && (static_cast<unsigned char>(tail[cut]) & 0xC0) == 0x80) ++cut;
    tail.erase(0, cut);
  }
  SWEPT_CACHED(put,
                "INSERT INTO trial_logs(trial_id, tail) VALUES(?,?) ON CONFLICT(trial_id) DO UPDATE SET "
                "tail=excluded.tail");
  put.bind(1, trial_id);
  put.bind(2, tail);
  SWEPT_RETURN_IF_ERROR(put.run());
  return Status::Ok();
}

}  // namespace swept::store
