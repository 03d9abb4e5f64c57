// The read model: every read of the store that the dashboard (web/), the
// CLI's --db commands and the scheduler's answers to client queries make,
// returning typed rows. Nothing outside store/ has SQL of its own.
//
// Every function takes a Connection (read-only from open_reader() or a
// ConnectionPool; the scheduler passes its Writer's) and runs inside one
// read transaction, so an answer is a consistent snapshot even while the
// scheduler writes. A file without swept's tables answers with empty lists;
// an unknown id is NotFound; a bad request (unknown sort key, bad state) is
// InvalidArgument. Nothing here loads a whole sweep for the dashboard:
// trials are paged, series are downsampled, the scatter works on an evenly
// strided sample of at most a few thousand trials.
//
// "Best": the one definition, used by the dashboard, `swept status` and
// `swept best` alike, is the trial with the lowest (minimize) or highest
// (maximize) trials.metric_value among the sweep's completed, feasible
// trials (see "Constraints"); ties go
// to the lower trial id. A running trial's value may still change and a
// failed, lost or stopped trial did not finish its run, so none of them is
// "best".
//
// Constraints: a sweep's `constraints:` (docs/sweep-format.md) bound the
// final values of named metrics. A completed trial is feasible when every
// bound holds for its final value (the latest by step, trial_latest) of the
// metric named: sweeps::Constraint::violation <= 0, Optuna's constraints_func
// contract; a metric it never reported violates. Only completed trials are
// judged (a running trial's values may still change). An infeasible trial is
// never "best" (above: the best is the best feasible one), never on a front,
// and not in the optimisation history.
//
// Several objectives: a sweep whose file lists `metrics:` has no one best
// (`best` stays empty); its summary carries `front` instead: the
// non-dominated trials (sweeps/pareto.h pareto_front, equal points all on it)
// among its completed, feasible trials with a final value of every objective
// (the latest by step of each objective's metric, as trials.metric_value is
// the one metric's last value), and the hypervolume the front dominates
// against the reference point (sweeps/pareto.h reference_point: each
// objective's `ref` when the file gives one, else the worst value seen among
// those trials, feasible or not). `swept best`, `swept status` and the
// dashboard show this one front.
//
// The objectives and constraints come from the sweep's file (sweeps.spec),
// read by sweeps/ (the one parser of sweep files), once per file text in this
// process; a file this build can no longer parse reads as its metric alone,
// without constraints.
//
// A metric never reported: a sweep's summary carries metric_missing when the
// sweep names a metric, at least kMetricMissingAfter of its trials have
// completed, and no trial of the sweep (in any state) has reported a value of
// it; `reported` lists the metric names its first kMetricMissingNamesFrom
// completed trials did report. A completed trial's output is final, so one is
// enough evidence: the warning comes with the sweep's first completed trial,
// not after several trials' worth of compute. It is computed from the
// database, so it holds after a scheduler restart and reads the same in
// `swept status`, the dashboard and the scheduler's once-per-sweep log line.
//
// Thread safety: functions are reentrant; a Connection must not be shared
// between threads while a call runs.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/protocol.h"
#include "common/states.h"
#include "common/status.h"
#include "store/downsample.h"
#include "store/sqlite.h"

namespace swept::store {

// Opens an existing database read-only for the read model: NotFound when
// the file does not exist, Corruption when it is not a swept database, comes
// from a newer swept, or is damaged (store/integrity.h). kCheckedByWriter:
// this process's Writer opened the file a moment ago and ran that check
// (swept run), so it is not run a second time.
enum class ReaderCheck { kIntegrity, kCheckedByWriter };
Result<std::unique_ptr<Connection>> open_reader(const std::string& path, ReaderCheck check = ReaderCheck::kIntegrity);

inline constexpr int64_t kMetricMissingAfter = 1;
inline constexpr int64_t kMetricMissingNamesFrom = 20;

// The rows of sweeps and trials are common/rows.h's SweepRow and TrialRow,
// one type per table for the writer, this read model and the protocol.
// Here a SweepRow comes with its counts, best and metric_missing; a TrialRow
// of a page with its latest values (`latest`), its params nested as in the
// sweep file (the API flattens them: docs/api.md), and `damaged` saying why
// a row could not be read whole.

// A parameter or metric column of a sweep's table. Flattened parameter names
// join nested keys with '.' ("optimizer.lr").
struct SweepColumns {
  std::vector<std::string> params;
  std::vector<std::string> metrics;
};

struct TrialQuery {
  int64_t sweep_id = 0;
  std::vector<TrialState> states;  // empty: all
  // "id", "idx", "state", "attempts", "agent", "metric" (the sweep's metric),
  // "started_at", "ended_at", "param:NAME", "metric:NAME".
  std::string sort = "idx";
  bool descending = false;
  int64_t limit = 50;  // 1..1000
  int64_t offset = 0;  // >= 0
  // How to sort by metric:NAME (see list_trials); tests force each plan.
  enum class MetricPlan { kAuto, kIndexWalk, kPerTrial } metric_plan = MetricPlan::kAuto;
};

struct TrialPage {
  int64_t total = 0;  // rows matching the state filter
  TrialQuery query;
  SweepColumns columns;
  std::optional<int64_t> best_trial_id;
  std::vector<TrialRow> rows;
};

struct AttemptRow {
  int64_t attempt = 0;
  std::string agent;
  TrialState state = TrialState::kRunning;  // of this attempt: running, or how it ended
  std::vector<int64_t> gpus;
  std::optional<double> gpu_fraction, ended_at;
  std::optional<int64_t> exit_code;
  std::optional<std::string> reason;
  double started_at = 0;
};

struct MetricSeries {
  int64_t trial_id = 0;
  std::string name;
  int64_t total_points = 0;  // before downsampling
  // An early-stopped trial (schema v4): the step of the value its rule
  // judged, and the rule's reason; the dashboard marks it on the curve.
  std::optional<int64_t> stopped_step;
  std::optional<std::string> stopped_reason;
  std::vector<SeriesPoint> points;
};

struct TrialDetail {
  TrialRow row;  // with its command, exit, reason, latest values and suggestion
  std::string sweep_name;
  std::optional<std::string> sweep_metric;
  std::map<std::string, std::string> env;
  double created_at = 0;
  std::string log_tail;
  std::vector<AttemptRow> attempts;
  std::vector<MetricSeries> series;
};

struct SweepPoints {
  std::vector<std::string> params;
  std::optional<std::string> metric_name, metric_goal;
  int64_t population = 0;  // trials in the sweep (sampled or not), imported ones included
  int64_t stride = 1;      // every stride-th trial by idx (those with a metric value), plus the best ones
  // params + metric_value only; with constraints, `feasible`/`violated` on
  // those that count for best.
  std::vector<TrialRow> points;
};

// The optimisation history of a sweep: the trials that "best" ranks (its
// completed trials with a value of the metric), by index, each with the best
// value so far (the one definition above, over every such trial) in trial
// order (idx) and in completion order (ended_at, then id).
struct HistoryPoint {
  int64_t trial_id = 0, idx = 0;
  double value = 0;
  std::optional<double> ended_at;
  double best_by_index = 0;  // best among such trials with idx <= this one's
  double best_by_time = 0;   // best among such trials that ended no later than this one
};
struct OptimizationHistory {
  int64_t sweep_id = 0;
  std::optional<std::string> metric_name, metric_goal;
  double created_at = 0;
  int64_t total = 0;   // trials in the history before sampling
  int64_t stride = 1;  // every stride-th of them kept, plus each that improved the best
  std::optional<BestTrial> best;  // the sweep's best (params left empty)
  std::vector<HistoryPoint> points;
};

// The completed trials of a sweep with a final value of every objective,
// for the dashboard's front charts and the importance per objective: each
// with its values (in the order of `objectives`), feasibility, whether it is
// on the front, and its params. Every stride-th such trial by idx is kept,
// plus every trial on the front.
struct ObjectivePoint {
  int64_t trial_id = 0, idx = 0;
  std::vector<double> values;         // one per objective
  bool feasible = true;               // see "Constraints"
  std::vector<std::string> violated;  // the constraints it violates
  bool on_front = false;
  nlohmann::json params = nlohmann::json::object();  // nested, as in the sweep file
};
struct ObjectivePoints {
  int64_t sweep_id = 0;
  std::vector<Objective> objectives;  // the sweep's one metric, or its `metrics:`; empty without a metric
  std::vector<ConstraintBound> constraints;
  std::optional<ParetoFront> front;  // several objectives only, as the summary's
  std::vector<std::string> params;   // flattened parameter names
  int64_t total = 0;                 // such trials before sampling
  int64_t stride = 1;
  std::vector<ObjectivePoint> points;
};

// Running trials and per-sweep state counts: what the live-update poller
// compares between polls. Its sweeps come without their fronts (a front
// changes only when a trial completes, which the counts show).
struct LiveSnapshot {
  std::vector<SweepRow> sweeps;
  std::map<int64_t, int64_t> running;  // trial id -> sweep id
  int64_t max_trial_id = 0;
};

// Trials of a sweep ordered by one parameter, kept in memory between requests.
// A trial's parameters never change once it exists (schema.sql), so an entry
// only grows: each use reads the trials added since (by idx) and re-sorts.
// Sorting 100,000 trials by a JSON value in SQL costs a parse of every row on
// every request; this pays it once per (sweep, parameter). At most
// `max_entries` entries are kept (least recently used dropped).
// Order: numbers ascending, then text, then trials without the parameter;
// ties by idx. Thread-safe.
class ParamSortCache {
 public:
  explicit ParamSortCache(size_t max_entries = 16) : max_entries_(max_entries) {}
  struct Key {
    int64_t id = 0, idx = 0;
    int kind = 2;  // 0 number, 1 text, 2 absent
    double number = 0;
    std::string text;
  };
  // The sweep's trials sorted ascending by `json_path` (see above).
  Result<std::shared_ptr<const std::vector<Key>>> sorted(Connection& db, int64_t sweep_id, const std::string& json_path);

 private:
  struct Entry {
    std::shared_ptr<const std::vector<Key>> keys;
    int64_t max_idx = -1;
    uint64_t last_used = 0;
  };
  size_t max_entries_;
  Mutex mu_;
  uint64_t clock_ SWEPT_GUARDED_BY(mu_) = 0;
  std::map<std::pair<int64_t, std::string>, Entry> entries_ SWEPT_GUARDED_BY(mu_);
};

Result<std::vector<SweepRow>> list_sweeps(Connection& db);
Result<SweepRow> get_sweep(Connection& db, int64_t sweep_id);
Result<SweepColumns> sweep_columns(Connection& db, int64_t sweep_id);
// `param_cache` (may be null: sort in SQL) serves sorts by parameter.
Result<TrialPage> list_trials(Connection& db, const TrialQuery& query, ParamSortCache* param_cache = nullptr);
Result<TrialDetail> get_trial(Connection& db, int64_t trial_id, size_t max_points);
// Series of `metric` (all metrics when empty) for each trial, each downsampled
// to at most `max_points`. Unknown trial ids yield no series.
Result<std::vector<MetricSeries>> metric_series(Connection& db, const std::vector<int64_t>& trial_ids,
                                                const std::string& metric, size_t max_points);
// Agents by name, each with its GPUs and running trials: the dashboard's
// list, QUERY_AGENTS' answer and `swept agents --db` alike. `seen_since`
// (Unix seconds): only agents alive or last seen since then (the live
// view); nullopt: every agent the database keeps.
Result<std::vector<AgentRow>> list_agents(Connection& db, std::optional<double> seen_since = std::nullopt);
// Every stride-th trial (by idx, from the lowest: imported trials first)
// with a metric value, at most `max_points`, plus the `best_count` best ones
// as "best" ranks them (completed or imported, feasible).
Result<SweepPoints> sweep_points(Connection& db, int64_t sweep_id, int64_t max_points, int64_t best_count = 20);
Result<LiveSnapshot> live_snapshot(Connection& db, size_t max_running);
// The optimisation history (above), at most about `max_points` (1..20000)
// points: every stride-th trial by idx, plus every trial that improved the
// best in either order (so both staircases keep every step; when those alone
// are more than max_points, every k-th of them). NotFound for an unknown id.
Result<OptimizationHistory> optimization_history(Connection& db, int64_t sweep_id, int64_t max_points);
// The objective points (above), at most about `max_points` (1..20000) plus
// the front. NotFound for an unknown id.
Result<ObjectivePoints> objective_points(Connection& db, int64_t sweep_id, int64_t max_points);

// ---- the rows of the protocol (common/protocol.h) ----
// What the scheduler answers to QUERY_SWEEPS / QUERY_TRIALS / QUERY_AGENTS
// and what the CLI's --db commands print: the same rows as above, in the
// protocol's order. sweep_summaries(id) is NotFound for an unknown id; all
// sweeps come by id (the dashboard's list is newest first).
Result<std::vector<SweepRow>> sweep_summaries(Connection& db, std::optional<int64_t> sweep_id);
// trial_rows: the trials of a sweep with index above `after_index`, at most
// `limit` (-1: all), in index order, with their latest values, suggestion
// and stop decision. The default is every trial: a warm start's imported
// trials have indices below 0 (issue 28).
Result<std::vector<TrialRow>> trial_rows(Connection& db, int64_t sweep_id,
                                         int64_t after_index = std::numeric_limits<int64_t>::min(),
                                         int64_t limit = -1);
// The bounded tail of a trial's output ("" when it printed nothing).
Result<std::string> trial_log_tail(Connection& db, int64_t trial_id);

}  // namespace swept::store
