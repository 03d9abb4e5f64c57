// The codec's query rows (docs/protocol.md, "Rows"): a sweep summary, a
// trial row, an agent row, and a GPU, written and read. Their JSON is also
// the CLI's --json output and, for sweeps, the dashboard API's (protocol.h).
#include <cmath>
#include <string>

#include "common/protocol_codec.h"

namespace swept::protocol {
namespace codec {

json gpu_json(const GpuInfo& g) {
  return {{"index", g.index}, {"uuid", g.uuid}, {"name", g.name}, {"memory_bytes", g.memory_bytes}};
}

GpuInfo read_gpu(const Reader& r) {
  return {r.field("index").i32(), r.field("uuid").str(), r.field("name").str(), r.field("memory_bytes").i64()};
}

SweepRow read_sweep_row(const Reader& r) {
  SweepRow s;
  s.id = r.field("id").i64();
  s.name = r.field("name").str();
  s.method = r.field("method").str();
  s.state = read_state(r.field("state"), sweep_state_named, "a sweep state");
  Reader metric = r.field("metric");
  s.metric_name = metric.field("name").opt_str();
  s.metric_goal = metric.field("goal").opt_str();
  s.total_trials = r.field("total_trials").opt_i64();
  s.created_at = r.field("created_at").f64();
  s.finished_at = r.field("finished_at").opt_f64();
  Reader c = r.field("counts");
  // A state this side does not know is refused by read_state elsewhere; a
  // count missing for a state the peer does not know yet is 0.
  for (const auto& st : kTrialStates) {
    std::string key(st.name);
    if (c.has(key.c_str())) s.counts[st.state] = c.field(key.c_str()).i64();
  }
  Reader best = r.field("best");
  if (!best.raw().is_null()) {
    // The scheduler sends a value with every best (the read model's "best"
    // has one by definition); a null reads as 0.
    s.best = BestTrial{best.field("trial_id").i64(), best.field("value").opt_f64().value_or(0.0),
                       best.field("params").object()};
  }
  if (r.has("metric_missing")) {
    Reader m = r.field("metric_missing");
    s.metric_missing = MetricMissing{m.field("completed").i64(), m.field("reported").strings()};
  }
  if (r.has("constraints")) {  // optional: a sweep with constraints (issue 28)
    Reader c = r.field("constraints");
    for (size_t i = 0, n = c.size(); i < n; ++i)
      s.constraints.push_back({c.at(i).field("name").str(), c.at(i).field("min").opt_f64(), c.at(i).field("max").opt_f64()});
  }
  if (r.has("front") && !r.field("front").raw().is_null()) {  // optional: several objectives (issue 28)
    Reader f = r.field("front");
    ParetoFront front;
    Reader objectives = f.field("objectives");
    for (size_t i = 0, n = objectives.size(); i < n; ++i)
      front.objectives.push_back({objectives.at(i).field("name").str(), objectives.at(i).field("goal").str()});
    Reader ids = f.field("trial_ids");
    for (size_t i = 0, n = ids.size(); i < n; ++i) front.trial_ids.push_back(ids.at(i).i64());
    front.evaluated = f.field("evaluated").i64();
    front.infeasible = f.field("infeasible").i64();
    Reader ref = f.field("reference");
    for (size_t i = 0, n = ref.size(); i < n; ++i) front.reference.push_back(ref.at(i).opt_f64().value_or(NAN));
    front.hypervolume = f.field("hypervolume").opt_f64().value_or(0.0);
    s.front = std::move(front);
  }
  return s;
}

TrialRow read_trial_row(const Reader& r) {
  TrialRow t;
  t.id = r.field("id").i64();
  t.sweep_id = r.field("sweep_id").i64();
  t.index = r.field("index").i64();
  t.state = read_state(r.field("state"), trial_state_named, "a trial state");
  t.attempts = r.field("attempts").i32();
  t.agent = r.field("agent").opt_str();
  t.gpus = r.field("gpus").ints();
  t.gpu_fraction = r.field("gpu_fraction").opt_f64();
  t.exit_code = r.field("exit_code").opt_i32();
  t.reason = r.field("reason").opt_str();
  t.metric_value = r.field("metric_value").opt_f64();
  t.params = r.field("params").object();
  t.command = r.field("command").strings();
  t.started_at = r.field("started_at").opt_f64();
  t.ended_at = r.field("ended_at").opt_f64();
  if (r.has("nodes")) {  // optional: a multi-node trial's (issue 25)
    Reader nodes = r.field("nodes");
    for (size_t i = 0, n = nodes.size(); i < n; ++i)
      t.nodes.push_back({nodes.at(i).field("agent").str(), nodes.at(i).field("gpus").ints()});
  }
  if (r.has("schedule")) {  // optional: a pbt member's (issue 29)
    Reader steps = r.field("schedule");
    for (size_t i = 0, n = steps.size(); i < n; ++i) {
      Reader s = steps.at(i);
      PbtStep step;
      step.round = s.field("round").i64();
      step.from_step = s.field("from_step").i64();
      step.donor_trial_id = s.field("donor_trial_id").opt_i64();
      step.donor_segment = s.field("donor_segment").opt_i32();
      step.params = s.field("params").object();
      step.changes = s.field("changes").strings();
      t.schedule.push_back(std::move(step));
    }
  }
  Reader latest = r.field("latest");
  if (!latest.raw().is_object()) latest.fail("an object of numbers");
  for (auto it = latest.raw().begin(); it != latest.raw().end(); ++it)
    t.latest[it.key()] = Reader(it.value(), latest.path() + "." + it.key()).f64();
  if (r.has("suggestion")) t.suggestion = r.field("suggestion").object();
  if (r.has("stop") && !r.field("stop").raw().is_null()) {
    Reader s = r.field("stop");
    t.stop = TrialStop{s.field("rule").str(),         s.field("at").i64(),
                            s.field("step").i64(),         s.field("value").opt_f64(),
                            s.field("threshold").opt_f64(), s.field("reason").str(),
                            s.field("decided_at").f64()};
  }
  if (r.has("feasible")) {  // optional: a completed trial of a sweep with constraints (issue 28)
    t.feasible = r.field("feasible").boolean();
    if (r.has("violated")) t.violated = r.field("violated").strings();
  }
  return t;
}

AgentRow read_agent_row(const Reader& r) {
  AgentRow a;
  a.name = r.field("name").str();
  a.host = r.field("host").str();
  a.state = read_state(r.field("state"), agent_state_named, "an agent state");
  a.slots = r.field("slots").i32();
  a.last_seen = r.field("last_seen").f64();
  Reader gpus = r.field("gpus");
  for (size_t i = 0, n = gpus.size(); i < n; ++i) a.gpus.push_back(read_gpu(gpus.at(i)));
  Reader running = r.field("running");
  for (size_t i = 0, n = running.size(); i < n; ++i) {
    Reader e = running.at(i);
    AgentTrial t;
    t.trial_id = e.field("trial_id").i64();
    t.gpus = e.field("gpus").ints();
    t.gpu_fraction = e.field("gpu_fraction").opt_f64();
    a.running.push_back(std::move(t));
  }
  if (r.has("quarantine")) a.quarantine = r.field("quarantine").opt_str();
  if (r.has("containment")) a.containment = r.field("containment").opt_str();
  return a;
}

}  // namespace codec

using codec::gpu_json;
using codec::json;
using codec::opt;

nlohmann::json counts_json(const StateCounts& counts) {
  json j = json::object();
  for (const auto& st : kTrialStates) j[std::string(st.name)] = counts[st.state];
  return j;
}

nlohmann::json to_json(const SweepRow& s) {
  json best = nullptr;
  if (s.best)
    best = {{"trial_id", s.best->trial_id},
            {"value", s.best->value},
            {"params", s.best->params.is_object() ? s.best->params : json::object()}};
  json j = {{"id", s.id},
            {"name", s.name},
            {"method", s.method},
            {"state", name(s.state)},
            {"metric", {{"name", opt(s.metric_name)}, {"goal", opt(s.metric_goal)}}},
            {"total_trials", opt(s.total_trials)},
            {"created_at", s.created_at},
            {"finished_at", opt(s.finished_at)},
            {"counts", counts_json(s.counts)},
            {"best", std::move(best)}};
  if (s.metric_missing)
    j["metric_missing"] = {{"completed", s.metric_missing->completed}, {"reported", s.metric_missing->reported}};
  if (!s.constraints.empty()) {
    json c = json::array();
    for (const auto& b : s.constraints) c.push_back({{"name", b.name}, {"min", opt(b.min)}, {"max", opt(b.max)}});
    j["constraints"] = std::move(c);
  }
  if (s.front) {
    const ParetoFront& f = *s.front;
    json objectives = json::array(), reference = json::array();
    for (const auto& o : f.objectives) objectives.push_back({{"name", o.name}, {"goal", o.goal}});
    // A reference value that is not finite (no trial has a value yet) is null, as numbers are in the API.
    for (double v : f.reference) reference.push_back(std::isfinite(v) ? json(v) : json(nullptr));
    j["front"] = {{"objectives", std::move(objectives)},
                  {"trial_ids", f.trial_ids},
                  {"evaluated", f.evaluated},
                  {"infeasible", f.infeasible},
                  {"reference", std::move(reference)},
                  {"hypervolume", std::isfinite(f.hypervolume) ? json(f.hypervolume) : json(nullptr)}};
  }
  return j;
}

nlohmann::json to_json(const TrialRow& t) {
  json j = {{"id", t.id},
          {"sweep_id", t.sweep_id},
          {"index", t.index},
          {"state", name(t.state)},
          {"attempts", t.attempts},
          {"agent", opt(t.agent)},
          {"gpus", t.gpus},
          {"gpu_fraction", opt(t.gpu_fraction)},
          {"exit_code", opt(t.exit_code)},
          {"reason", opt(t.reason)},
          {"metric_value", opt(t.metric_value)},
          {"params", t.params.is_null() ? json::object() : t.params},
          {"command", t.command},
          {"started_at", opt(t.started_at)},
          {"ended_at", opt(t.ended_at)},
          {"latest", t.latest},
          {"suggestion", t.suggestion},
          {"stop", t.stop ? json{{"rule", t.stop->rule},
                                 {"at", t.stop->at},
                                 {"step", t.stop->step},
                                 {"value", opt(t.stop->value)},
                                 {"threshold", opt(t.stop->threshold)},
                                 {"reason", t.stop->reason},
                                 {"decided_at", t.stop->decided_at}}
                          : json(nullptr)}};
  if (!t.nodes.empty()) j["nodes"] = nodes_json(t.nodes);  // optional: a multi-node trial's (issue 25)
  if (t.feasible) {  // optional: a completed trial of a sweep with constraints (issue 28)
    j["feasible"] = *t.feasible;
    j["violated"] = t.violated;
  }
  if (!t.schedule.empty()) {  // optional: a pbt member's (issue 29)
    json steps = json::array();
    for (const PbtStep& s : t.schedule)
      steps.push_back({{"round", s.round},
                       {"from_step", s.from_step},
                       {"donor_trial_id", opt(s.donor_trial_id)},
                       {"donor_segment", opt(s.donor_segment)},
                       {"params", s.params},
                       {"changes", s.changes}});
    j["schedule"] = std::move(steps);
  }
  return j;
}

nlohmann::json to_json(const AgentRow& a) {
  json gpus = json::array(), running = json::array();
  for (const auto& g : a.gpus) gpus.push_back(gpu_json(g));
  for (const auto& r : a.running)
    running.push_back({{"trial_id", r.trial_id}, {"gpus", r.gpus}, {"gpu_fraction", opt(r.gpu_fraction)}});
  json j = {{"name", a.name}, {"host", a.host},         {"state", name(a.state)}, {"slots", a.slots},
            {"last_seen", a.last_seen}, {"gpus", gpus}, {"running", running}};
  if (a.quarantine) j["quarantine"] = *a.quarantine;
  if (a.containment) j["containment"] = *a.containment;
  return j;
}

}  // namespace swept::protocol
