// The codec's agent messages (docs/protocol.md: an agent and the scheduler):
// REGISTER and its answers, HEARTBEAT, START_TRIAL, STOP_TRIAL,
// TRIAL_STARTED, METRICS, TRIAL_EXITED, EXIT_ACK, DISCONNECT; and the names
// of the exit causes. See protocol_codec.h for the parts' contract.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/protocol_codec.h"

namespace swept::protocol {
namespace {

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

}  // namespace

const char* exit_cause_name(ExitCause cause) {
  for (const auto& c : kCauseNames)
    if (c.cause == cause) return c.name;
  return "exited";
}

namespace codec {
namespace {

// ---- writing ----

json acks_json(const std::vector<MetricsAck>& acks) {
  json a = json::array();
  for (const auto& k : acks) a.push_back(json::array({k.trial_id, k.attempt, k.seq}));
  return a;
}

json exited_json(const TrialExited& m) {
  json j = {{"trial_id", m.trial_id}, {"attempt", m.attempt},       {"cause", exit_cause_name(m.cause)},
            {"exit_code", opt(m.exit_code)}, {"signal", opt(m.signal)}, {"timed_out", m.timed_out},
            {"reason", m.reason},     {"ended_at", m.ended_at},     {"last_seq", m.last_seq}};
  if (m.host_fault) j["host_fault"] = true;
  if (m.diverged) j["diverged"] = true;
  if (m.started_at > 0) j["started_at"] = m.started_at;
  return j;
}

void put_health(json& j, const std::optional<bool>& healthy, const std::string& health) {
  if (!healthy) return;
  j["healthy"] = *healthy;
  if (!health.empty()) j["health"] = health;
}

// ---- reading ----

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
  m.started_at = r.has("started_at") ? r.field("started_at").f64() : 0.0;
  return m;
}

template <typename M>
void read_health(const Reader& r, M& m) {
  if (r.has("healthy")) m.healthy = r.field("healthy").boolean();
  m.health = opt_field_str(r, "health");
}

}  // namespace

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
  if (!m.addr.empty()) j["addr"] = m.addr;
  if (m.ports_lo > 0) j["rendezvous_ports"] = json::array({m.ports_lo, m.ports_hi});
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
  if (!m.workers_ended.empty()) {
    json ended = json::array();
    for (const WorkersEnded& w : m.workers_ended) ended.push_back(json::array({w.trial_id, w.attempt}));
    j["workers_ended"] = std::move(ended);
  }
  return j;
}
json body(const StartTrial& m) {
  json j = {{"trial_id", m.trial_id}, {"attempt", m.attempt}, {"sweep_id", m.sweep_id}, {"argv", m.argv},
            {"env", m.env},           {"params", m.params},   {"workdir", m.workdir},   {"gpus", m.gpus},
            {"gpu_fraction", m.gpu_fraction}, {"timeout_s", m.timeout_s}};
  if (m.after_trial_id > 0) j["after"] = json::array({m.after_trial_id, m.after_attempt});
  if (m.gang)
    j["gang"] = {{"nodes", m.gang->nodes},
                 {"node_rank", m.gang->node_rank},
                 {"procs_per_node", m.gang->procs_per_node},
                 {"master_addr", m.gang->master_addr},
                 {"master_port", m.gang->master_port}};
  if (m.gang && !m.gang->addrs.empty()) {  // issue 30: the whole cluster
    j["gang"]["addrs"] = m.gang->addrs;
    j["gang"]["worker_ports"] = m.gang->worker_ports;
    j["gang"]["ps_node"] = m.gang->ps_node;
    j["gang"]["ps_ports"] = m.gang->ps_ports;
  }
  json limits = json::object();
  if (m.limits.memory_bytes > 0) limits["memory"] = m.limits.memory_bytes;
  if (m.limits.pids > 0) limits["pids"] = m.limits.pids;
  if (m.limits.cpus > 0) limits["cpus"] = m.limits.cpus;
  if (!limits.empty()) j["limits"] = std::move(limits);
  if (m.checkpoint) {
    json c = {{"segments", true}};
    if (m.checkpoint->from_trial_id) c["from"] = json::array({*m.checkpoint->from_trial_id, m.checkpoint->from_attempt});
    if (!m.checkpoint->from_agent.empty()) c["from_agent"] = m.checkpoint->from_agent;
    j["checkpoint"] = std::move(c);
  }
  return j;
}
json body(const StopTrial& m) { return {{"trial_id", m.trial_id}, {"attempt", m.attempt}, {"reason", m.reason}}; }
json body(const TrialStarted& m) {
  json j = {{"trial_id", m.trial_id}, {"attempt", m.attempt}, {"pid", m.pid},
            {"started_at", m.started_at}, {"workdir", m.workdir}};
  if (!m.env.empty()) j["env"] = m.env;  // a gang's nodes other than 0 send none
  return j;
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

// ---- reading ----

void read(const Reader& r, Register& m) {
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
  m.addr = opt_field_str(r, "addr");
  if (m.addr.size() > 255) throw FieldError(r.path() + ".addr: must be a host address of at most 255 bytes");
  if (r.has("rendezvous_ports")) {
    Reader p = r.field("rendezvous_ports");
    if (p.size() != 2) p.fail("[first port, last port]");
    m.ports_lo = p.at(0).i32();
    m.ports_hi = p.at(1).i32();
    if (m.ports_lo < 1 || m.ports_hi > 65535 || m.ports_lo > m.ports_hi)
      throw FieldError(p.path() + ": must be a port range [lo, hi] with 1 <= lo <= hi <= 65535");
  }
}

void read(const Reader& r, RegisterAck& m) {
  m.session = r.field("session").str();
  m.heartbeat_ms = r.field("heartbeat_ms").i32();
  m.liveness = r.field("liveness").i32();
  if (r.has("acked")) m.acked = read_acks(r.field("acked"));
  m.lease_ms = opt_field_i64(r, "lease_ms", 0);
}

void read(const Reader& r, RegisterReject& m) {
  m = RegisterReject{r.field("code").str(), opt_field_str(r, "message"), opt_field_i64(r, "retry_after_ms", 0)};
}

void read(const Reader& r, Heartbeat& m) {
  if (!r.raw().is_object()) r.fail("an object");
  if (r.has("acked")) m.acked = read_acks(r.field("acked"));
  read_health(r, m);
  m.draining = r.has("draining") ? r.field("draining").boolean() : false;
  if (r.has("workers_ended")) {
    Reader ended = r.field("workers_ended");
    for (size_t i = 0; i < ended.size(); ++i) {
      Reader w = ended.at(i);
      if (w.size() != 2) w.fail("[trial_id, attempt]");
      m.workers_ended.push_back({w.at(0).i64(), w.at(1).i32()});
    }
  }
}

// START_TRIAL gang's optional cluster (issue 30): every address and port,
// each checked against the rest, so that an agent never builds a TF_CONFIG
// that points nowhere.
void read_gang_cluster(const Reader& g, Gang& gang) {
  auto bad = [&](const char* field, const std::string& want) {
    throw FieldError(g.path() + "." + field + ": must be " + want);
  };
  auto ports = [&](const char* field) {
    std::vector<int> v = g.has(field) ? g.field(field).ints() : std::vector<int>{};
    for (int p : v)
      if (p < 1 || p > 65535) bad(field, "ports, 1 to 65535");
    return v;
  };
  if (g.has("addrs")) gang.addrs = g.field("addrs").strings();
  gang.worker_ports = ports("worker_ports");
  gang.ps_ports = ports("ps_ports");
  gang.ps_node = g.has("ps_node") ? g.field("ps_node").ints() : std::vector<int>{};
  if (gang.addrs.empty() && !(gang.worker_ports.empty() && gang.ps_node.empty() && gang.ps_ports.empty()))
    bad("addrs", "given with worker_ports, ps_node and ps_ports");
  if (gang.addrs.empty()) return;
  for (const std::string& a : gang.addrs)
    if (a.empty() || a.size() > 255) bad("addrs", "host addresses of 1 to 255 bytes");
  if (gang.addrs.size() < static_cast<size_t>(gang.nodes) ||
      gang.addrs.size() > static_cast<size_t>(gang.nodes) + kMaxParameterServers)
    bad("addrs", "one address per node: nodes, plus at most " + std::to_string(kMaxParameterServers) +
                     " servers' own nodes");
  if (gang.worker_ports.size() != static_cast<size_t>(gang.nodes) * static_cast<size_t>(std::max(1, gang.procs_per_node)))
    bad("worker_ports", "one port per worker (nodes x procs_per_node)");
  if (gang.ps_node.size() != gang.ps_ports.size() || gang.ps_node.size() > static_cast<size_t>(kMaxParameterServers))
    bad("ps_node", "one node per parameter server (as many as ps_ports, at most " +
                       std::to_string(kMaxParameterServers) + ")");
  for (int n : gang.ps_node)
    if (n < 0 || static_cast<size_t>(n) >= gang.addrs.size()) bad("ps_node", "indices into addrs");
}

void read(const Reader& r, StartTrial& m) {
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
  if (r.has("gang")) {
    Reader g = r.field("gang");
    Gang gang;
    gang.nodes = g.field("nodes").i32();
    gang.node_rank = g.field("node_rank").i32();
    gang.procs_per_node = g.field("procs_per_node").i32();
    gang.master_addr = g.field("master_addr").str();
    gang.master_port = g.field("master_port").i32();
    auto bad = [&](const char* field, const std::string& want) {
      throw FieldError(g.path() + "." + field + ": must be " + want);
    };
    if (gang.nodes < 1 || gang.nodes > kMaxGangNodes) bad("nodes", "1 to " + std::to_string(kMaxGangNodes));
    read_gang_cluster(g, gang);
    const int all_nodes = std::max(gang.nodes, static_cast<int>(gang.addrs.size()));
    if (gang.node_rank < 0 || gang.node_rank >= all_nodes) bad("node_rank", "0 to the number of nodes - 1");
    if (gang.procs_per_node < 1 || gang.procs_per_node > kMaxProcsPerNode)
      bad("procs_per_node", "1 to " + std::to_string(kMaxProcsPerNode));
    if (gang.master_addr.empty() || gang.master_addr.size() > 255) bad("master_addr", "a host address of 1 to 255 bytes");
    if (gang.master_port < 1 || gang.master_port > 65535) bad("master_port", "a port, 1 to 65535");
    m.gang = std::move(gang);
  }
  if (r.has("limits")) {
    Reader l = r.field("limits");
    m.limits.memory_bytes = opt_field_i64(l, "memory", 0);
    m.limits.pids = opt_field_i64(l, "pids", 0);
    m.limits.cpus = static_cast<int>(opt_field_i64(l, "cpus", 0));
    if (m.limits.memory_bytes < 0) throw FieldError(l.path() + ".memory: must be a number of bytes >= 0");
    if (m.limits.pids < 0) throw FieldError(l.path() + ".pids: must be a number of processes >= 0");
    if (m.limits.cpus < 0 || m.limits.cpus > 4096) throw FieldError(l.path() + ".cpus: must be 0 to 4096");
  }
  if (r.has("checkpoint")) {
    Reader c = r.field("checkpoint");
    CheckpointSegment seg;
    if (!c.field("segments").boolean()) throw FieldError(c.path() + ".segments: must be true");
    if (c.has("from")) {
      Reader f = c.field("from");
      if (f.size() != 2) f.fail("[trial_id, attempt]");
      seg.from_trial_id = f.at(0).i64();
      seg.from_attempt = f.at(1).i32();
      if (*seg.from_trial_id <= 0 || seg.from_attempt <= 0)
        throw FieldError(f.path() + ": the trial id and attempt must be positive");
    }
    seg.from_agent = opt_field_str(c, "from_agent");
    m.checkpoint = seg;
  }
}

void read(const Reader& r, StopTrial& m) {
  m = StopTrial{r.field("trial_id").i64(), r.field("attempt").i32(), opt_field_str(r, "reason")};
}

void read(const Reader& r, TrialStarted& m) {
  m.trial_id = r.field("trial_id").i64();
  m.attempt = r.field("attempt").i32();
  m.pid = opt_field_i64(r, "pid", 0);
  m.started_at = r.field("started_at").f64();
  m.workdir = opt_field_str(r, "workdir");
  if (r.has("env")) m.env = r.field("env").string_map();
}

void read(const Reader& r, Metrics& m) {
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
}

void read(const Reader& r, TrialExited& m) { m = read_exited(r); }
void read(const Reader& r, ExitAck& m) { m = ExitAck{r.field("trial_id").i64(), r.field("attempt").i32()}; }
void read(const Reader& r, Disconnect& m) { m = Disconnect{opt_field_str(r, "reason")}; }

}  // namespace codec
}  // namespace swept::protocol
