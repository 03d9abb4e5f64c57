// Codec of the swept protocol (docs/protocol.md). Encoding writes each struct
// field by field; decoding reads through `Reader`, which knows the path of the
// value it reads ("REGISTER.gpus[1].uuid") so that every refusal names the
// offending field. Readers throw a private exception that decode() catches:
// nothing escapes this file.
#include "common/protocol.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace swept::protocol {
namespace {

using nlohmann::json;

// ---- names ----

struct CauseName {
  ExitCause cause;
  const char* name;
};
constexpr CauseName kCauseNames[] = {
    {ExitCause::kExited, "exited"},         {ExitCause::kSignaled, "signaled"},
    {ExitCause::kTimeout, "timeout"},       {ExitCause::kLaunchFailed, "launch_failed"},
    {ExitCause::kStopped, "stopped"},       {ExitCause::kAgentShutdown, "agent_shutdown"},
    {ExitCause::kNotRunning, "not_running"},
};

template <typename T>
struct KindOf;
#define SWEPT_KIND(T, name) \
  template <>               \
  struct KindOf<T> {        \
    static constexpr const char* kName = name; \
  };
SWEPT_KIND(Register, "REGISTER")
SWEPT_KIND(RegisterAck, "REGISTER_ACK")
SWEPT_KIND(RegisterReject, "REGISTER_REJECT")
SWEPT_KIND(Heartbeat, "HEARTBEAT")
SWEPT_KIND(StartTrial, "START_TRIAL")
SWEPT_KIND(StopTrial, "STOP_TRIAL")
SWEPT_KIND(TrialStarted, "TRIAL_STARTED")
SWEPT_KIND(Metrics, "METRICS")
SWEPT_KIND(TrialExited, "TRIAL_EXITED")
SWEPT_KIND(ExitAck, "EXIT_ACK")
SWEPT_KIND(Disconnect, "DISCONNECT")
SWEPT_KIND(Error, "ERROR")
SWEPT_KIND(Submit, "SUBMIT")
SWEPT_KIND(Submitted, "SUBMITTED")
SWEPT_KIND(Cancel, "CANCEL")
SWEPT_KIND(Retry, "RETRY")
SWEPT_KIND(Done, "DONE")
SWEPT_KIND(QuerySweeps, "QUERY_SWEEPS")
SWEPT_KIND(Sweeps, "SWEEPS")
SWEPT_KIND(QueryTrials, "QUERY_TRIALS")
SWEPT_KIND(Trials, "TRIALS")
SWEPT_KIND(QueryAgents, "QUERY_AGENTS")
SWEPT_KIND(Agents, "AGENTS")
SWEPT_KIND(ReleaseAgent, "RELEASE_AGENT")
#undef SWEPT_KIND

// ---- encoding helpers ----

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json acks_json(const std::vector<MetricsAck>& acks) {
  json a = json::array();
  for (const auto& k : acks) a.push_back(json::array({k.trial_id, k.attempt, k.seq}));
  return a;
}

json gpu_json(const GpuInfo& g) {
  return {{"index", g.index}, {"uuid", g.uuid}, {"name", g.name}, {"memory_bytes", g.memory_bytes}};
}

json exited_json(const TrialExited& m) {
  json j = {{"trial_id", m.trial_id}, {"attempt", m.attempt},       {"cause", exit_cause_name(m.cause)},
            {"exit_code", opt(m.exit_code)}, {"signal", opt(m.signal)}, {"timed_out", m.timed_out},
            {"reason", m.reason},     {"ended_at", m.ended_at},     {"last_seq", m.last_seq}};
  if (m.host_fault) j["host_fault"] = true;
  if (m.diverged) j["diverged"] = true;
  return j;
}

void put_health(json& j, const std::optional<bool>& healthy, const std::string& health) {
  if (!healthy) return;
  j["healthy"] = *healthy;
  if (!health.empty()) j["health"] = health;
}

json body(const Register& m) {
  json gpus = json::array(), running = json::array(), finished = json::array();
  for (const auto& g : m.gpus) gpus.push_back(gpu_json(g));
  for (const auto& r : m.running)
    running.push_back({{"trial_id", r.trial_id}, {"attempt", r.attempt}, {"pid", r.pid}, {"started_at", r.started_at}});
  for (const auto& f : m.finished) finished.push_back(exited_json(f));
  json j = {{"name", m.name}, {"host", m.host},       {"session", m.session},   {"pid", m.pid},
            {"slots", m.slots}, {"gpus", gpus}, {"running", running}, {"finished", finished}};
  if (!m.features.empty()) j["features"] = m.features;
  put_health(j, m.healthy, m.health);
  if (m.draining) j["draining"] = true;
  if (!m.containment.empty()) j["containment"] = m.containment;
  return j;
}
json body(const RegisterAck& m) {
  json j = {{"session", m.session}, {"heartbeat_ms", m.heartbeat_ms}, {"liveness", m.liveness}, {"acked", acks_json(m.acked)}};
  if (m.lease_ms > 0) j["lease_ms"] = m.lease_ms;
  return j;
}
json body(const RegisterReject& m) {
  return {{"code", m.code}, {"message", m.message}, {"retry_after_ms", m.retry_after_ms}};
}
json body(const Heartbeat& m) {
  json j = json::object();
  if (!m.acked.empty()) j["acked"] = acks_json(m.acked);
  put_health(j, m.healthy, m.health);
  if (m.draining) j["draining"] = true;
  return j;
}
json body(const StartTrial& m) {
  json j = {{"trial_id", m.trial_id}, {"attempt", m.attempt}, {"sweep_id", m.sweep_id}, {"argv", m.argv},
            {"env", m.env},           {"params", m.params},   {"workdir", m.workdir},   {"gpus", m.gpus},
            {"gpu_fraction", m.gpu_fraction}, {"timeout_s", m.timeout_s}};
  if (m.after_trial_id > 0) j["after"] = json::array({m.after_trial_id, m.after_attempt});
  return j;
}
json body(const StopTrial& m) { return {{"trial_id", m.trial_id}, {"attempt", m.attempt}, {"reason", m.reason}}; }
json body(const TrialStarted& m) {
  return {{"trial_id", m.trial_id}, {"attempt", m.attempt}, {"pid", m.pid},
          {"started_at", m.started_at}, {"workdir", m.workdir}, {"env", m.env}};
}
json body(const Metrics& m) {
  json records = json::array();
  for (const auto& r : m.records) records.push_back(json::array({r.step, r.name, r.value}));
  json j = {{"trial_id", m.trial_id}, {"attempt", m.attempt}, {"seq", m.seq}, {"records", std::move(records)}};
  if (!m.log.empty()) j["log"] = m.log;
  if (m.log_dropped != 0) j["log_dropped"] = m.log_dropped;
  return j;
}
json body(const TrialExited& m) { return exited_json(m); }
json body(const ExitAck& m) { return {{"trial_id", m.trial_id}, {"attempt", m.attempt}}; }
json body(const Disconnect& m) { return {{"reason", m.reason}}; }
json body(const Error& m) { return {{"request_id", m.request_id}, {"code", m.code}, {"message", m.message}}; }
json body(const Submit& m) { return {{"request_id", m.request_id}, {"spec", m.spec}, {"source", m.source}}; }
json body(const Submitted& m) {
  return {{"request_id", m.request_id}, {"sweep_id", m.sweep_id}, {"total_trials", opt(m.total_trials)}};
}
json body(const Cancel& m) {
  json j = {{"request_id", m.request_id}};
  if (m.sweep_id) j["sweep_id"] = *m.sweep_id;
  if (m.trial_id) j["trial_id"] = *m.trial_id;
  return j;
}
json body(const Retry& m) {
  json j = {{"request_id", m.request_id}, {"sweep_id", m.sweep_id}};
  if (m.early_stopped) j["early_stopped"] = true;  // absent when false: old schedulers read the same message
  return j;
}
json body(const Done& m) { return {{"request_id", m.request_id}, {"message", m.message}, {"count", m.count}}; }
json body(const QuerySweeps& m) {
  json j = {{"request_id", m.request_id}};
  if (m.sweep_id) j["sweep_id"] = *m.sweep_id;
  return j;
}
json body(const Sweeps& m) {
  json a = json::array();
  for (const auto& s : m.sweeps) a.push_back(to_json(s));
  return {{"request_id", m.request_id}, {"sweeps", std::move(a)}};
}
json body(const QueryTrials& m) {
  json j = {{"request_id", m.request_id}, {"sweep_id", m.sweep_id}, {"limit", m.limit}};
  if (m.after_index >= 0) j["after_index"] = m.after_index;
  return j;
}
json body(const Trials& m) {
  json a = json::array();
  for (const auto& t : m.trials) a.push_back(to_json(t));
  json j = {{"request_id", m.request_id}, {"trials", std::move(a)}};
  if (m.next_after_index) j["next_after_index"] = *m.next_after_index;
  return j;
}
json body(const QueryAgents& m) {
  json j = {{"request_id", m.request_id}};
  if (m.all) j["all"] = true;
  return j;
}
json body(const ReleaseAgent& m) { return {{"request_id", m.request_id}, {"name", m.name}}; }
json body(const Agents& m) {
  json a = json::array();
  for (const auto& x : m.agents) a.push_back(to_json(x));
  return {{"request_id", m.request_id}, {"agents", std::move(a)}};
}

// ---- decoding helpers ----

struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A JSON value and the path that leads to it.
class Reader {
 public:
  Reader(const json& v, std::string path) : v_(v), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& expected) const {
    throw FieldError(path_ + ": expected " + expected + ", found " + describe(v_));
  }
  const json& raw() const { return v_; }
  const std::string& path() const { return path_; }

  Reader field(const char* name) const {
    if (!v_.is_object()) fail("an object");
    auto it = v_.find(name);
    if (it == v_.end()) throw FieldError(path_ + "." + name + ": missing");
    return Reader(*it, path_ + "." + name);
  }
  bool has(const char* name) const {
    if (!v_.is_object()) fail("an object");
    auto it = v_.find(name);
    return it != v_.end() && !it->is_null();
  }
  Reader at(size_t i) const { return Reader(v_[i], path_ + "[" + std::to_string(i) + "]"); }
  size_t size() const {
    if (!v_.is_array()) fail("an array");
    return v_.size();
  }

  int64_t i64() const {
    if (v_.is_number_integer()) {
      if (v_.is_number_unsigned() && v_.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) fail("an integer");
      return v_.get<int64_t>();
    }
    if (v_.is_number_float()) {
      double d = v_.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
    }
    fail("an integer");
  }
  int i32() const {
    int64_t x = i64();
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) fail("a 32-bit integer");
    return static_cast<int>(x);
  }
  double f64() const {
    if (!v_.is_number()) fail("a number");
    double d = v_.get<double>();
    if (!std::isfinite(d)) fail("a finite number");
    return d;
  }
  bool boolean() const {
    if (!v_.is_boolean()) fail("true or false");
    return v_.get<bool>();
  }
  std::string str() const {
    if (!v_.is_string()) fail("a string");
    return v_.get<std::string>();
  }
  std::optional<int64_t> opt_i64() const { return v_.is_null() ? std::nullopt : std::optional<int64_t>(i64()); }
  std::optional<int> opt_i32() const { return v_.is_null() ? std::nullopt : std::optional<int>(i32()); }
  std::optional<double> opt_f64() const { return v_.is_null() ? std::nullopt : std::optional<double>(f64()); }
  std::optional<std::string> opt_str() const { return v_.is_null() ? std::nullopt : std::optional<std::string>(str()); }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    for (size_t i = 0, n = size(); i < n; ++i) out.push_back(at(i).str());
    return out;
  }
  std::vector<int> ints() const {
    std::vector<int> out;
    for (size_t i = 0, n = size(); i < n; ++i) out.push_back(at(i).i32());
    return out;
  }
  std::map<std::string, std::string> string_map() const {
    if (!v_.is_object()) fail("an object of strings");
    std::map<std::string, std::string> out;
    for (auto it = v_.begin(); it != v_.end(); ++it) out[it.key()] = Reader(it.value(), path_ + "." + it.key()).str();
    return out;
  }
  json object() const {
    if (!v_.is_object()) fail("an object");
    return v_;
  }
  json array() const {
    if (!v_.is_array()) fail("an array");
    return v_;
  }

 private:
  static std::string describe(const json& v) {
    switch (v.type()) {
      case json::value_t::null: return "null";
      case json::value_t::boolean: return "a boolean";
      case json::value_t::string: return "a string";
      case json::value_t::array: return "an array";
      case json::value_t::object: return "an object";
      case json::value_t::number_float: {
        // JSON has one number type: 2^70 is read as a double, but it is a
        // whole number, not a fraction.
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d)) return "an integer too large (at most 2^53 in magnitude)";
        return "a fractional number";
      }
      case json::value_t::number_unsigned:
        if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
          return "an integer too large (at most 2^63 - 1)";
        return "an integer";
      case json::value_t::number_integer: return "an integer";
      default: return "something else";
    }
  }
  const json& v_;
  std::string path_;
};

// Optional fields: the default when absent or null.
int64_t opt_field_i64(const Reader& r, const char* name, int64_t def) { return r.has(name) ? r.field(name).i64() : def; }
std::string opt_field_str(const Reader& r, const char* name) { return r.has(name) ? r.field(name).str() : std::string(); }

ExitCause read_cause(const Reader& r) {
  std::string s = r.str();
  for (const auto& c : kCauseNames)
    if (s == c.name) return c.cause;
  throw FieldError(r.path() + ": unknown exit cause \"" + s +
                   "\" (expected exited, signaled, timeout, launch_failed, stopped, agent_shutdown or not_running)");
}

std::vector<MetricsAck> read_acks(const Reader& r) {
  std::vector<MetricsAck> out;
  for (size_t i = 0, n = r.size(); i < n; ++i) {
    Reader e = r.at(i);
    if (e.size() != 3) e.fail("[trial_id, attempt, seq]");
    out.push_back({e.at(0).i64(), e.at(1).i32(), e.at(2).i64()});
  }
  return out;
}

GpuInfo read_gpu(const Reader& r) {
  return {r.field("index").i32(), r.field("uuid").str(), r.field("name").str(), r.field("memory_bytes").i64()};
}

TrialExited read_exited(const Reader& r) {
  TrialExited m;
  m.trial_id = r.field("trial_id").i64();
  m.attempt = r.field("attempt").i32();
  m.cause = read_cause(r.field("cause"));
  m.exit_code = r.has("exit_code") ? r.field("exit_code").opt_i32() : std::nullopt;
  m.signal = r.has("signal") ? r.field("signal").opt_i32() : std::nullopt;
  m.timed_out = r.has("timed_out") ? r.field("timed_out").boolean() : false;
  m.reason = opt_field_str(r, "reason");
  m.ended_at = r.field("ended_at").f64();
  m.last_seq = opt_field_i64(r, "last_seq", 0);
  m.host_fault = r.has("host_fault") ? r.field("host_fault").boolean() : false;
  m.diverged = r.has("diverged") ? r.field("diverged").boolean() : false;
  return m;
}

template <typename M>
void read_health(const Reader& r, M& m) {
  if (r.has("healthy")) m.healthy = r.field("healthy").boolean();
  m.health = opt_field_str(r, "health");
}

// A state spelled by its name (common/states.h); any other text is refused.
template <typename Named>
auto read_state(const Reader& r, Named named, const char* what) {
  auto s = named(r.str());
  if (!s) r.fail(what);
  return *s;
}

SweepSummary read_sweep_summary(const Reader& r) {
  SweepSummary s;
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
    s.best_trial_id = best.field("trial_id").i64();
    s.best_value = best.field("value").opt_f64();
    s.best_params = best.field("params").object();
  }
  if (r.has("metric_missing")) {
    Reader m = r.field("metric_missing");
    s.metric_missing = MetricMissing{m.field("completed").i64(), m.field("reported").strings()};
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
  Reader latest = r.field("latest");
  if (!latest.raw().is_object()) latest.fail("an object of numbers");
  for (auto it = latest.raw().begin(); it != latest.raw().end(); ++it)
    t.latest[it.key()] = Reader(it.value(), latest.path() + "." + it.key()).f64();
  if (r.has("suggestion")) t.suggestion = r.field("suggestion").object();
  if (r.has("stop") && !r.field("stop").raw().is_null()) {
    Reader s = r.field("stop");
    t.stop = TrialRow::Stop{s.field("rule").str(),         s.field("at").i64(),
                            s.field("step").i64(),         s.field("value").opt_f64(),
                            s.field("threshold").opt_f64(), s.field("reason").str(),
                            s.field("decided_at").f64()};
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
    a.running.push_back({e.field("trial_id").i64(), e.field("gpus").ints(), e.field("gpu_fraction").opt_f64()});
  }
  if (r.has("quarantine")) a.quarantine = r.field("quarantine").opt_str();
  if (r.has("containment")) a.containment = r.field("containment").opt_str();
  return a;
}

Message read_body(const std::string& kind, const Reader& r) {
  if (kind == "REGISTER") {
    Register m;
    m.name = r.field("name").str();
    m.host = r.field("host").str();
    m.session = r.field("session").str();
    m.pid = r.field("pid").i64();
    m.slots = r.field("slots").i32();
    Reader gpus = r.field("gpus");
    for (size_t i = 0, n = gpus.size(); i < n; ++i) m.gpus.push_back(read_gpu(gpus.at(i)));
    Reader running = r.field("running");
    for (size_t i = 0, n = running.size(); i < n; ++i) {
      Reader e = running.at(i);
      m.running.push_back(
          {e.field("trial_id").i64(), e.field("attempt").i32(), opt_field_i64(e, "pid", 0),
           e.has("started_at") ? e.field("started_at").f64() : 0.0});
    }
    Reader finished = r.field("finished");
    for (size_t i = 0, n = finished.size(); i < n; ++i) m.finished.push_back(read_exited(finished.at(i)));
    if (r.has("features")) m.features = r.field("features").strings();
    read_health(r, m);
    m.draining = r.has("draining") ? r.field("draining").boolean() : false;
    if (r.has("containment")) {
      m.containment = r.field("containment").str();
      if (m.containment.empty() || m.containment.size() > kMaxContainmentBytes)
        r.field("containment").fail("a containment mode name of 1 to " + std::to_string(kMaxContainmentBytes) +
                                    " bytes");
    }
    return m;
  }
  if (kind == "REGISTER_ACK") {
    RegisterAck m;
    m.session = r.field("session").str();
    m.heartbeat_ms = r.field("heartbeat_ms").i32();
    m.liveness = r.field("liveness").i32();
    if (r.has("acked")) m.acked = read_acks(r.field("acked"));
    m.lease_ms = opt_field_i64(r, "lease_ms", 0);
    return m;
  }
  if (kind == "REGISTER_REJECT")
    return RegisterReject{r.field("code").str(), opt_field_str(r, "message"), opt_field_i64(r, "retry_after_ms", 0)};
  if (kind == "HEARTBEAT") {
    Heartbeat m;
    if (!r.raw().is_object()) r.fail("an object");
    if (r.has("acked")) m.acked = read_acks(r.field("acked"));
    read_health(r, m);
    m.draining = r.has("draining") ? r.field("draining").boolean() : false;
    return m;
  }
  if (kind == "START_TRIAL") {
    StartTrial m;
    m.trial_id = r.field("trial_id").i64();
    m.attempt = r.field("attempt").i32();
    m.sweep_id = r.field("sweep_id").i64();
    m.argv = r.field("argv").strings();
    if (m.argv.empty()) throw FieldError(r.path() + ".argv: must not be empty");
    m.env = r.has("env") ? r.field("env").string_map() : std::map<std::string, std::string>{};
    m.params = r.has("params") ? r.field("params").object() : json::object();
    m.workdir = r.field("workdir").str();
    m.gpus = r.has("gpus") ? r.field("gpus").ints() : std::vector<int>{};
    m.gpu_fraction = r.has("gpu_fraction") ? r.field("gpu_fraction").f64() : 0.0;
    m.timeout_s = r.has("timeout_s") ? r.field("timeout_s").f64() : 0.0;
    if (r.has("after")) {
      Reader a = r.field("after");
      if (a.size() != 2) a.fail("[trial_id, attempt]");
      m.after_trial_id = a.at(0).i64();
      m.after_attempt = a.at(1).i32();
      if (m.after_trial_id <= 0) throw FieldError(a.path() + ": the trial id must be positive");
    }
    return m;
  }
  if (kind == "STOP_TRIAL")
    return StopTrial{r.field("trial_id").i64(), r.field("attempt").i32(), opt_field_str(r, "reason")};
  if (kind == "TRIAL_STARTED") {
    TrialStarted m;
    m.trial_id = r.field("trial_id").i64();
    m.attempt = r.field("attempt").i32();
    m.pid = opt_field_i64(r, "pid", 0);
    m.started_at = r.field("started_at").f64();
    m.workdir = opt_field_str(r, "workdir");
    if (r.has("env")) m.env = r.field("env").string_map();
    return m;
  }
  if (kind == "METRICS") {
    Metrics m;
    m.trial_id = r.field("trial_id").i64();
    m.attempt = r.field("attempt").i32();
    m.seq = r.field("seq").i64();
    Reader records = r.field("records");
    size_t n = records.size();
    m.records.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      Reader e = records.at(i);
      if (e.size() != 3) e.fail("[step, name, value]");
      int64_t step = e.at(0).i64();
      if (step < 0) throw FieldError(e.path() + "[0]: step must be 0 or more");
      m.records.push_back({step, e.at(1).str(), e.at(2).f64()});
    }
    m.log = opt_field_str(r, "log");
    m.log_dropped = opt_field_i64(r, "log_dropped", 0);
    return m;
  }
  if (kind == "TRIAL_EXITED") return read_exited(r);
  if (kind == "EXIT_ACK") return ExitAck{r.field("trial_id").i64(), r.field("attempt").i32()};
  if (kind == "DISCONNECT") return Disconnect{opt_field_str(r, "reason")};
  if (kind == "ERROR") return Error{opt_field_str(r, "request_id"), r.field("code").str(), opt_field_str(r, "message")};
  if (kind == "SUBMIT") return Submit{r.field("request_id").str(), r.field("spec").str(), opt_field_str(r, "source")};
  if (kind == "SUBMITTED")
    return Submitted{r.field("request_id").str(), r.field("sweep_id").i64(),
                     r.has("total_trials") ? r.field("total_trials").opt_i64() : std::nullopt};
  if (kind == "CANCEL") {
    Cancel m;
    m.request_id = r.field("request_id").str();
    if (r.has("sweep_id")) m.sweep_id = r.field("sweep_id").i64();
    if (r.has("trial_id")) m.trial_id = r.field("trial_id").i64();
    if (m.sweep_id.has_value() == m.trial_id.has_value())
      throw FieldError(r.path() + ": exactly one of sweep_id and trial_id must be given");
    return m;
  }
  if (kind == "RETRY")
    return Retry{r.field("request_id").str(), r.field("sweep_id").i64(),
                 r.has("early_stopped") ? r.field("early_stopped").boolean() : false};
  if (kind == "DONE") return Done{r.field("request_id").str(), opt_field_str(r, "message"), opt_field_i64(r, "count", 0)};
  if (kind == "QUERY_SWEEPS") {
    QuerySweeps m;
    m.request_id = r.field("request_id").str();
    if (r.has("sweep_id")) m.sweep_id = r.field("sweep_id").i64();
    return m;
  }
  if (kind == "SWEEPS") {
    Sweeps m;
    m.request_id = r.field("request_id").str();
    Reader a = r.field("sweeps");
    for (size_t i = 0, n = a.size(); i < n; ++i) m.sweeps.push_back(read_sweep_summary(a.at(i)));
    return m;
  }
  if (kind == "QUERY_TRIALS") {
    QueryTrials m;
    m.request_id = r.field("request_id").str();
    m.sweep_id = r.field("sweep_id").i64();
    m.after_index = opt_field_i64(r, "after_index", -1);
    m.limit = opt_field_i64(r, "limit", kTrialsPageDefault);
    if (m.limit < 1 || m.limit > kTrialsPageMax)
      throw FieldError(r.path() + ".limit: must be 1 to " + std::to_string(kTrialsPageMax));
    return m;
  }
  if (kind == "TRIALS") {
    Trials m;
    m.request_id = r.field("request_id").str();
    Reader a = r.field("trials");
    for (size_t i = 0, n = a.size(); i < n; ++i) m.trials.push_back(read_trial_row(a.at(i)));
    if (r.has("next_after_index")) m.next_after_index = r.field("next_after_index").opt_i64();
    return m;
  }
  if (kind == "QUERY_AGENTS")
    return QueryAgents{r.field("request_id").str(), r.has("all") ? r.field("all").boolean() : false};
  if (kind == "RELEASE_AGENT") return ReleaseAgent{r.field("request_id").str(), r.field("name").str()};
  if (kind == "AGENTS") {
    Agents m;
    m.request_id = r.field("request_id").str();
    Reader a = r.field("agents");
    for (size_t i = 0, n = a.size(); i < n; ++i) m.agents.push_back(read_agent_row(a.at(i)));
    return m;
  }
  throw std::logic_error("unreachable: kind checked by the caller");
}

bool known_kind(const std::string& kind) {
  static const char* const kKinds[] = {
      "REGISTER", "REGISTER_ACK", "REGISTER_REJECT", "HEARTBEAT", "START_TRIAL", "STOP_TRIAL",
      "TRIAL_STARTED", "METRICS", "TRIAL_EXITED", "EXIT_ACK", "DISCONNECT", "ERROR", "SUBMIT",
      "SUBMITTED", "CANCEL", "RETRY", "DONE", "QUERY_SWEEPS", "SWEEPS", "QUERY_TRIALS", "TRIALS",
      "QUERY_AGENTS", "AGENTS", "RELEASE_AGENT"};
  for (const char* k : kKinds)
    if (kind == k) return true;
  return false;
}

// Frames should be short and printable in messages: quote at most 40 bytes.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 32 && c < 127) ? c : '?';
  if (s.size() > 40) out += "...";
  return out;
}

}  // namespace

const char* exit_cause_name(ExitCause cause) {
  for (const auto& c : kCauseNames)
    if (c.cause == cause) return c.name;
  return "exited";
}

const char* kind_name(const Message& message) {
  return std::visit([](const auto& m) { return KindOf<std::decay_t<decltype(m)>>::kName; }, message);
}

Frames encode(const Message& message, std::string_view protocol_id) {
  Frames frames;
  frames.reserve(3);
  frames.emplace_back(protocol_id);
  frames.emplace_back(kind_name(message));
  // Replace invalid UTF-8 (a trial's log may hold any bytes) instead of throwing.
  frames.push_back(std::visit([](const auto& m) { return body(m); }, message)
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return frames;
}

Decoded decode(const Frames& frames) {
  Decoded d;
  if (frames.empty()) {
    d.failure = DecodeFailure::kNotSwept;
    d.error = "empty message";
    return d;
  }
  if (frames[0] != kProtocolId) {
    bool swept_family = frames[0].rfind("swept/", 0) == 0;
    d.failure = swept_family ? DecodeFailure::kVersion : DecodeFailure::kNotSwept;
    d.error = swept_family ? "protocol version \"" + printable(frames[0]) + "\" is not supported; this peer speaks " +
                                 std::string(kProtocolId) + ": use the same swept version on both sides"
                           : "not a swept message (frame 0 is \"" + printable(frames[0]) + "\")";
    if (frames.size() > 1) d.kind = printable(frames[1]);
    if (frames.size() == 3) {  // so that a client can still be answered
      json j = json::parse(frames[2], nullptr, /*allow_exceptions=*/false);
      if (j.is_object())
        if (auto it = j.find("request_id"); it != j.end() && it->is_string()) d.request_id = it->get<std::string>();
    }
    return d;
  }
  if (frames.size() != 3) {
    d.failure = DecodeFailure::kMalformed;
    d.error = "expected 3 frames (protocol, kind, body), got " + std::to_string(frames.size());
    if (frames.size() > 1) d.kind = printable(frames[1]);
    return d;
  }
  d.kind = frames[1];
  json j = json::parse(frames[2], nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    d.failure = DecodeFailure::kMalformed;
    d.kind = printable(frames[1]);
    d.error = printable(frames[1]) + ": the body is not a JSON object";
    return d;
  }
  if (auto it = j.find("request_id"); it != j.end() && it->is_string()) d.request_id = it->get<std::string>();
  if (!known_kind(frames[1])) {
    d.failure = DecodeFailure::kUnknownKind;
    d.kind = printable(frames[1]);
    d.error = "unknown message kind \"" + d.kind + "\"";
    return d;
  }
  try {
    d.message = read_body(frames[1], Reader(j, frames[1]));
  } catch (const std::exception& e) {
    d.failure = DecodeFailure::kMalformed;
    d.error = e.what();
    d.message.reset();
  }
  return d;
}

nlohmann::json counts_json(const StateCounts& counts) {
  json j = json::object();
  for (const auto& st : kTrialStates) j[std::string(st.name)] = counts[st.state];
  return j;
}

nlohmann::json to_json(const SweepSummary& s) {
  json best = nullptr;
  if (s.best_trial_id)
    best = {{"trial_id", *s.best_trial_id},
            {"value", opt(s.best_value)},
            {"params", s.best_params.is_object() ? s.best_params : json::object()}};
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
  return j;
}

nlohmann::json to_json(const TrialRow& t) {
  return {{"id", t.id},
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
