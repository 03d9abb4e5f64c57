// Broker: see broker.h and docs/protocol.md. The file reads top to bottom as
// the loop does: receive and decode, handle agents, handle clients, timers,
// dispatch, commit, send. How a live trial ends (finished, lost, cancelled)
// is in broker_lifecycle.cpp.
#include "scheduler/broker.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <time.h>

#include "common/log.h"
#include "scheduler/zmq_io.h"

namespace swept::scheduler {

using namespace swept::protocol;

namespace {

constexpr int kMaxMessagesPerTurn = 20000;
// How long a received TRIAL_STARTED may wait for a commit that happens
// anyway before it gets one of its own (Broker::write_starts).
constexpr int64_t kStartWriteDelayMs = 50;
// A sweep whose trials run shorter than this on average gets successors
// queued at its agents (Broker::queue_successors).
constexpr double kSuccessorBelowSeconds = 1.0;
// How long a transaction may stay open to gather more changes when all it
// would send is deferrable (Broker::turn).
constexpr int64_t kGatherWindowUs = 2000;

std::string to_s(int64_t v) { return std::to_string(v); }


}  // namespace

Broker::Broker(store::Writer& store, const Clock& clock, BrokerOptions options)
    : store_(store), clock_(clock), options_(std::move(options)), runner_(store, clock), context_(1),
      socket_(context_, zmq::socket_type::router) {}

Broker::~Broker() {
  if (store_.in_transaction()) store_.rollback();
  socket_.close();
  context_.close();
}

Status Broker::bind() {
  SWEPT_ZMQ_CHECK(socket_.set(zmq::sockopt::router_handover, 1));
  SWEPT_ZMQ_CHECK(socket_.set(zmq::sockopt::router_mandatory, 1));
  // Bounded per peer (docs/protocol.md): what one peer sends or leaves
  // unread cannot grow the scheduler's memory without bound.
  SWEPT_ZMQ_CHECK(socket_.set(zmq::sockopt::maxmsgsize, kMaxMessageBytes));
  SWEPT_ZMQ_CHECK(socket_.set(zmq::sockopt::linger, 0));
  SWEPT_ZMQ_CHECK(socket_.set(zmq::sockopt::sndhwm, kPeerHighWaterMark));
  SWEPT_ZMQ_CHECK(socket_.set(zmq::sockopt::rcvhwm, kPeerHighWaterMark));
  if (options_.server_key) {
    if (!options_.keys) return Status::InvalidArgument("a keyed broker needs its authorized keys");
    SWEPT_RETURN_IF_ERROR(curve::apply_server(socket_.handle(), *options_.server_key, "swept"));
  }
  try {
    socket_.bind(options_.bind);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot listen on " + options_.bind + ": " + e.what() +
                               " (is another scheduler running there? choose another --bind)");
  }
  SWEPT_ZMQ_CHECK(endpoint_ = socket_.get(zmq::sockopt::last_endpoint));
  if (!options_.local_bind.empty()) {
    try {
      socket_.bind(options_.local_bind);
    } catch (const zmq::error_t& e) {
      return Status::Unavailable("cannot listen on " + options_.local_bind + ": " + e.what());
    }
  }
  return Status::Ok();
}

BrokerStats Broker::stats() const {
  BrokerStats s;
  s.messages_in = stat_in_.load();
  s.messages_dropped = stat_dropped_.load();
  s.trials_dispatched = stat_dispatched_.load();
  s.trials_finished = stat_finished_.load();
  s.successors = stat_successors_.load();
  s.metric_rows = stat_rows_.load();
  s.registers = stat_registers_.load();
  s.host_fault_requeues = stat_host_requeues_.load();
  s.loop_cpu_seconds = stat_cpu_.load();
  s.ingest_seconds = stat_ingest_.load();
  s.turns = stat_turns_.load();
  return s;
}

std::vector<int64_t> Broker::unplaceable_sweeps() const {
  MutexLock lock(unplaceable_mutex_);
  return std::vector<int64_t>(unplaceable_.begin(), unplaceable_.end());
}

Status Broker::ensure_tx() {
  if (store_.in_transaction()) return Status::Ok();
  return store_.begin();
}

void Broker::send_later(const std::string& routing_id, Message m) {
  outgoing_.push_back({routing_id, std::move(m)});
}

void Broker::flush() {
  int64_t now = clock_.now_ms();
  for (auto& o : outgoing_) {
    Status s = zmqio::send(socket_, o.routing_id, encode(o.message));
    if (!s.ok()) log::debug("dropped " + std::string(kind_name(o.message)) + ": " + s.message());
    if (auto it = sessions_.find(o.routing_id); it != sessions_.end()) it->second.last_sent_ms = now;
  }
  outgoing_.clear();
}

Broker::Session* Broker::session_by_routing(const std::string& routing_id) {
  auto it = sessions_.find(routing_id);
  return it == sessions_.end() ? nullptr : &it->second;
}

// ---- recovery ----

Status Broker::recover() {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  // Nobody is connected yet: agents must register again.
  SWEPT_RETURN_IF_ERROR(store_.mark_all_agents(AgentState::kAlive, AgentState::kLost));
  auto quarantined = store_.quarantined_agents();
  if (!quarantined.ok()) return quarantined.status();
  for (auto& [agent, reason] : *quarantined) quarantined_[agent] = Quarantine{std::move(reason), false};
  auto running = runner_.recover();
  if (!running.ok()) return running.status();
  int64_t deadline = clock_.now_ms() + options_.recovery_grace_ms;
  for (const store::TrialRecord& t : *running) {
    LiveTrial lt;
    lt.trial_id = t.id;
    lt.sweep_id = t.sweep_id;
    lt.attempt = t.attempts;
    lt.agent = t.agent;
    lt.gpus = t.gpus;
    lt.gpu_fraction = t.gpu_fraction;
    Demand d = runner_.demand(t.sweep_id);
    lt.cpus = d.needs_gpu() ? 0 : d.cpus;
    lt.started = t.started;
    auto seq = store_.metrics_seq(t.id, t.attempts);
    if (!seq.ok()) return seq.status();
    lt.stored_seq = *seq;
    lt.await_deadline_ms = deadline;
    if (const auto* spec = runner_.spec(t.sweep_id)) lt.max_retries = spec->max_retries;
    live_[t.id] = lt;
  }
  live_count_ = live_.size();
  if (!running->empty())
    log::info("recovered " + std::to_string(running->size()) +
              " running trials; waiting for their agents to re-register");
  SWEPT_RETURN_IF_ERROR(store_.commit());
  dirty_ = true;
  return Status::Ok();
}

Result<SubmitResult> Broker::submit(const std::string& spec_text) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  auto r = runner_.submit(spec_text);
  if (!r.ok()) {
    store_.rollback();
    return r.status();
  }
  SWEPT_RETURN_IF_ERROR(store_.commit());
  dirty_ = true;
  return r;
}

// ---- the loop ----

namespace {
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
}  // namespace

Status Broker::run(const std::atomic<bool>& stop) {
  const double cpu0 = thread_cpu_seconds();
  Status s;
  while (!stop.load() && s.ok()) {
    s = turn(100);
    stat_cpu_ = thread_cpu_seconds() - cpu0;
  }
  // A stop (not a crash) leaves no received start unwritten and nothing
  // decided uncommitted or unsent (a turn may have been gathering).
  if (s.ok() && (!pending_starts_.empty() || store_.in_transaction())) {
    s = write_starts(/*all=*/true);
    if (s.ok() && store_.in_transaction()) s = store_.commit();
    if (s.ok()) flush();
    if (!s.ok()) store_.rollback();
  }
  gathering_ = false;
  return s;
}

Status Broker::turn(int max_wait_ms) {
  int wait = std::max(0, std::min(max_wait_ms, options_.heartbeat_ms));
  if (gathering_) {
    const int64_t left_ms = (gather_until_us_ - clock_.now_us()) / 1000;
    wait = static_cast<int>(std::clamp<int64_t>(left_ms + 1, 0, wait));
  }
  for (int64_t id : pending_starts_) {  // wake when the oldest unwritten start is due
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    int64_t due = it->second.start_received_ms + kStartWriteDelayMs - clock_.now_ms();
    wait = static_cast<int>(std::clamp<int64_t>(due, 0, wait));
  }
  try {
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_.fd(), ZMQ_POLLIN, 0}};
    zmq::poll(items, wake_.fd() >= 0 ? 2 : 1, std::chrono::milliseconds(wait));
    if (items[1].revents & ZMQ_POLLIN) wake_.drain();
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) return Status::Unavailable(std::string("zmq_poll failed: ") + e.what());
  }
  // Bound each turn's work (by count and by real time) so that heartbeats
  // and acknowledgements still go out every interval under a flood of metrics.
  const int64_t budget_end_us = clock_.now_us() + int64_t{1000} * std::max(5, options_.heartbeat_ms / 4);
  Status failure;
  for (int i = 0; i < kMaxMessagesPerTurn; ++i) {
    if ((i & 63) == 63 && clock_.now_us() > budget_end_us) break;
    auto got = zmqio::receive(socket_, /*with_routing_id=*/true, /*dontwait=*/true);
    if (!got.ok()) {
      log::warn(got.status().message());
      break;
    }
    if (!got->has_value()) break;
    stat_in_++;
    failure = handle((*got)->routing_id, (*got)->frames, (*got)->user_id);
    if (!failure.ok()) break;
  }
  if (failure.ok() && cancel_all_requested_.exchange(false)) {
    auto sweeps = store_.sweeps_in_state(SweepState::kRunning);
    if (!sweeps.ok()) failure = sweeps.status();
    for (const auto& s : sweeps.ok() ? *sweeps : std::vector<store::SweepRecord>{}) {
      int64_t n = 0;
      failure = cancel_sweep(s.id, "stopped by the user (interrupt)", &n);
      if (!failure.ok()) break;
    }
  }
  if (failure.ok()) failure = check_timers();
  if (failure.ok() && dirty_) failure = dispatch();
  // Those waiting ride on this turn's commit when there is one.
  if (failure.ok() && !pending_starts_.empty())
    failure = write_starts(/*all=*/store_.in_transaction() || !options_.commit.defer_start_writes);
  // All there is to send waits on nothing (exit acknowledgements, and
  // successors whose predecessor still runs): the transaction stays open a
  // little, so that one commit and one wake-up of the agent serve several
  // trials. Anything else commits and goes out now.
  if (failure.ok() && options_.commit.gather_window && store_.in_transaction() && deferrable_outgoing()) {
    const int64_t now_us = clock_.now_us();
    if (!gathering_) {
      gathering_ = true;
      gather_until_us_ = now_us + kGatherWindowUs;
    }
    if (now_us < gather_until_us_) {
      stat_turns_++;
      return Status::Ok();
    }
  }
  gathering_ = false;
  if (failure.ok() && store_.in_transaction()) failure = store_.commit();
  if (!failure.ok()) {
    // Nothing half-done is acknowledged: drop what was about to be sent.
    store_.rollback();
    outgoing_.clear();
    return failure;
  }
  send_heartbeats();
  flush();
  // Tell a waiter (swept run's progress) when a sweep ended or the last
  // trial out on agents did.
  const bool drained = live_.empty() && live_count_.load() != 0;
  live_count_ = live_.size();
  if (drained || runner_.ended_count() != sweeps_ended_seen_) {
    sweeps_ended_seen_ = runner_.ended_count();
    std::erase_if(mean_run_seconds_, [&](const auto& kv) { return !runner_.is_running(kv.first); });
    {
      MutexLock lock(change_mutex_);
      ++changes_;
    }
    change_cv_.notify_all();
  }
  stat_turns_++;
  return Status::Ok();
}

bool Broker::deferrable_outgoing() const {
  for (const Outgoing& o : outgoing_) {
    if (std::holds_alternative<ExitAck>(o.message)) continue;
    const auto* st = std::get_if<StartTrial>(&o.message);
    if (!st || !st->after_trial_id) return false;
    auto before = live_.find(st->after_trial_id);
    if (before == live_.end() || before->second.successor != st->trial_id) return false;  // its place is free now
  }
  return true;
}

int64_t Broker::wait_for_change(int64_t seen, std::chrono::milliseconds timeout) {
  MutexLock lock(change_mutex_);
  // Another thread's real-time wait on a condition variable: steady_clock,
  // not clock_ (a FakeClock never advances while this thread sleeps).
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (changes_ == seen)
    if (change_cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  return changes_;
}

Status Broker::handle(const std::string& routing_id, const Frames& frames, const std::string& user_id) {
  Decoded d = decode(frames);
  Session* session = session_by_routing(routing_id);
  if (!d.ok()) {
    stat_dropped_++;
    switch (d.failure) {
      case DecodeFailure::kNotSwept:
        log::debug("dropped a message that is not swept's from " + routing_id + ": " + d.error);
        return Status::Ok();
      case DecodeFailure::kVersion:
        if (d.kind == "REGISTER")
          send_later(routing_id, RegisterReject{"bad_request", d.error, 0});
        else
          send_later(routing_id, Error{d.request_id, "version", d.error});
        break;
      default:
        send_later(routing_id, Error{d.request_id, "malformed", d.error});
        break;
    }
    refused_log_.write(clock_.now_ms(), "refused a message from " +
                                            (session ? "agent " + session->name : std::string("a client")) + ": " +
                                            d.error);
    return Status::Ok();
  }
  const Message& m = *d.message;
  if (options_.keys) {
    auto ok = authorized(routing_id, m, user_id, d.request_id);
    if (!ok.ok()) return ok.status();
    if (!*ok) return Status::Ok();
    session = session_by_routing(routing_id);  // dropped when its key was revoked
  }
  if (session) session->last_heard_ms = clock_.now_ms();  // any valid message is a heartbeat
  if (auto* r = std::get_if<Register>(&m)) {
    stat_registers_++;
    return on_register(routing_id, *r);
  }
  if (std::holds_alternative<Heartbeat>(m) || std::holds_alternative<TrialStarted>(m) ||
      std::holds_alternative<Metrics>(m) || std::holds_alternative<TrialExited>(m) ||
      std::holds_alternative<Disconnect>(m)) {
    if (!session) {
      if (!std::holds_alternative<Disconnect>(m))
        send_later(routing_id, Disconnect{"unknown session; register again"});
      return Status::Ok();
    }
    return handle_agent(*session, m);
  }
  if (std::holds_alternative<Submit>(m) || std::holds_alternative<Cancel>(m) || std::holds_alternative<Retry>(m) ||
      std::holds_alternative<QuerySweeps>(m) || std::holds_alternative<QueryTrials>(m) ||
      std::holds_alternative<QueryAgents>(m) || std::holds_alternative<ReleaseAgent>(m))
    return handle_client(routing_id, m);
  // REGISTER_ACK, START_TRIAL, SWEEPS, ...: the scheduler sends these, it never receives them.
  stat_dropped_++;
  send_later(routing_id, Error{d.request_id, "malformed",
                               std::string(kind_name(m)) + " is sent by the scheduler, not to it"});
  return Status::Ok();
}

// ---- who may send what (keyed schedulers) ----

Result<bool> Broker::authorized(const std::string& routing_id, const Message& m, const std::string& user_id,
                                const std::string& request_id) {
  current_key_ = user_id;
  const bool agent_kind = std::holds_alternative<Register>(m) || std::holds_alternative<Heartbeat>(m) ||
                          std::holds_alternative<TrialStarted>(m) || std::holds_alternative<Metrics>(m) ||
                          std::holds_alternative<TrialExited>(m) || std::holds_alternative<Disconnect>(m);
  std::optional<KeyRing::Entry> entry;
  if (!user_id.empty()) entry = options_.keys->find(user_id);
  if (!entry) {  // revoked since its handshake (or, defensively, no ZAP User-Id at all)
    stat_dropped_++;
    if (Session* s = session_by_routing(routing_id)) {
      std::string name = s->name;
      log::warn("agent " + name + ": its key is no longer authorized; session dropped");
      send_later(routing_id, RegisterReject{"unauthorized", "this agent's key is no longer authorized", 0});
      SWEPT_RETURN_IF_ERROR(on_agent_gone(routing_id, "its key was revoked", AgentState::kGone));
      key_by_name_.erase(name);
    } else if (std::holds_alternative<Register>(m)) {
      send_later(routing_id, RegisterReject{"unauthorized", "this agent's key is not authorized", 0});
    } else if (!agent_kind) {
      send_later(routing_id, Error{request_id, "unauthorized", "this key is not authorized (any more)"});
    }
    return false;
  }
  if (agent_kind && !entry->may_register()) {
    stat_dropped_++;
    log::warn("refused " + std::string(kind_name(m)) + " from client key " + entry->label);
    if (std::holds_alternative<Register>(m))
      send_later(routing_id, RegisterReject{"forbidden",
                                            "this is a client key (" + entry->label +
                                                "): an agent needs a key in the scheduler's authorized agents/ folder",
                                            0});
    return false;
  }
  if (!agent_kind && !entry->may_command()) {
    stat_dropped_++;
    log::warn("refused " + std::string(kind_name(m)) + " from agent key " + entry->label);
    send_later(routing_id, Error{request_id, "forbidden",
                                 "this is an agent key (" + entry->label +
                                     "): it may not submit, cancel, retry or query; use a key from the scheduler's "
                                     "authorized clients/ folder"});
    return false;
  }
  return true;
}

// ---- agents ----

Status Broker::on_register(const std::string& routing_id, const Register& r) {
  // Validate what placement will rely on.
  std::string bad;
  std::set<int> indices;
  if (r.name.empty() || r.name.size() > 200) bad = "REGISTER.name: must be 1 to 200 characters";
  if (r.slots < 0) bad = "REGISTER.slots: must be 0 or more";
  for (const auto& g : r.gpus)
    if (!indices.insert(g.index).second || g.index < 0)
      bad = "REGISTER.gpus: index " + std::to_string(g.index) + " is negative or appears twice";
  if (!bad.empty()) {
    stat_dropped_++;
    send_later(routing_id, RegisterReject{"bad_request", bad, 0});
    log::warn("refused REGISTER from " + r.name + ": " + bad);
    return Status::Ok();
  }
  // One connection registers one agent: a second name on it is refused (a
  // peer cannot fill the registry from one socket; docs/protocol.md).
  if (auto bound = name_by_routing_.find(routing_id); bound != name_by_routing_.end() && bound->second != r.name) {
    stat_dropped_++;
    send_later(routing_id, RegisterReject{"one_agent_per_connection",
                                          "this connection already registered agent \"" + bound->second +
                                              "\"; one connection registers one agent: open a new connection for \"" +
                                              r.name + "\"",
                                          0});
    refused_log_.write(clock_.now_ms(), "refused REGISTER for agent " + r.name + ": its connection registered agent " +
                                            bound->second);
    return Status::Ok();
  }
  const int64_t now = clock_.now_ms();
  const int64_t liveness_ms = int64_t{options_.heartbeat_ms} * options_.liveness;

  // On a keyed scheduler a name belongs to the first key that registers it
  // (until that key is revoked): another key cannot take it over, live or not.
  if (options_.keys) {
    const std::string& key = current_key_;
    auto [owner, fresh] = key_by_name_.emplace(r.name, key);
    if (!fresh && owner->second != key && !options_.keys->find(owner->second)) owner->second = key;  // revoked
    if (!fresh && owner->second != key) {
      stat_dropped_++;
      send_later(routing_id, RegisterReject{"name_taken",
                                            "the agent name \"" + r.name +
                                                "\" belongs to another key; give this agent another --name",
                                            0});
      log::warn("refused REGISTER for agent " + r.name + ": the name belongs to another key");
      return Status::Ok();
    }
  }
  // A name held by another live connection: a duplicate, refused loudly.
  if (auto it = routing_by_name_.find(r.name); it != routing_by_name_.end() && it->second != routing_id) {
    Session* old = session_by_routing(it->second);
    // The same agent process (host and pid) on a new connection is a
    // reconnect, not a duplicate: it takes over at once.
    bool same_process = old && old->host == r.host && old->pid == r.pid;
    if (old && !same_process && now - old->last_heard_ms < liveness_ms) {
      stat_dropped_++;
      send_later(routing_id, RegisterReject{"duplicate_name",
                                            "an agent named \"" + r.name + "\" (host " + old->host +
                                                ") is already connected; give this one another --name",
                                            liveness_ms});
      log::warn("refused a second agent named " + r.name + " from host " + r.host);
      return Status::Ok();
    }
    // Its predecessor went silent: this connection takes over its trials.
    if (old) sessions_.erase(it->second);
    routing_by_name_.erase(it);
  }
  Session& s = sessions_[routing_id];
  s.routing_id = routing_id;
  s.name = r.name;
  s.host = r.host;
  s.session = r.session;
  s.slots = r.slots;
  s.pid = r.pid;
  s.gpus = r.gpus;
  s.start_after = std::find(r.features.begin(), r.features.end(), "start_after") != r.features.end();
  if (options_.keys) s.key = current_key_;
  s.last_heard_ms = now;
  routing_by_name_[r.name] = routing_id;
  name_by_routing_[routing_id] = r.name;
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_RETURN_IF_ERROR(store_.upsert_agent(r.name, r.host, r.slots, r.gpus, clock_.wall_seconds()));
  SWEPT_RETURN_IF_ERROR(note_health(s, r.healthy, r.health));

  // Reconcile what the agent runs with what the store says (docs/protocol.md).
  RegisterAck ack{r.session, options_.heartbeat_ms, options_.liveness, {}, lease_ms()};
  std::vector<StopTrial> stops;
  std::set<int64_t> reported;
  for (const RunningTrial& rt : r.running) {
    reported.insert(rt.trial_id);
    auto it = live_.find(rt.trial_id);
    if (it != live_.end() && it->second.agent == r.name && it->second.attempt == rt.attempt) {
      LiveTrial& lt = it->second;
      // A start the scheduler had not written when it stopped: its time at least.
      if (!lt.started && rt.started_at > 0) SWEPT_RETURN_IF_ERROR(store_.fill_started_at(rt.trial_id, rt.attempt, rt.started_at));
      lt.started = true;
      lt.await_deadline_ms = 0;
      lt.lease_wait = false;  // back before its lease ran out: it goes on here
      lt.acked_seq = lt.stored_seq;
      ack.acked.push_back({rt.trial_id, rt.attempt, lt.stored_seq});
      if (lt.cancelled) stops.push_back({rt.trial_id, rt.attempt, "cancelled by the user"});
      continue;
    }
    auto rec = store_.trial_record(rt.trial_id);
    if (rec.ok() && it == live_.end() && rec->attempts == rt.attempt &&
        next_trial_state(rec->state, {TrialEventKind::kAdopt}, 0) && runner_.adopt_queued(rec->sweep_id, rec->id)) {
      // Given up while its agent was away, not restarted yet: take it back.
      LiveTrial lt;
      lt.trial_id = rec->id;
      lt.sweep_id = rec->sweep_id;
      lt.attempt = rt.attempt;
      lt.agent = r.name;
      lt.gpus = rec->gpus;
      lt.gpu_fraction = rec->gpu_fraction;
      Demand d = runner_.demand(rec->sweep_id);
      lt.cpus = d.needs_gpu() ? 0 : d.cpus;
      lt.started = true;
      if (const auto* spec = runner_.spec(rec->sweep_id)) lt.max_retries = spec->max_retries;
      SWEPT_RETURN_IF_ERROR(store_.reopen_attempt(rec->id, rt.attempt, r.name));
      auto seq = store_.metrics_seq(rec->id, rt.attempt);
      if (!seq.ok()) return seq.status();
      lt.stored_seq = lt.acked_seq = *seq;
      live_[rec->id] = lt;
      ack.acked.push_back({rec->id, rt.attempt, *seq});
      log::info("trial " + to_s(rec->id) + " is still running on " + r.name + ": adopted back");
      continue;
    }
    auto seq = store_.metrics_seq(rt.trial_id, rt.attempt);
    ack.acked.push_back({rt.trial_id, rt.attempt, seq.ok() ? *seq : 0});
    stops.push_back({rt.trial_id, rt.attempt, "stale attempt: the trial was restarted elsewhere or stopped"});
    log::info("agent " + r.name + " runs trial " + to_s(rt.trial_id) + " attempt " + std::to_string(rt.attempt) +
              ", which is no longer current: stopping it");
  }
  for (const TrialExited& f : r.finished) {
    reported.insert(f.trial_id);
    SWEPT_RETURN_IF_ERROR(on_trial_exited(s, f, /*from_register=*/true));
    auto seq = store_.metrics_seq(f.trial_id, f.attempt);
    if (!seq.ok()) return seq.status();
    ack.acked.push_back({f.trial_id, f.attempt, *seq});
  }
  std::vector<int64_t> missing;
  for (auto& [id, lt] : live_) {
    if (lt.agent != r.name || reported.count(id)) continue;
    if (!lt.started) {
      // Never confirmed: its START_TRIAL may have crossed this REGISTER (sent
      // on the agent's previous connection, read after). Wait a liveness
      // period for the agent's TRIAL_STARTED before requeueing it.
      lt.await_deadline_ms = now + liveness_ms;
      continue;
    }
    missing.push_back(id);
  }
  for (int64_t id : missing) {
    if (live_[id].lease_wait)  // its lease ran out on the agent: not the trial's fault
      SWEPT_RETURN_IF_ERROR(lose_live(id, "agent " + r.name + " came back without it after its lease ran out"));
    else
      SWEPT_RETURN_IF_ERROR(lose_live(id, "agent " + r.name + " came back without it"));
  }

  send_later(routing_id, ack);
  for (auto& st : stops) send_later(routing_id, st);
  log::info("agent " + r.name + " registered (host " + r.host + ", " + std::to_string(r.gpus.size()) + " GPUs, " +
            std::to_string(r.slots) + " slots, " + std::to_string(r.running.size()) + " running, " +
            std::to_string(r.finished.size()) + " finished while away)");
  dirty_ = true;
  return Status::Ok();
}

Status Broker::handle_agent(Session& s, const Message& m) {
  if (auto* hb = std::get_if<Heartbeat>(&m)) return note_health(s, hb->healthy, hb->health);
  if (auto* st = std::get_if<TrialStarted>(&m)) return on_trial_started(s, *st);
  if (auto* mt = std::get_if<Metrics>(&m)) return on_metrics(s, *mt);
  if (auto* ex = std::get_if<TrialExited>(&m)) return on_trial_exited(s, *ex, false);
  if (auto* dc = std::get_if<Disconnect>(&m)) {
    log::info("agent " + s.name + " disconnected: " + dc->reason);
    return on_agent_gone(s.routing_id, "it disconnected (" + dc->reason + ")", AgentState::kGone);
  }
  return Status::Ok();
}

Status Broker::on_trial_started(Session& s, const TrialStarted& m) {
  auto it = live_.find(m.trial_id);
  if (it == live_.end() || it->second.agent != s.name || it->second.attempt != m.attempt) {
    log::info("agent " + s.name + " started trial " + to_s(m.trial_id) + " attempt " + std::to_string(m.attempt) +
              ", which is not current: stopping it");
    send_later(s.routing_id, StopTrial{m.trial_id, m.attempt, "stale attempt"});
    return Status::Ok();
  }
  it->second.await_deadline_ms = 0;
  if (it->second.started) return Status::Ok();
  it->second.started = true;
  it->second.start_env_json = nlohmann::json(m.env).dump();
  it->second.start_started_at = m.started_at;
  it->second.start_received_ms = clock_.now_ms();
  pending_starts_.insert(m.trial_id);
  return Status::Ok();
}

Status Broker::write_start(LiveTrial& lt) {
  if (!lt.start_env_json) return Status::Ok();
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_RETURN_IF_ERROR(store_.confirm_started(lt.trial_id, lt.attempt, *lt.start_env_json, lt.start_started_at));
  lt.start_env_json.reset();
  pending_starts_.erase(lt.trial_id);
  return Status::Ok();
}

Status Broker::write_starts(bool all) {
  const int64_t now = clock_.now_ms();
  for (auto id = pending_starts_.begin(); id != pending_starts_.end();) {
    auto it = live_.find(*id);
    ++id;  // write_start erases the current element
    if (it == live_.end()) continue;
    if (all || now - it->second.start_received_ms >= kStartWriteDelayMs) SWEPT_RETURN_IF_ERROR(write_start(it->second));
  }
  return Status::Ok();
}

Status Broker::on_metrics(Session& s, const Metrics& m) {
  auto it = live_.find(m.trial_id);
  bool current = it != live_.end() && it->second.agent == s.name && it->second.attempt == m.attempt;
  int64_t sweep_id = current ? it->second.sweep_id : 0;
  if (!current) {
    // A re-sent batch of an attempt that already ended (finished while the
    // scheduler was away) is still that trial's data: keep it.
    auto rec = store_.trial_record(m.trial_id);
    if (!rec.ok() || rec->attempts != m.attempt || rec->agent != s.name) {
      log::debug("dropped metrics of trial " + to_s(m.trial_id) + " attempt " + std::to_string(m.attempt) +
                 " from " + s.name + ": not its current attempt");
      return Status::Ok();
    }
    sweep_id = rec->sweep_id;
  }
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  std::optional<std::string> metric = runner_.metric_name(sweep_id);
  if (!metric && !runner_.is_running(sweep_id)) {
    auto sums = store::sweep_summaries(store_.connection(), sweep_id);
    if (sums.ok() && !sums->empty()) metric = sums->front().metric_name;
  }
  const int64_t t0_us = clock_.now_us();
  auto applied = store_.add_metrics(m, metric);
  stat_ingest_ = stat_ingest_.load() + static_cast<double>(clock_.now_us() - t0_us) / 1e6;
  if (!applied.ok()) return applied.status();
  if (*applied) {
    stat_rows_ += static_cast<int64_t>(m.records.size());
    if (current) it->second.stored_seq = m.seq;
  }
  if (*applied && current) SWEPT_RETURN_IF_ERROR(judge_early_stop(s, it->second, m));
  if (*applied && !current) {
    // A late batch of an ended attempt: its values join the curve (as the
    // store has them), judged no more.
    auto late = runner_.observe_metrics(sweep_id, m.trial_id, m.records);
    if (!late.ok()) return late.status();
  }
  return Status::Ok();
}

// Early termination (issue 16): the batch's values of the sweep's metric are
// judged by its rule (SweepRunner, early_stop.h); a trial judged to stop, or
// one whose decision a previous scheduler recorded before it could stop it,
// is sent STOP_TRIAL once. Its TRIAL_EXITED (cause stopped) then ends it as
// early_stopped (finish_live).
Status Broker::judge_early_stop(Session& s, LiveTrial& lt, const Metrics& m) {
  // Every stored value joins the curve (a restarted scheduler rebuilds it
  // from the store, stopped trials' late values included).
  auto verdict = runner_.observe_metrics(lt.sweep_id, m.trial_id, m.records);
  if (!verdict.ok()) return verdict.status();
  if (lt.early_stop || lt.cancelled) return Status::Ok();
  if (!*verdict && !runner_.stop_decided(lt.sweep_id, m.trial_id)) return Status::Ok();
  lt.early_stop = true;
  lt.early_stop_reason = "early-stopped: " + (*verdict ? (*verdict)->decision.reason : "decided before a scheduler restart");
  send_later(s.routing_id, StopTrial{m.trial_id, lt.attempt, lt.early_stop_reason});
  return Status::Ok();
}

Status Broker::handle_client(const std::string& routing_id, const Message& m) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  // Store (Writer) failures answer the client and end the turn (the caller rolls back).
  auto reply_error = [&](const std::string& rid, const Status& s) {
    std::string code = s.code() == StatusCode::kNotFound            ? "not_found"
                       : s.code() == StatusCode::kInvalidArgument   ? "bad_request"
                       : s.code() == StatusCode::kFailedPrecondition ? "bad_request"
                                                                      : "internal";
    send_later(routing_id, Error{rid, code, s.message()});
  };
  // A request that cannot be served: a store failure (I/O) is returned and
  // ends the turn; anything else is answered with ERROR and the turn goes on.
  auto refuse = [&](const std::string& rid, const Status& s) -> Status {
    if (s.code() == StatusCode::kIoError) return s;
    reply_error(rid, s);
    return Status::Ok();
  };

  if (auto* sub = std::get_if<Submit>(&m)) {
    auto r = runner_.submit(sub->spec);
    if (!r.ok()) {
      return refuse(sub->request_id,
                    r.status().WithContext(sub->source.empty() ? std::string("sweep file") : sub->source));
    }
    send_later(routing_id, Submitted{sub->request_id, r->sweep_id, r->total_trials});
    log::info("sweep " + to_s(r->sweep_id) + " submitted (" +
              (r->total_trials ? to_s(*r->total_trials) + " trials" : std::string("unbounded")) + ")");
    dirty_ = true;
    return Status::Ok();
  }
  if (auto* c = std::get_if<Cancel>(&m)) {
    if (c->sweep_id) {
      auto sums = store::sweep_summaries(store_.connection(), *c->sweep_id);
      if (!sums.ok()) return refuse(c->request_id, sums.status());
      if (sums->front().state != SweepState::kRunning) {
        send_later(routing_id, Done{c->request_id, "sweep " + to_s(*c->sweep_id) + " is already " +
                                                       std::string(name(sums->front().state)), 0});
        return Status::Ok();
      }
      int64_t n = 0;
      SWEPT_RETURN_IF_ERROR(cancel_sweep(*c->sweep_id, "cancelled by the user", &n));
      send_later(routing_id, Done{c->request_id, "cancelled sweep " + to_s(*c->sweep_id) + ": " + to_s(n) + " trials stopped", n});
      return Status::Ok();
    }
    Status s = cancel_trial(*c->trial_id, "cancelled by the user");
    if (!s.ok()) return refuse(c->request_id, s);
    dirty_ = true;
    send_later(routing_id, Done{c->request_id, "trial " + to_s(*c->trial_id) + " stopped", 1});
    return Status::Ok();
  }
  if (auto* r = std::get_if<Retry>(&m)) {
    auto sums = store::sweep_summaries(store_.connection(), r->sweep_id);
    if (!sums.ok()) return refuse(r->request_id, sums.status());
    auto n = runner_.retry_failed(r->sweep_id, r->early_stopped);
    if (!n.ok()) return refuse(r->request_id, n.status());
    dirty_ = true;
    send_later(routing_id, Done{r->request_id, "requeued " + to_s(*n) + (r->early_stopped ? " failed, lost or early-stopped" : " failed or lost") +
                                                   " trials of sweep " + to_s(r->sweep_id), *n});
    return Status::Ok();
  }
  if (auto* q = std::get_if<QuerySweeps>(&m)) {
    auto sums = store::sweep_summaries(store_.connection(), q->sweep_id);
    if (!sums.ok()) return refuse(q->request_id, sums.status());
    send_later(routing_id, Sweeps{q->request_id, std::move(*sums)});
    return Status::Ok();
  }
  if (auto* q = std::get_if<QueryTrials>(&m)) {
    auto sums = store::sweep_summaries(store_.connection(), q->sweep_id);
    if (!sums.ok()) return refuse(q->request_id, sums.status());
    // One page (docs/protocol.md, QUERY_TRIALS): a reply stays small
    // whatever the sweep's size.
    auto rows = store::trial_rows(store_.connection(), q->sweep_id, q->after_index, q->limit);
    if (!rows.ok()) return rows.status();
    std::optional<int64_t> next;
    if (static_cast<int64_t>(rows->size()) == q->limit) next = rows->back().index;
    send_later(routing_id, Trials{q->request_id, std::move(*rows), next});
    return Status::Ok();
  }
  if (auto* q = std::get_if<QueryAgents>(&m)) {
    // The live view: alive agents and those seen within the display window.
    std::optional<double> seen_since;
    if (!q->all) seen_since = clock_.wall_seconds() - options_.agent_display_s;
    auto rows = store::agent_rows(store_.connection(), seen_since);
    if (!rows.ok()) return rows.status();
    send_later(routing_id, Agents{q->request_id, std::move(*rows)});
    return Status::Ok();
  }
  if (auto* r = std::get_if<ReleaseAgent>(&m)) return on_release(routing_id, *r);
  return Status::Ok();
}

// ---- timers, dispatch, heartbeats ----

Status Broker::check_timers() {
  const int64_t now = clock_.now_ms();
  const int64_t liveness_ms = int64_t{options_.heartbeat_ms} * options_.liveness;
  std::vector<std::string> silent;
  for (const auto& [rid, s] : sessions_)
    if (now - s.last_heard_ms > liveness_ms) silent.push_back(rid);
  for (const auto& rid : silent) {
    log::warn("agent " + sessions_[rid].name + " missed " + std::to_string(options_.liveness) +
              " heartbeats: declared lost; its trials are requeued when its lease is over");
    SWEPT_RETURN_IF_ERROR(on_agent_gone(rid, "no message for " + std::to_string(liveness_ms) + " ms", AgentState::kLost));
  }
  std::vector<int64_t> orphans, unconfirmed, leased;
  for (const auto& [id, lt] : live_) {
    if (lt.await_deadline_ms <= 0 || now <= lt.await_deadline_ms) continue;
    if (lt.lease_wait && !routing_by_name_.count(lt.agent))
      leased.push_back(id);
    else if (!routing_by_name_.count(lt.agent))
      orphans.push_back(id);
    else if (!lt.started)
      unconfirmed.push_back(id);
  }
  for (int64_t id : orphans)
    SWEPT_RETURN_IF_ERROR(lose_live(id, "agent " + live_[id].agent + " did not come back after the scheduler restarted"));
  for (int64_t id : unconfirmed)
    SWEPT_RETURN_IF_ERROR(lose_live(id, "agent " + live_[id].agent + " never confirmed it"));
  for (int64_t id : leased)
    SWEPT_RETURN_IF_ERROR(lose_live(id, "agent " + live_[id].agent + " lost and its lease (" +
                                               std::to_string(lease_ms()) + " ms) is over: it has stopped the trial"));
  return forget_old_agents();
}

Status Broker::dispatch() {
  dirty_ = false;
  if (sessions_.empty() || !runner_.has_work()) return Status::Ok();
  std::vector<AgentCapacity> caps;
  std::map<std::string, size_t> index;
  for (const auto& [name, rid] : routing_by_name_) {
    auto found = sessions_.find(rid);
    if (found == sessions_.end()) continue;  // cannot happen: the two maps change together
    const Session& s = found->second;
    if (quarantined_.count(name)) continue;  // host faults: no new work
    if (s.draining) continue;  // leaving: what it frees goes to the others
    AgentCapacity c;
    c.name = name;
    c.total_slots = c.free_slots = s.slots;
    for (const auto& g : s.gpus) c.gpus.push_back({g.index, false, 0.0});
    index[name] = caps.size();
    caps.push_back(std::move(c));
  }
  for (const auto& [id, lt] : live_) {
    if (lt.after) continue;  // its predecessor still holds the place
    auto it = index.find(lt.agent);
    if (it != index.end()) reserve(caps, Placement{it->second, lt.gpus, lt.gpu_fraction, lt.cpus});
  }
  std::vector<SweepQueue> queues = runner_.queues();
  {
    std::set<int64_t> unplaceable;
    for (const SweepQueue& q : queues)
      if (q.available > 0 && !could_ever_fit(caps, q.demand)) unplaceable.insert(q.sweep_id);
    MutexLock lock(unplaceable_mutex_);
    for (int64_t id : unplaceable)
      if (!unplaceable_.count(id))
        log::warn("sweep " + to_s(id) + " asks for more per trial (" + std::to_string(runner_.demand(id).gpus) +
                  " GPUs, share " + std::to_string(runner_.demand(id).gpu_fraction) + ", " +
                  std::to_string(runner_.demand(id).cpus) + " CPU slots) than any registered agent has: its trials wait");
    unplaceable_ = std::move(unplaceable);
  }
  std::vector<Dispatch> plan = plan_dispatch(caps, std::move(queues));
  for (const Dispatch& d : plan) {
    bool started = false;
    SWEPT_RETURN_IF_ERROR(start_next(d.sweep_id, caps[d.placement.agent].name, d.placement, nullptr, &started));
    if (!started) dirty_ = true;  // the plan counted trials that were not there; look again
  }
  return queue_successors();
}

Status Broker::start_next(int64_t sweep_id, const std::string& agent, const Placement& placement, LiveTrial* before,
                          bool* started) {
  *started = false;
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  auto next = runner_.take_next(sweep_id);
  if (!next.ok()) return next.status();
  if (!next->has_value()) return runner_.maybe_complete(sweep_id);
  TrialToStart& t = **next;
  int attempt = t.previous_attempts + 1;
  SWEPT_RETURN_IF_ERROR(store_.start_attempt(t.trial_id, attempt, agent, placement.gpus, placement.gpu_fraction,
                                             clock_.wall_seconds()));
  const sweeps::SweepSpec* spec = runner_.spec(t.sweep_id);
  LiveTrial lt;
  lt.trial_id = t.trial_id;
  lt.sweep_id = t.sweep_id;
  lt.attempt = attempt;
  lt.agent = agent;
  lt.gpus = placement.gpus;
  lt.gpu_fraction = placement.gpu_fraction;
  lt.cpus = placement.cpus;
  lt.max_retries = spec ? spec->max_retries : 0;

  StartTrial st;
  st.trial_id = t.trial_id;
  st.attempt = attempt;
  st.sweep_id = t.sweep_id;
  st.argv = std::move(t.argv);
  st.params = t.params;
  // env stays empty: the agent sets SWEPT_SWEEP_ID, SWEPT_TRIAL_ID,
  // SWEPT_ATTEMPT and SWEPT_PARAMS from the fields above.
  st.workdir = "sweep-" + to_s(t.sweep_id) + "/trial-" + to_s(t.trial_id);
  st.gpus = placement.gpus;
  st.gpu_fraction = placement.gpu_fraction;
  st.timeout_s = spec ? spec->timeout_s : 0;
  if (before) {
    lt.after = before->trial_id;
    before->successor = t.trial_id;
    st.after_trial_id = before->trial_id;
    st.after_attempt = before->attempt;
    stat_successors_++;
  }
  live_[t.trial_id] = std::move(lt);  // (references into live_ stay valid)
  send_later(routing_by_name_[agent], std::move(st));
  stat_dispatched_++;
  *started = true;
  return Status::Ok();
}

Status Broker::queue_successors() {
  if (!options_.commit.successors) return Status::Ok();
  // Only while one sweep alone has trials waiting (a successor keeps its
  // predecessor's place for the same sweep, so with several sweeps waiting
  // the places go through placement and its fair order instead)...
  int64_t sweep_id = 0;
  int64_t available = 0;
  std::set<int64_t> unplaceable;
  {
    MutexLock lock(unplaceable_mutex_);
    unplaceable = unplaceable_;
  }
  for (const SweepQueue& q : runner_.queues()) {
    if (q.available <= 0 || unplaceable.count(q.sweep_id)) continue;
    if (sweep_id) return Status::Ok();
    sweep_id = q.sweep_id;
    available = q.available;
  }
  // ...and only for short trials, where the round trip to the scheduler is
  // a visible part of each trial's time. A long trial's successor would
  // only wait there, holding a trial another agent could start.
  auto mean = mean_run_seconds_.find(sweep_id);
  if (!sweep_id || mean == mean_run_seconds_.end() || mean->second > kSuccessorBelowSeconds) return Status::Ok();
  std::vector<int64_t> ids;
  for (const auto& [id, lt] : live_) {
    if (lt.sweep_id != sweep_id || lt.after || lt.successor || lt.cancelled || lt.await_deadline_ms > 0) continue;
    auto rid = routing_by_name_.find(lt.agent);
    auto session = rid == routing_by_name_.end() ? sessions_.end() : sessions_.find(rid->second);
    if (session == sessions_.end() || !session->second.start_after || quarantined_.count(lt.agent) ||
        session->second.draining)
      continue;
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  for (int64_t id : ids) {
    if (available-- <= 0) break;
    LiveTrial& before = live_[id];
    Placement place{0, before.gpus, before.gpu_fraction, before.cpus};
    bool started = false;
    SWEPT_RETURN_IF_ERROR(start_next(sweep_id, before.agent, place, &before, &started));
    if (!started) break;
  }
  return Status::Ok();
}

void Broker::send_heartbeats() {
  const int64_t now = clock_.now_ms();
  refused_log_.flush(now);
  if (now - last_heartbeat_round_ms_ < options_.heartbeat_ms) return;
  last_heartbeat_round_ms_ = now;
  std::map<std::string, std::vector<MetricsAck>> acks;
  for (auto& [id, lt] : live_) {
    if (lt.stored_seq > lt.acked_seq) {
      acks[lt.agent].push_back({id, lt.attempt, lt.stored_seq});
      lt.acked_seq = lt.stored_seq;
    }
  }
  for (const auto& [rid, s] : sessions_) {
    Heartbeat hb;
    hb.acked = std::move(acks[s.name]);
    send_later(rid, std::move(hb));
  }
}

}  // namespace swept::scheduler
