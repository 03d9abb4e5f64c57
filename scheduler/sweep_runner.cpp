// SweepRunner: see sweep_runner.h. Parsing and expansion are sweeps/'s; this
// file only keeps queues and counts and records what happens in the store.
#include "scheduler/sweep_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "common/log.h"
#include "store/rows.h"
#include "sweeps/search/search.h"
#include "sweeps/trial.h"

namespace swept::scheduler {
namespace {

const char* method_name(sweeps::Method m) {
  switch (m) {
    case sweeps::Method::kGrid: return "grid";
    case sweeps::Method::kRandom: return "random";
    case sweeps::Method::kBayes: return "bayes";
    case sweeps::Method::kTpe: return "tpe";
    case sweeps::Method::kNsga2: return "nsga2";
    case sweeps::Method::kPbt: return "pbt";
  }
  return "grid";
}

sweeps::CommandContext command_context() {
  sweeps::CommandContext c;
  c.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  return c;
}

Result<sweeps::SweepSpec> parse_or_explain(const std::string& text) {
  sweeps::ParseOutcome out = sweeps::parse_sweep(text);
  if (out.spec) return std::move(*out.spec);
  std::string msg;
  for (const auto& p : out.problems) {
    if (!msg.empty()) msg += "\n";
    msg += p.ToString();
  }
  if (msg.empty()) msg = "the sweep file is invalid";
  return Status::InvalidArgument(msg);
}

// A name from a sweep file or a trial's output, for one log line: control
// characters, quotes, backslashes and non-ASCII escaped as in JSON, so that a
// metric named "loss\n..." or holding terminal escapes cannot forge a line.
std::string log_safe(const std::string& name) {
  std::string quoted = nlohmann::json(name).dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

// Several objectives or constraints: each finished trial's final value of
// every objective and its constraint violations, from trial_latest (the value
// at the highest step: "final" as for one metric). A trial that did not
// complete keeps none, so the searchers treat it as failed; a metric it never
// reported is NaN (an objective: failed; a constraint: violated).
Status attach_final_values(store::Connection& db, const sweeps::SweepSpec& spec,
                           const store::Writer::SearchHistoryRows& rows, sweeps::search::SearchHistory& history) {
  std::vector<TrialRow> trials(rows.finished_ids.size());
  for (size_t i = 0; i < trials.size(); ++i) trials[i].id = rows.finished_ids[i];
  SWEPT_RETURN_IF_ERROR(store::fill_latest(db, trials));
  for (size_t i = 0; i < trials.size() && i < history.finished.size(); ++i) {
    if (!rows.finished_completed[i]) continue;
    auto final_of = [&](const std::string& name) {
      auto it = trials[i].latest.find(name);
      return it == trials[i].latest.end() ? std::nan("") : it->second;
    };
    sweeps::search::Observation& o = history.finished[i];
    if (sweeps::is_multi_objective(spec))
      for (const sweeps::Metric& m : spec.objectives) o.values.push_back(final_of(m.name));
    for (const sweeps::Constraint& c : spec.constraints) o.violations.push_back(c.violation(final_of(c.name)));
  }
  return Status::Ok();
}

// With several objectives: which objective's target the trial's final values
// reach first (in the file's order), said as for one metric; nullopt if none.
std::optional<std::string> objective_target_reached(const sweeps::SweepSpec& spec, const TrialRow& trial) {
  for (const sweeps::Metric& m : spec.objectives) {
    auto it = trial.latest.find(m.name);
    if (it == trial.latest.end() || !m.reaches_target(it->second)) continue;
    std::ostringstream why;
    why << "trial " << trial.id << " reached the target, " << log_safe(m.name) << " = " << it->second
        << (m.goal == sweeps::Goal::kMaximize ? " >= " : " <= ") << *m.target << " (metrics[].target)";
    return why.str();
  }
  return std::nullopt;
}

// Whether a trial the sweep ran reported its metric, from its summary: its
// best, unless a warm start's imported trials (issue 28), another sweep's
// reports, may be that best; then the read model's metric_missing rule (no
// trial of its own has a value) answers once one has completed.
bool reported_by_own(const SweepRow& s) {
  if (s.counts[TrialState::kImported] == 0) return s.best.has_value();
  return s.counts[TrialState::kCompleted] > 0 && !s.metric_missing;
}

// What one trial of the sweep holds while it runs (placement's Demand).
Demand demand_of(const sweeps::SweepSpec& spec) {
  Demand d;
  d.gpus = spec.resources.gpus;
  d.gpu_fraction = spec.resources.gpu_memory_fraction;
  d.cpus = std::max(1, spec.resources.cpus);
  d.nodes = std::max(1, spec.resources.nodes);
  d.procs_per_node = std::max(1, spec.resources.procs_per_node);
  d.segments = spec.pbt != nullptr;  // its segments' checkpoints need START_TRIAL `checkpoint` (issue 29)
  d.ps = spec.resources.ps;  // issue 30: parameter servers
  d.ps_nodes = spec.resources.ps_nodes;
  return d;
}

// A running gang's processes as its sweep's file lays them out (issue 30),
// for an attempt started before schema 9, which kept none (attempts.gang):
// the layout dispatch gives (Demand::server_node, Demand::node), its ports
// not known. nullopt for a one-node trial.
std::optional<GangRecord> gang_of_spec(const Demand& d) {
  if (!d.gang()) return std::nullopt;
  GangRecord g;
  g.worker_nodes = std::max(1, d.nodes);
  for (int r = 0; r < g.worker_nodes * d.procs_per_node; ++r) g.processes.push_back({"worker", r, r / d.procs_per_node, 0});
  for (int j = 0; j < d.ps; ++j) g.processes.push_back({"ps", j, d.server_node(j), 0});
  for (int n = 0; n < d.total_nodes(); ++n) g.slots.push_back(d.node(n).needs_gpu() ? 0 : std::max(1, d.node(n).cpus));
  return g;
}

}  // namespace

Result<std::vector<RecoveredTrial>> SweepRunner::recover() {
  std::vector<RecoveredTrial> running;
  auto sweeps = store_.sweeps_in_state(SweepState::kRunning);
  if (!sweeps.ok()) return sweeps.status();
  for (const SweepRow& r : *sweeps) {
    auto spec = parse_or_explain(r.spec);
    if (!spec.ok()) {
      // The file was valid when submitted; a newer sweeps/ may disagree.
      log::error("sweep " + std::to_string(r.id) + " can no longer be parsed (" + spec.status().message() +
                 "); leaving it as it is");
      continue;
    }
    Active a;
    a.id = r.id;
    a.spec = std::move(*spec);
    a.total = r.total_trials;
    a.next_index = r.next_index;
    SWEPT_ASSIGN_OR_RETURN(imported, store_.imported_indices(r.id));
    a.imported.insert(imported.begin(), imported.end());
    // (A `lost` trial is final: it had no retries left. `swept retry` takes it back.)
    auto ids = store_.trial_ids_in_state(r.id, TrialState::kQueued);
    if (!ids.ok()) return ids.status();
    for (int64_t id : *ids) a.queued.push_back(id);
    auto live = store_.trials_in_state(r.id, TrialState::kRunning);
    if (!live.ok()) return live.status();
    a.running = static_cast<int>(live->size());
    SWEPT_RETURN_IF_ERROR(store::fill_nodes(store_.connection(), *live));
    if (a.spec.metric) {
      // A metric found missing before the restart was said then: once per sweep.
      auto summary = store::get_sweep(store_.connection(), r.id);
      if (!summary.ok()) return summary.status();
      a.metric_seen = reported_by_own(*summary) || summary->metric_missing;
      // Its target reached before the restart: it still creates no trials.
      SWEPT_ASSIGN_OR_RETURN(reached, target_reached_by_own(a));
      a.target_reached = std::move(reached);
    }
    if (sweeps::is_multi_objective(a.spec)) {
      // Several objectives: any completed trial that reached one objective's target.
      auto done = store_.trials_in_state(r.id, TrialState::kCompleted);
      if (!done.ok()) return done.status();
      SWEPT_RETURN_IF_ERROR(store::fill_latest(store_.connection(), *done));
      for (const TrialRow& t : *done)
        if (!a.target_reached) a.target_reached = objective_target_reached(a.spec, t);
    }
    SWEPT_RETURN_IF_ERROR(make_stopper(a, true));
    make_population(a);
    std::vector<RecoveredTrial> mine;
    for (const TrialRow& t : *live) {
      RecoveredTrial rt;
      rt.trial_id = t.id;
      rt.sweep_id = t.sweep_id;
      rt.attempt = t.attempts;
      rt.agent = t.agent.value_or("");
      rt.gpus = t.gpus;
      rt.gpu_fraction = t.gpu_fraction.value_or(0);
      rt.started = t.started_at.has_value();
      rt.stop_decided = a.stopper && a.stopper->decided(t.id);
      rt.nodes = t.nodes;
      SWEPT_ASSIGN_OR_RETURN(gang, store_.attempt_gang(t.id, t.attempts));
      rt.gang = gang ? std::move(gang) : gang_of_spec(demand_of(a.spec));
      mine.push_back(std::move(rt));
    }
    if (a.population) SWEPT_RETURN_IF_ERROR(rebuild_population(a, mine));  // sweep_runner_pbt.cpp
    running.insert(running.end(), mine.begin(), mine.end());
    const bool pbt = a.population != nullptr;
    run(std::move(a));
    if (pbt) SWEPT_RETURN_IF_ERROR(pbt_maybe_round(r.id));  // every member had reached it: the round runs now
  }
  return running;
}

SweepTerms SweepRunner::terms(const Active& s) const {
  SweepTerms t;
  t.sweep_id = s.id;
  t.max_retries = s.spec.max_retries;
  const Demand d = demand_of(s.spec);
  t.cpus = d.needs_gpu() ? 0 : d.cpus;
  t.timeout_s = s.spec.timeout_s;
  t.limits = {s.spec.resources.memory_bytes, s.spec.resources.pids, s.spec.resources.cpus};
  if (s.spec.metric) t.metric = s.spec.metric->name;
  t.pbt = s.population != nullptr;
  return t;
}

void SweepRunner::run(Active a) {
  notices_.push_back(SweepNotice{true, terms(a)});
  const int64_t id = a.id;
  sweeps_.insert_or_assign(id, std::move(a));
}

void SweepRunner::end(std::map<int64_t, Active>::iterator it) {
  SweepNotice ended{false, {}};
  ended.terms.sweep_id = it->first;
  notices_.push_back(std::move(ended));
  sweeps_.erase(it);
  ++ended_count_;
}

Result<SubmitResult> SweepRunner::submit(const std::string& text, const WarmInput& warm) {
  auto spec = parse_or_explain(text);
  if (!spec.ok()) return spec.status();
  // A bad warm start is refused before anything is recorded.
  SWEPT_ASSIGN_OR_RETURN(candidates, warm_candidates(*spec, warm));
  Active a;
  a.spec = std::move(*spec);
  a.total = sweeps::trial_count(a.spec);
  SweepRow r;
  r.name = a.spec.name;
  r.method = method_name(a.spec.method);
  if (a.spec.metric) {
    r.metric_name = a.spec.metric->name;
    r.metric_goal = a.spec.metric->goal == sweeps::Goal::kMaximize ? "maximize" : "minimize";
  }
  r.spec = text;
  r.state = a.total && *a.total == 0 ? SweepState::kCompleted : SweepState::kRunning;
  r.total_trials = a.total;
  r.created_at = clock_.wall_seconds();
  auto id = store_.insert_sweep(r);
  if (!id.ok()) return id.status();
  a.id = *id;
  std::optional<std::string> warm_summary;
  if (candidates) {
    SWEPT_ASSIGN_OR_RETURN(summary, import_warm_start(a, *candidates));
    warm_summary = std::move(summary);
  }
  SWEPT_RETURN_IF_ERROR(make_stopper(a, false));
  make_population(a);
  if (r.state == SweepState::kRunning) {
    run(std::move(a));
    SWEPT_RETURN_IF_ERROR(maybe_complete(*id));  // a grid whose every point was imported
  }
  return SubmitResult{*id, r.total_trials, std::move(warm_summary)};
}

std::vector<SweepQueue> SweepRunner::queues() const {
  std::vector<SweepQueue> out;
  for (const auto& [id, s] : sweeps_) {
    SweepQueue q;
    q.sweep_id = id;
    q.demand = demand(id);
    q.running = s.running;
    q.max_parallel = s.spec.max_parallel;
    // Imported grid points ahead are never generated.
    const auto imported_ahead = static_cast<int64_t>(std::distance(s.imported.lower_bound(s.next_index), s.imported.end()));
    int64_t ungenerated = s.total ? std::max<int64_t>(0, *s.total - s.next_index - imported_ahead) : (int64_t{1} << 40);
    // Few trials are ever held (gangs between attempts): no walk of the queue without one.
    const auto held = not_before_.empty() ? 0 : std::count_if(s.queued.begin(), s.queued.end(),
                                                              [&](int64_t t) { return held_back(t); });
    q.available = static_cast<int64_t>(s.queued.size()) - held + ungenerated;
    out.push_back(q);
  }
  return out;
}

bool SweepRunner::has_work() const {
  for (const auto& [id, s] : sweeps_)
    if (!s.target_reached && (!s.queued.empty() || !s.total || s.next_index < *s.total)) return true;
  return false;
}

bool SweepRunner::held_back(int64_t trial_id) const {
  auto it = not_before_.find(trial_id);
  return it != not_before_.end() && it->second > clock_.now_ms();
}

Demand SweepRunner::demand(int64_t sweep_id) const {
  auto it = sweeps_.find(sweep_id);
  return it == sweeps_.end() ? Demand{} : demand_of(it->second.spec);
}

Result<std::optional<TrialToStart>> SweepRunner::load_queued(Active& s, int64_t trial_id) {
  auto rec = store_.trial_record(trial_id);
  if (!rec.ok()) return rec.status();
  TrialToStart t;
  t.trial_id = rec->id;
  t.sweep_id = s.id;
  t.index = rec->index;
  t.previous_attempts = rec->attempts;
  t.params = std::move(rec->params);
  t.argv = std::move(rec->command);
  if (s.population && s.population->has(t.trial_id)) {
    t.checkpoint = s.population->next_checkpoint(t.trial_id);
    t.env["SWEPT_PBT_STOP_STEP"] = std::to_string(s.population->segment_starts(t.trial_id));
  }
  return std::optional<TrialToStart>(std::move(t));
}

Result<std::optional<TrialToStart>> SweepRunner::generate(Active& s) {
  static const sweeps::CommandContext context = command_context();
  while (!s.total || s.next_index < *s.total) {
    int64_t index = s.next_index;
    sweeps::Trial trial;
    std::optional<nlohmann::json> model;
    if (sweeps::is_adaptive(s.spec.method)) {
      auto suggestion = suggest(s, index);
      if (!suggestion.ok()) return suggestion.status();
      trial.index = index;
      trial.params = std::move(suggestion->params);
      model = suggestion->model.to_json();
    } else {
      trial = sweeps::trial_at(s.spec, index);
    }
    auto argv = sweeps::build_command(s.spec, trial.params, context);
    nlohmann::json command = argv.ok() ? nlohmann::json(*argv) : nlohmann::json::array();
    auto id = store_.insert_trial(s.id, index, trial.params.dump(), command.dump(), clock_.wall_seconds());
    if (!id.ok()) return id.status();
    if (model) SWEPT_RETURN_IF_ERROR(store_.set_trial_suggestion(*id, model->dump()));
    s.next_index = index + 1;
    SWEPT_RETURN_IF_ERROR(skip_imported(s));  // a warm start's grid points are not run again
    if (!argv.ok()) {
      std::string reason = "cannot build the command: " + argv.status().message();
      const TrialState rejected = next_trial_state(TrialState::kQueued, {TrialEventKind::kReject}, 0).value();
      SWEPT_RETURN_IF_ERROR(store_.set_trial_state(*id, rejected, std::nullopt, reason, clock_.wall_seconds()));
      log::warn("sweep " + std::to_string(s.id) + " trial " + std::to_string(*id) + ": " + reason);
      continue;
    }
    TrialToStart t;
    t.trial_id = *id;
    t.sweep_id = s.id;
    t.index = index;
    t.params = std::move(trial.params);
    t.argv = std::move(*argv);
    if (s.population) SWEPT_RETURN_IF_ERROR(pbt_created(s, t));
    return std::optional<TrialToStart>(std::move(t));
  }
  return std::optional<TrialToStart>();
}

// The searcher's history is read from the store on every suggestion, never
// kept here: a restarted scheduler sees exactly what this one saw.
Result<sweeps::search::Suggestion> SweepRunner::suggest(const Active& s, int64_t index) {
  auto rows = store_.search_history(s.id);
  if (!rows.ok()) return rows.status();
  sweeps::search::SearchHistory history;
  for (auto& [params, value] : rows->finished) history.finished.push_back({std::move(params), value});
  for (auto& params : rows->pending) history.pending.push_back(std::move(params));
  if (sweeps::is_multi_objective(s.spec) || !s.spec.constraints.empty())
    SWEPT_RETURN_IF_ERROR(attach_final_values(store_.connection(), s.spec, *rows, history));
  auto out = sweeps::search::suggest(*s.spec.search, s.spec, history, index);
  if (!out.ok()) return out.status().WithContext("sweep " + std::to_string(s.id) + " trial " + std::to_string(index));
  if (out->model.mode == "fallback")
    log::warn("sweep " + std::to_string(s.id) + " trial index " + std::to_string(index) + ": " + out->model.method +
              " fell back to a random suggestion: " + out->model.note);
  return out;
}

Result<std::optional<TrialToStart>> SweepRunner::take_next(int64_t sweep_id) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return std::optional<TrialToStart>();
  Active& s = it->second;
  Result<std::optional<TrialToStart>> next = std::optional<TrialToStart>();
  if (s.target_reached) return next;  // its target is reached: nothing more starts
  auto free = std::find_if(s.queued.begin(), s.queued.end(), [&](int64_t t) { return !held_back(t); });
  if (free != s.queued.end()) {
    int64_t id = *free;
    s.queued.erase(free);
    not_before_.erase(id);
    next = load_queued(s, id);
  } else {
    next = generate(s);
  }
  if (next.ok() && next->has_value()) {
    s.running += 1;
    if (s.stopper) s.stopper->set_state((*next)->trial_id, (*next)->index, TrialState::kRunning);
  }
  return next;
}

Status SweepRunner::on_event(const LifecycleEvent& event) {
  if (const auto* e = std::get_if<TrialEnded>(&event)) {
    SWEPT_RETURN_IF_ERROR(pbt_ended(*e));  // first: a round it completes queues members before completion is judged
    return on_trial_ended(*e);
  }
  if (const auto* e = std::get_if<TrialRequeued>(&event)) {
    SWEPT_ASSIGN_OR_RETURN(held, pbt_requeued(*e));
    if (!held) on_trial_requeued(*e);
    return pbt_maybe_round(e->sweep_id);
  }
  if (const auto* e = std::get_if<TrialAdopted>(&event)) on_trial_adopted(*e);
  if (const auto* e = std::get_if<TrialHeld>(&event)) {
    if (e->not_before_ms > 0)
      not_before_[e->trial_id] = e->not_before_ms;
    else
      not_before_.erase(e->trial_id);
  }
  return Status::Ok();
}

Status SweepRunner::on_trial_ended(const TrialEnded& e) {
  auto it = sweeps_.find(e.sweep_id);
  if (it == sweeps_.end()) return Status::Ok();  // the sweep ended first (cancelled): nothing to count
  Active& s = it->second;
  if (e.was_running) {
    s.running = std::max(0, s.running - 1);
  } else {
    s.queued.erase(std::remove(s.queued.begin(), s.queued.end(), e.trial_id), s.queued.end());
  }
  if (s.stopper) s.stopper->set_state(e.trial_id, -1, e.state);
  if (e.state == TrialState::kCompleted) SWEPT_RETURN_IF_ERROR(check_metric_reported(e.sweep_id, e.trial_id));
  if (e.state == TrialState::kCompleted) SWEPT_RETURN_IF_ERROR(check_target(s, e.trial_id));
  return maybe_complete(e.sweep_id);
}

void SweepRunner::on_trial_requeued(const TrialRequeued& e) {
  auto it = sweeps_.find(e.sweep_id);
  if (it == sweeps_.end()) return;
  Active& s = it->second;
  s.running = std::max(0, s.running - 1);
  if (s.stopper) s.stopper->set_state(e.trial_id, -1, TrialState::kQueued);
  if (std::find(s.queued.begin(), s.queued.end(), e.trial_id) == s.queued.end()) s.queued.push_front(e.trial_id);
}

void SweepRunner::on_trial_adopted(const TrialAdopted& e) {
  auto it = sweeps_.find(e.sweep_id);
  if (it == sweeps_.end()) return;
  Active& s = it->second;
  auto pos = std::find(s.queued.begin(), s.queued.end(), e.trial_id);
  if (pos == s.queued.end()) return;  // not queued here: nothing to take back
  s.queued.erase(pos);
  s.running += 1;
  if (s.stopper) s.stopper->set_state(e.trial_id, -1, TrialState::kRunning);
}

Status SweepRunner::check_metric_reported(int64_t sweep_id, int64_t trial_id) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end() || it->second.metric_seen || !it->second.spec.metric) return Status::Ok();
  // The read model's one answer (store/reader.h, "A metric never reported"),
  // also what `swept status` and the dashboard show.
  auto sweep = store::get_sweep(store_.connection(), sweep_id);
  if (!sweep.ok()) return sweep.status();
  if (reported_by_own(*sweep)) it->second.metric_seen = true;  // reported: nothing to say, ever
  if (!sweep->metric_missing) return Status::Ok();
  it->second.metric_seen = true;
  const MetricMissing& m = *sweep->metric_missing;
  std::string names;
  for (const auto& n : m.reported) names += (names.empty() ? "" : ", ") + log_safe(n);
  // Said once the completions it counts are stored: a scheduler killed
  // before that commit says it after its restart instead, never twice.
  std::string text = "sweep " + std::to_string(sweep_id) + ": its metric '" + log_safe(it->second.spec.metric->name) +
                     "' was reported by no trial, though " + std::to_string(m.completed) +
                     " completed (latest: trial " + std::to_string(trial_id) + "); " +
                     (names.empty() ? std::string("they reported no metrics at all") : "they reported: " + names) +
                     ". Check the sweep's metric.name against the trials' metric lines (docs/metrics.md); said "
                     "once per sweep";
  store_.after_commit([text = std::move(text)] { log::warn(text); });
  return Status::Ok();
}

Status SweepRunner::make_stopper(Active& s, bool load) {
  if (!s.spec.early_terminate || !s.spec.metric) return Status::Ok();
  s.stopper.emplace(*s.spec.early_terminate, s.spec.metric->name);
  if (!load) return Status::Ok();
  auto rows = store_.metric_curves(s.id, s.spec.metric->name);
  if (!rows.ok()) return rows.status();
  s.stopper->load(*rows);
  return Status::Ok();
}

Result<std::optional<StopVerdict>> SweepRunner::observe_metrics(int64_t sweep_id, int64_t trial_id,
                                                                const std::vector<protocol::MetricRecord>& records) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end() || !it->second.stopper) return std::optional<StopVerdict>();
  EarlyStopper& stopper = *it->second.stopper;
  int64_t index = -1;
  if (!stopper.curve(trial_id)) {
    auto rec = store_.trial_record(trial_id);
    if (!rec.ok()) return rec.status();
    index = rec->index;
  }
  std::optional<StopVerdict> v = stopper.observe(trial_id, index, records);
  if (!v) return v;
  store::Writer::StopDecision d;
  d.rule = v->rule;
  d.at = v->decision.at;
  d.step = v->step;
  if (std::isfinite(v->decision.value)) d.value = v->decision.value;
  if (std::isfinite(v->decision.threshold)) d.threshold = v->decision.threshold;
  d.reason = v->decision.reason;
  d.decided_at = clock_.wall_seconds();
  SWEPT_RETURN_IF_ERROR(store_.record_stop_decision(trial_id, d));
  log::info("sweep " + std::to_string(sweep_id) + " trial " + std::to_string(trial_id) + " early-stopped at step " +
            std::to_string(v->step) + ": " + v->decision.reason);
  return v;
}

Status SweepRunner::maybe_complete(int64_t sweep_id) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return Status::Ok();
  const Active& s = it->second;
  if (s.running > 0 || (s.population && s.population->holding())) return Status::Ok();
  if (!s.target_reached && (!s.total || s.next_index < *s.total || !s.queued.empty())) return Status::Ok();
  SWEPT_RETURN_IF_ERROR(store_.set_sweep_state(sweep_id, SweepState::kCompleted, clock_.wall_seconds()));
  log::info("sweep " + std::to_string(sweep_id) + " completed" +
            (s.target_reached ? ": " + *s.target_reached : std::string()));
  end(it);
  return Status::Ok();
}

Status SweepRunner::check_target(Active& s, int64_t trial_id) {
  if (s.target_reached) return Status::Ok();
  if (sweeps::is_multi_objective(s.spec)) {
    // Several objectives: the sweep finishes when any one reaches its target (W&B's words).
    std::vector<TrialRow> trial(1);
    trial[0].id = trial_id;
    SWEPT_RETURN_IF_ERROR(store::fill_latest(store_.connection(), trial));
    s.target_reached = objective_target_reached(s.spec, trial[0]);
    if (!s.target_reached) return Status::Ok();
  } else {
    if (!s.spec.metric || !s.spec.metric->target) return Status::Ok();
    SWEPT_ASSIGN_OR_RETURN(rec, store_.trial_record(trial_id));
    if (!rec.metric_value || !s.spec.metric->reaches_target(*rec.metric_value)) return Status::Ok();
    std::ostringstream why;
    why << "trial " << trial_id << " reached the target, " << log_safe(s.spec.metric->name) << " = "
        << *rec.metric_value << (s.spec.metric->goal == sweeps::Goal::kMaximize ? " >= " : " <= ")
        << *s.spec.metric->target << " (metric.target)";
    s.target_reached = why.str();
  }
  // Trials waiting for a place (retries) are not started any more.
  SWEPT_RETURN_IF_ERROR(stop_queued(s, "not started: the sweep reached its target").status());
  log::info("sweep " + std::to_string(s.id) + ": " + *s.target_reached + "; it creates no more trials");
  return Status::Ok();
}

Result<int64_t> SweepRunner::stop_queued(Active& s, const std::string& reason) {
  const TrialState stopped = next_trial_state(TrialState::kQueued, {TrialEventKind::kCancel}, 0).value();
  // pbt members waiting for their round are queued in the store, though not in the queue.
  if (s.population)
    for (int64_t id : s.population->release_waiting()) s.queued.push_back(id);
  int64_t n = 0;
  for (int64_t id : std::exchange(s.queued, {})) {
    SWEPT_RETURN_IF_ERROR(store_.set_trial_state(id, stopped, std::nullopt, reason, clock_.wall_seconds()));
    ++n;
  }
  return n;
}

Result<int64_t> SweepRunner::cancel(int64_t sweep_id, const std::string& reason) {
  auto it = sweeps_.find(sweep_id);
  int64_t stopped = 0;
  if (it != sweeps_.end()) {
    SWEPT_ASSIGN_OR_RETURN(n, stop_queued(it->second, reason));
    stopped = n;
    end(it);
  }
  SWEPT_RETURN_IF_ERROR(store_.set_sweep_state(sweep_id, SweepState::kCancelled, clock_.wall_seconds()));
  return stopped;
}

Result<int64_t> SweepRunner::retry_failed(int64_t sweep_id, bool early_stopped) {
  // Failed trials, and lost ones (their agent vanished with no retries
  // left): the states `swept retry` takes back (common/states.h); with
  // --early-stopped, the early-stopped ones too.
  const TrialEvent retry{early_stopped ? TrialEventKind::kRetryEarlyStopped : TrialEventKind::kRetry};
  std::vector<std::pair<int64_t, TrialState>> retried;
  for (const auto& st : kTrialStates) {
    if (!next_trial_state(st.state, retry, 0) || st.state == TrialState::kQueued) continue;
    auto ids = store_.trial_ids_in_state(sweep_id, st.state);
    if (!ids.ok()) return ids.status();
    for (int64_t id : *ids) retried.emplace_back(id, st.state);
  }
  std::sort(retried.begin(), retried.end());
  if (retried.empty()) return int64_t{0};
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) {
    // A completed (or cancelled) sweep runs again: reload it.
    auto all = store::sweep_summaries(store_.connection(), sweep_id);
    if (!all.ok()) return all.status();
    auto running = store_.sweeps_in_state(all->front().state);
    if (!running.ok()) return running.status();
    for (const SweepRow& r : *running) {
      if (r.id != sweep_id) continue;
      auto spec = parse_or_explain(r.spec);
      if (!spec.ok()) return spec.status();
      Active a;
      a.id = r.id;
      a.spec = std::move(*spec);
      a.total = r.total_trials;
      a.next_index = r.next_index;
      // Only the failed trials run again: nothing new is generated after a cancel.
      if (all->front().state == SweepState::kCancelled) a.total = a.next_index;
      SWEPT_RETURN_IF_ERROR(make_stopper(a, true));
      make_population(a);
      run(std::move(a));
      it = sweeps_.find(r.id);
    }
    if (it == sweeps_.end()) return Status::NotFound("no sweep " + std::to_string(sweep_id));
    SWEPT_RETURN_IF_ERROR(store_.set_sweep_state(sweep_id, SweepState::kRunning, std::nullopt));
  }
  for (const auto& [id, from] : retried) {
    const TrialState queued = next_trial_state(from, retry, 0).value();
    SWEPT_RETURN_IF_ERROR(store_.set_trial_state(id, queued, std::nullopt, std::nullopt, std::nullopt));
    if (from == TrialState::kEarlyStopped) SWEPT_RETURN_IF_ERROR(store_.clear_stop_decision(id));
    if (it->second.stopper) it->second.stopper->forget_decision(id, queued);
    it->second.queued.push_back(id);
  }
  return static_cast<int64_t>(retried.size());
}

}  // namespace swept::scheduler
