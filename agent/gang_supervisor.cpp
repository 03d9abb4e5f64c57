// GangSupervisor: see gang_supervisor.h for the contract.
#include "agent/gang_supervisor.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>

#include "agent/rendezvous.h"
#include "common/log.h"

namespace swept::agent {
namespace {

std::string seconds_text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

// A process's end that fails the node: anything but exit code 0.
bool failed(const TrialResult& r) { return !(r.end == TrialEnd::kExited && r.exit_code == 0); }

const std::vector<std::pair<std::string, std::string>> kNoEnvironment;

}  // namespace

GangSupervisor::GangSupervisor(const TrialLaunch& launch, const protocol::Gang& gang, const SupervisorOptions& options,
                               const Clock& clock)
    : launch_(launch), gang_(gang), options_(options), clock_(clock) {}

std::unique_ptr<GangSupervisor> GangSupervisor::start(const TrialLaunch& launch, const protocol::Gang& gang,
                                                       const std::string& ifname, const SupervisorOptions& options,
                                                       Launcher& launcher, const Clock& clock) {
  std::unique_ptr<GangSupervisor> node(new GangSupervisor(launch, gang, options, clock));
  node->prepare_and_launch(ifname, launcher);
  return node;
}

GangSupervisor::~GangSupervisor() {
  ranks_.clear();  // each kills (SIGKILL) and reaps its process if still running
  release_container();
}

int GangSupervisor::global_rank(size_t local_rank) const {
  return gang_.node_rank * gang_.procs_per_node + static_cast<int>(local_rank);
}

std::string GangSupervisor::process_name(size_t i) const {
  if (server_of_[i] >= 0) return "parameter server " + std::to_string(server_of_[i]);
  return "rank " + std::to_string(global_rank(i));
}

bool GangSupervisor::workers_done() const {
  for (size_t i = 0; i < ranks_.size(); ++i)
    if (server_of_[i] < 0 && (!ranks_[i]->finished() || failed(ranks_[i]->result()))) return false;
  return true;
}

bool GangSupervisor::workers_ended() const {
  if (result_ || stop_requested_ || first_failure_ >= 0) return false;
  bool servers_run = false;
  for (size_t i = 0; i < ranks_.size(); ++i) servers_run = servers_run || (server_of_[i] >= 0 && !ranks_[i]->finished());
  return servers_run && workers_done();
}

void GangSupervisor::prepare_and_launch(const std::string& ifname, Launcher& launcher) {
  started_ms_ = clock_.now_ms();
  started_wall_ = clock_.wall_seconds();
  std::string relative = trial_relative_dir(launch_.sweep_id, launch_.trial_id, launch_.workdir);
  if (Status ok = check_relative_workdir(relative); !ok.ok()) return fail_to_start(ok);
  working_dir_ = (std::filesystem::path(options_.workdir_root) / relative).lexically_normal().string();
  if (Status ok = make_directory(); !ok.ok()) return fail_to_start(ok);
  // Node 0 hosts the rendezvous: a port taken on its host would make every
  // process of every node wait for a peer that never comes.
  if (gang_.node_rank == 0) {
    if (Status free = check_port_bindable(gang_.master_port); !free.ok()) return fail_to_start(free);
  }
  // Likewise each port TF_CONFIG gives a process of this node (issue 30):
  // a server that cannot bind its own would fail the attempt later, not the host now.
  for (int port : own_ports()) {
    if (Status free = check_port_bindable(port); !free.ok()) return fail_to_start(free);
  }
  if (options_.containment) {
    auto container = options_.containment->prepare(launch_.sweep_id, launch_.trial_id, launch_.attempt, launch_.limits);
    if (!container.ok()) return fail_to_start(container.status());
    container_ = *container;
    has_container_ = true;
    // A limit the host cannot set: the node runs without it, and says so (docs/deploy.md, "Trial limits").
    if (!container_.limits.warning.empty()) own_log_ += "[swept: " + container_.limits.warning + "]\n";
  }
  launch_processes(relative, ifname, launcher);
  Containment::launched(container_);  // every process is in: the descriptor served its purpose
  container_.leader = -1;  // no process of the node is its leader: all are swept alike at the end
  // The first process could not start, so none other did: the node ends now.
  if (std::all_of(ranks_.begin(), ranks_.end(), [](const auto& r) { return r->finished(); })) finish();
}

Status GangSupervisor::make_directory() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir(working_dir_);
  fs::create_directories(dir / "checkpoints", ec);
  if (ec) return Status::Unavailable("cannot create the trial directory " + working_dir_ + ": " + ec.message());
  if (!names_params_file(launch_.argv)) return Status::Ok();
  // Written once, whole, before any process starts (each would otherwise
  // truncate it under another that is reading it).
  fs::path file = dir / protocol::kParamsFileName;
  fs::path temporary = dir / (std::string(protocol::kParamsFileName) + ".tmp");
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << launch_.params_json << "\n";
    if (!out.flush()) return Status::Unavailable("cannot write " + temporary.string());
  }
  fs::rename(temporary, file, ec);
  if (ec) return Status::Unavailable("cannot write " + file.string() + ": " + ec.message());
  return Status::Ok();
}

std::vector<GangProcess> GangSupervisor::node_processes() const {
  std::vector<GangProcess> processes;
  // A node past the workers' nodes is a server's own (resources.ps_nodes): no workers.
  if (gang_.node_rank < gang_.nodes)
    for (int local = 0; local < gang_.procs_per_node; ++local) processes.push_back({false, local});
  for (size_t j = 0; j < gang_.ps_node.size(); ++j)
    if (gang_.ps_node[j] == gang_.node_rank) processes.push_back({true, static_cast<int>(j)});
  return processes;
}

std::vector<int> GangSupervisor::own_ports() const {
  std::vector<int> ports;
  if (!gang_.has_cluster()) return ports;
  for (const GangProcess& p : node_processes())
    ports.push_back(p.server ? gang_.ps_ports[static_cast<size_t>(p.index)]
                             : gang_.worker_ports[static_cast<size_t>(global_rank(static_cast<size_t>(p.index)))]);
  return ports;
}

void GangSupervisor::launch_processes(const std::string& relative, const std::string& ifname, Launcher& launcher) {
  SupervisorOptions options = options_;
  options.shared_container = has_container_ ? &container_ : nullptr;
  for (const GangProcess& process : node_processes()) {
    const int rank = process.server ? -1 : global_rank(static_cast<size_t>(process.index));
    TrialLaunch l = launch_;
    l.workdir = relative;
    l.timeout_s = 0;  // the node's timeout is kept here, for all its processes at once
    l.log_prefix = process.server ? "ps-" + std::to_string(process.index) + "." : "rank-" + std::to_string(rank) + ".";
    l.read_metrics = rank == 0;  // worker 0 alone: a server's stdout is log
    l.skip_params_file = true;  // make_directory() wrote it
    l.agent_env = gang_environment(gang_, process, ifname, launch_.extra_env);
    ranks_.push_back(TrialSupervisor::start(l, options, launcher, clock_));
    server_of_.push_back(process.server ? process.index : -1);
    ended_.push_back(false);
    if (ranks_.back()->finished()) {  // could not start: the node fails, the rest never starts
      on_process_end(ranks_.size() - 1);
      break;
    }
  }
}

void GangSupervisor::fail_to_start(const Status& why) {
  TrialResult r;
  r.end = TrialEnd::kLaunchFailed;
  r.host_fault = why.code() == StatusCode::kUnavailable;
  r.reason = why.message();
  r.started_at = started_wall_;
  r.ended_at = clock_.wall_seconds();
  own_log_ += "swept: " + why.message() + "\n";
  release_container();
  result_ = std::move(r);
}

void GangSupervisor::release_container() {
  if (!has_container_) return;
  has_container_ = false;
  // Whatever any process of the node left behind (setsid, double fork).
  options_.containment->kill_all_and_release(container_);
}

pid_t GangSupervisor::pid() const { return ranks_.empty() ? -1 : ranks_.front()->pid(); }

const std::vector<std::pair<std::string, std::string>>& GangSupervisor::environment() const {
  return ranks_.empty() ? kNoEnvironment : ranks_.front()->environment();
}

std::vector<pid_t> GangSupervisor::live_pids() const {
  std::vector<pid_t> pids;
  for (const auto& r : ranks_) {
    for (pid_t p : r->live_pids()) pids.push_back(p);
  }
  return pids;
}

std::vector<int> GangSupervisor::poll_fds() const {
  std::vector<int> fds;
  if (result_) return fds;
  for (const auto& r : ranks_) {
    for (int fd : r->poll_fds()) fds.push_back(fd);
  }
  return fds;
}

int64_t GangSupervisor::next_deadline_ms() const {
  if (result_) return INT64_MAX;
  int64_t deadline = INT64_MAX;
  if (!stop_requested_ && launch_.timeout_s > 0)
    deadline = started_ms_ + static_cast<int64_t>(launch_.timeout_s * 1000.0);
  for (const auto& r : ranks_) deadline = std::min(deadline, r->next_deadline_ms());
  return deadline;
}

void GangSupervisor::service() {
  if (result_) return;
  for (auto& r : ranks_) r->service();
  if (!stop_requested_ && launch_.timeout_s > 0 &&
      clock_.now_ms() - started_ms_ >= static_cast<int64_t>(launch_.timeout_s * 1000.0)) {
    timed_out_ = true;
    request_stop("timed out after " + seconds_text(launch_.timeout_s) + " s");
  }
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i]->finished() && !ended_[i]) on_process_end(i);
  }
  if (std::all_of(ranks_.begin(), ranks_.end(), [](const auto& r) { return r->finished(); })) finish();
}

void GangSupervisor::on_process_end(size_t i) {
  ended_[i] = true;
  const TrialResult& r = ranks_[i]->result();
  // A process ending because the node is being stopped is not a failure.
  if (first_failure_ >= 0 || stop_requested_ || !failed(r)) return;
  first_failure_ = static_cast<int>(i);
  const std::string why = process_name(i) + " failed (" + r.reason + ")";
  bool others = false;
  for (auto& other : ranks_) {
    if (!other->finished()) {
      other->request_stop(why + ": stopped with the rest of its node");
      others = true;
    }
  }
  if (others) own_log_ += "[swept: " + why + ": stopping the node's other processes]\n";
  log::info("trial " + std::to_string(launch_.trial_id) + " attempt " + std::to_string(launch_.attempt) + ": " + why);
}

void GangSupervisor::finish() {
  release_container();
  TrialResult r;
  if (first_failure_ >= 0) {
    r = ranks_[static_cast<size_t>(first_failure_)]->result();
    r.reason = process_name(static_cast<size_t>(first_failure_)) + ": " + r.reason;
  } else if (servers_stopped_) {
    // The workers ended well and the scheduler stopped the servers (issue
    // 30): the node completed. Its first worker's exit is its own; a
    // server's own node says what happened.
    auto worker = std::find(server_of_.begin(), server_of_.end(), -1);
    if (worker != server_of_.end()) {
      r = ranks_[static_cast<size_t>(worker - server_of_.begin())]->result();
    } else {
      r.end = TrialEnd::kExited;
      r.exit_code = 0;
      r.reason = "exit code 0 (its parameter servers stopped after the trial's workers ended)";
    }
  } else {
    // Stopped or timed out: the first process the stop ended says how (its
    // reason names a SIGKILL after the grace). Else every one exited 0.
    auto stopped = std::find_if(ranks_.begin(), ranks_.end(),
                                [](const auto& p) { return p->result().end == TrialEnd::kStopped; });
    r = (stop_requested_ && stopped != ranks_.end()) ? (*stopped)->result() : ranks_.front()->result();
    if (stop_requested_) r.end = timed_out_ ? TrialEnd::kTimedOut : TrialEnd::kStopped;
  }
  r.diverged = std::any_of(ranks_.begin(), ranks_.end(), [](const auto& p) { return p->result().diverged; });
  r.started_at = started_wall_;
  r.ended_at = clock_.wall_seconds();
  result_ = std::move(r);
}

void GangSupervisor::request_stop(const std::string& reason, int grace_ms) {
  if (result_ || stop_requested_) return;
  // The scheduler's stop once every worker of the trial has ended (issue
  // 30): on a node whose own workers all exited 0, the servers' end is the
  // trial's normal end, not a stop.
  if (reason == protocol::kWorkersEndedStop && first_failure_ < 0 && workers_done()) {
    servers_stopped_ = true;
    own_log_ += "[swept: " + reason + "]\n";
  }
  stop_requested_ = true;
  for (auto& r : ranks_) r->request_stop(reason, grace_ms);
}

std::vector<MetricPoint> GangSupervisor::take_metrics() {
  std::vector<MetricPoint> out;
  for (auto& r : ranks_) {
    std::vector<MetricPoint> points = r->take_metrics();  // only RANK 0 reads any
    out.insert(out.end(), std::make_move_iterator(points.begin()), std::make_move_iterator(points.end()));
  }
  return out;
}

size_t GangSupervisor::pending_metrics() const {
  size_t n = 0;
  for (const auto& r : ranks_) n += r->pending_metrics();
  return n;
}

uint64_t GangSupervisor::dropped_metrics() const {
  uint64_t n = 0;
  for (const auto& r : ranks_) n += r->dropped_metrics();
  return n;
}

PendingLog::Taken GangSupervisor::take_log() {
  PendingLog::Taken out;
  out.text = std::exchange(own_log_, {});
  for (auto& r : ranks_) {
    PendingLog::Taken t = r->take_log();
    out.text += t.text;
    out.dropped += t.dropped;
  }
  // One batch carries at most what one process's would (the oldest go).
  if (out.text.size() > options_.log_batch_bytes) {
    size_t excess = out.text.size() - options_.log_batch_bytes;
    out.dropped += excess;
    out.text.erase(0, excess);
  }
  return out;
}

bool GangSupervisor::has_pending_log() const {
  return !own_log_.empty() ||
         std::any_of(ranks_.begin(), ranks_.end(), [](const auto& r) { return r->has_pending_log(); });
}

}  // namespace swept::agent
