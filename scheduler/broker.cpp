// Broker: see broker.h and docs/protocol.md. The file reads top to bottom as
// the loop does: receive and decode, handle agents, handle clients, timers,
// dispatch, commit, send. What happens to a trial out on an agent is the
// lifecycle's (lifecycle.h), the agents are the registry's
// (agent_registry.h); the broker hands them what agents and clients say and
// sends what they decide. Its side of registration is in broker_agents.cpp.
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
// How long a transaction may stay open to gather more changes when all it
// would send is deferrable (Broker::turn).
constexpr int64_t kGatherWindowUs = 2000;

std::string to_s(int64_t v) { return std::to_string(v); }

// What one trial of a sweep asks for, for messages: "1 GPU per node on 2
// agents that run gangs", "share 0.4 of a GPU", "2 CPU slots".
std::string demand_text(const Demand& d) {
  std::string s = d.gpus > 0            ? std::to_string(d.gpus) + " GPUs"
                  : d.gpu_fraction > 0 ? "a share " + std::to_string(d.gpu_fraction).substr(0, 4) + " of a GPU"
                                       : std::to_string(d.cpus) + " CPU slots";
  if (d.nodes > 1) s += " on each of " + std::to_string(d.nodes) + " agents that run gangs";
  else if (d.gang()) s += " on an agent that runs gangs";
  if (d.ps > 0)
    s += ", " + std::to_string(d.ps) + " parameter servers" + (d.ps_nodes ? " on agents of their own" : "");
  if (d.segments) s += " (pbt: on an agent that lists the feature checkpoint_segments)";
  return s;
}

}  // namespace

Broker::Broker(store::Writer& store, const Clock& clock, BrokerOptions options)
    : store_(store), clock_(clock), options_(std::move(options)),
      agents_(store, clock,
              AgentRegistryOptions{options_.heartbeat_ms, options_.liveness, options_.quarantine_after,
                                   options_.forget_agents_after_s, options_.keys,
                                   double(options_.unkeyed_register_rate), 2 * options_.unkeyed_register_rate}),
      runner_(store, clock),
      lifecycle_(store, clock), context_(1),
      socket_(context_, zmq::socket_type::router) {
  // A gang node's failure waits until a dead peer host's agent would have
  // been found lost (the liveness period), and two heartbeats more.
  lifecycle_.set_gang_hold_ms(int64_t(options_.heartbeat_ms) * (options_.liveness + 2));
}

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
    SWEPT_RETURN_IF_ERROR(curvezmq::apply_server(socket_.handle(), *options_.server_key, "swept"));
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
  s.trials_dispatched = lifecycle_.dispatched();
  s.trials_finished = lifecycle_.finished();
  s.successors = lifecycle_.successors();
  s.metric_rows = stat_rows_.load();
  s.registers = stat_registers_.load();
  s.host_fault_requeues = stat_host_requeues_.load();
  s.loop_cpu_seconds = stat_cpu_.load();
  s.ingest_seconds = stat_ingest_.load();
  s.turns = stat_turns_.load();
  s.stalls = stat_stalls_.load();
  s.stalled_ms = stat_stalled_ms_.load();
  return s;
}

std::vector<int64_t> Broker::unplaceable_sweeps() const {
  MutexLock lock(unplaceable_mutex_);
  return std::vector<int64_t>(unplaceable_.begin(), unplaceable_.end());
}

std::string Broker::all_quarantined() const {
  MutexLock lock(unplaceable_mutex_);
  return all_quarantined_;
}

Status Broker::ensure_tx() {
  if (store_.in_transaction()) return Status::Ok();
  return store_.begin();
}

void Broker::send_later(const std::string& routing_id, Message m, std::string_view protocol_id) {
  outgoing_.push_back({routing_id, std::move(m), protocol_id});
}

void Broker::post_mail() {
  for (AgentMail& m : lifecycle_.take_mail())
    if (const AgentSession* s = agents_.by_name(m.agent)) send_later(s->routing_id, std::move(m.message));
}

void Broker::flush() {
  int64_t now = clock_.now_ms();
  for (auto& o : outgoing_) {
    Status s = zmqio::send(socket_, o.routing_id, encode(o.message, o.protocol_id));
    if (!s.ok()) log::debug("dropped " + std::string(kind_name(o.message)) + ": " + s.message());
    agents_.sent(o.routing_id, now);
  }
  outgoing_.clear();
}

// ---- recovery ----

Status Broker::recover() {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  // Nobody is connected yet: agents must register again.
  SWEPT_RETURN_IF_ERROR(store_.mark_all_agents(AgentState::kAlive, AgentState::kLost));
  SWEPT_RETURN_IF_ERROR(agents_.recover());
  auto running = scheduler::recover(lifecycle_, runner_, options_.recovery_grace_ms);
  if (!running.ok()) return running.status();
  // Issue 26: a gang retry's "not before" hold was the old scheduler's
  // memory; held again until any rank of its last attempt is surely dead.
  SWEPT_ASSIGN_OR_RETURN(held_gangs, lifecycle_.hold_recovered_gangs(clock_.now_ms() + lease_ms() + lease_margin_ms()));
  (void)held_gangs;  // logged by the lifecycle
  SWEPT_RETURN_IF_ERROR(pass_events(lifecycle_, runner_));
  live_count_ = lifecycle_.size();
  SWEPT_ASSIGN_OR_RETURN(stopping, store_.end_stopping_trials(clock_.wall_seconds()));
  if (stopping > 0)
    log::info(std::to_string(stopping) + " trials stopped before the restart had not ended: recorded as ended now");
  if (*running > 0)
    log::info("recovered " + std::to_string(*running) + " running trials; waiting for their agents to re-register");
  SWEPT_RETURN_IF_ERROR(store_.commit());
  dirty_ = true;
  return Status::Ok();
}

Result<SubmitResult> Broker::submit(const std::string& spec_text, const WarmInput& warm) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  auto r = runner_.submit(spec_text, warm);
  if (!r.ok()) {
    store_.rollback();
    return r.status();
  }
  SWEPT_RETURN_IF_ERROR(pass_events(lifecycle_, runner_));
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
  if (s.ok() && (lifecycle_.has_pending_starts() || store_.in_transaction())) {
    s = lifecycle_.write_starts(/*all=*/true);
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
  if (auto due = lifecycle_.next_start_due_ms())  // wake when the oldest unwritten start is due
    wait = static_cast<int>(std::clamp<int64_t>(*due - clock_.now_ms(), 0, wait));
  if (auto due = lifecycle_.next_release_ms())  // and when a held gang retry may start (issue 26)
    wait = static_cast<int>(std::clamp<int64_t>(*due - clock_.now_ms(), 0, wait));
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
  int received = 0;
  for (int i = 0; i < kMaxMessagesPerTurn; ++i) {
    if ((i & 63) == 63 && clock_.now_us() > budget_end_us) break;
    auto got = zmqio::receive(socket_, /*with_routing_id=*/true, /*dontwait=*/true);
    if (!got.ok()) {
      log::warn(got.status().message());
      break;
    }
    if (!got->has_value()) break;
    stat_in_++;
    received++;
    failure = handle((*got)->routing_id, (*got)->frames, (*got)->user_id);
    // What the lifecycle decided reaches the runner before anything reads it.
    if (failure.ok()) failure = pass_events(lifecycle_, runner_);
    post_mail();
    if (!failure.ok()) break;
  }
  if (failure.ok() && cancel_all_requested_.exchange(false)) failure = cancel_all();
  if (failure.ok()) failure = check_timers();
  if (failure.ok()) failure = pass_events(lifecycle_, runner_);
  if (lifecycle_.take_changed()) dirty_ = true;
  if (agents_.take_changed()) dirty_ = true;
  if (failure.ok() && dirty_) failure = dispatch();
  post_mail();
  // Those waiting ride on this turn's commit when there is one.
  if (failure.ok() && lifecycle_.has_pending_starts())
    failure = lifecycle_.write_starts(/*all=*/store_.in_transaction() || !options_.commit.defer_start_writes);
  // All there is to send waits on nothing (exit acknowledgements, and
  // successors whose predecessor still runs): the transaction stays open a
  // little, so that one commit and one wake-up of the agent serve several
  // trials. Anything else commits and goes out now. The window closes when
  // its time is over, or at the first turn that brings nothing more (its
  // wait already ran to the window's end): a clock that does not move, as a
  // FakeClock in a test, cannot hold it open.
  if (failure.ok() && options_.commit.gather_window && store_.in_transaction() && deferrable_outgoing()) {
    const int64_t now_us = clock_.now_us();
    const bool opens = !gathering_;
    if (opens) {
      gathering_ = true;
      gather_until_us_ = now_us + kGatherWindowUs;
    }
    if (now_us < gather_until_us_ && (opens || received > 0)) {
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
  const bool drained = lifecycle_.size() == 0 && live_count_.load() != 0;
  live_count_ = lifecycle_.size();
  if (drained || runner_.ended_count() != sweeps_ended_seen_) {
    sweeps_ended_seen_ = runner_.ended_count();
    {
      MutexLock lock(change_mutex_);
      ++changes_;
    }
    change_cv_.notify_all();
  }
  stat_turns_++;
  return Status::Ok();
}

Status Broker::cancel_all() {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_ASSIGN_OR_RETURN(sweeps, store_.sweeps_in_state(SweepState::kRunning));
  for (const auto& s : sweeps)
    SWEPT_RETURN_IF_ERROR(scheduler::cancel_sweep(lifecycle_, runner_, s.id, "stopped by the user (interrupt)").status());
  return Status::Ok();
}

bool Broker::deferrable_outgoing() const {
  for (const Outgoing& o : outgoing_) {
    if (std::holds_alternative<ExitAck>(o.message)) continue;
    const auto* st = std::get_if<StartTrial>(&o.message);
    if (!st || !lifecycle_.successor_waits(*st)) return false;  // its place is free now, or not a successor
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
  AgentSession* session = agents_.by_routing(routing_id);
  if (!d.ok()) {
    stat_dropped_++;
    switch (d.failure) {
      case DecodeFailure::kNotSwept:
        log::debug("dropped a message that is not swept's from " + routing_id + ": " + d.error);
        return Status::Ok();
      case DecodeFailure::kVersion: {
        // A peer of the version before gets the refusal in its own framing
        // (those bodies did not change), so that it can say why it stops;
        // any other version gets ours.
        const std::string_view id = frames[0] == kPreviousProtocolId ? kPreviousProtocolId : kProtocolId;
        if (d.kind == "REGISTER")
          send_later(routing_id, RegisterReject{"version", d.error, 0}, id);
        else
          send_later(routing_id, Error{d.request_id, "version", d.error}, id);
        break;
      }
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
    session = agents_.by_routing(routing_id);  // dropped when its key was revoked
  }
  if (session) {
    agents_.heard(*session);  // any valid message is a heartbeat
    // After its REGISTER, an unkeyed agent's row is written at its next message.
    if (!std::holds_alternative<Register>(m) && !std::holds_alternative<Disconnect>(m)) {
      const bool work = std::holds_alternative<TrialStarted>(m) || std::holds_alternative<Metrics>(m) ||
                        std::holds_alternative<TrialExited>(m);
      SWEPT_RETURN_IF_ERROR(agents_.confirmed(*session, work));
    }
  }
  if (auto* r = std::get_if<Register>(&m)) {
    stat_registers_++;
    return on_register(routing_id, *r);
  }
  if (std::holds_alternative<Heartbeat>(m) || std::holds_alternative<TrialStarted>(m) ||
      std::holds_alternative<Metrics>(m) || std::holds_alternative<TrialExited>(m) ||
      std::holds_alternative<Disconnect>(m) || std::holds_alternative<CheckpointPull>(m) ||
      std::holds_alternative<CheckpointPart>(m)) {
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

// ---- agents (registration and authorization: broker_agents.cpp) ----

Status Broker::handle_agent(AgentSession& s, const Message& m) {
  if (auto* hb = std::get_if<Heartbeat>(&m)) {
    for (const WorkersEnded& w : hb->workers_ended) lifecycle_.workers_ended(s.name, w);  // issue 30
    agents_.note_draining(s, hb->draining);
    return agents_.note_health(s, hb->healthy, hb->health);
  }
  if (auto* st = std::get_if<TrialStarted>(&m)) {
    if (!lifecycle_.started(s.name, *st)) {
      log::info("agent " + s.name + " started trial " + to_s(st->trial_id) + " attempt " +
                std::to_string(st->attempt) + ", which is not current: stopping it");
      send_later(s.routing_id, StopTrial{st->trial_id, st->attempt, "stale attempt"});
    }
    return Status::Ok();
  }
  if (auto* mt = std::get_if<Metrics>(&m)) {
    auto stored = lifecycle_.metrics(s.name, *mt);
    if (!stored.ok()) return stored.status();
    SWEPT_RETURN_IF_ERROR(judge_metrics(lifecycle_, runner_, *stored, *mt));
    stat_ingest_ = stat_ingest_.load() + static_cast<double>(stored->ingest_us) / 1e6;
    stat_rows_ += stored->rows;
    return Status::Ok();
  }
  if (auto* ex = std::get_if<TrialExited>(&m)) return on_trial_exited(s, *ex);
  if (auto* pull = std::get_if<CheckpointPull>(&m)) return on_checkpoint_pull(s, *pull);
  if (auto* part = std::get_if<CheckpointPart>(&m)) return on_checkpoint_part(s, *part);
  if (auto* dc = std::get_if<Disconnect>(&m)) {
    log::info("agent " + s.name + " disconnected: " + dc->reason);
    return on_agent_gone(s.routing_id, "it disconnected (" + dc->reason + ")", AgentState::kGone);
  }
  return Status::Ok();
}

Status Broker::on_trial_exited(AgentSession& s, const TrialExited& e) {
  auto outcome = lifecycle_.exited(s.name, e);
  if (!outcome.ok()) return outcome.status();
  SWEPT_RETURN_IF_ERROR(note_exit(s, e, *outcome));
  // A gang's node whose attempt goes on: acknowledged when the attempt ends.
  if (!lifecycle_.hold_exit_ack(s.name, e)) send_later(s.routing_id, ExitAck{e.trial_id, e.attempt});
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
    auto r = runner_.submit(sub->spec, WarmInput{sub->warm_sweep, sub->warm_trials});
    if (!r.ok()) {
      return refuse(sub->request_id,
                    r.status().WithContext(sub->source.empty() ? std::string("sweep file") : sub->source));
    }
    send_later(routing_id, Submitted{sub->request_id, r->sweep_id, r->total_trials, r->warm_start});
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
      SWEPT_ASSIGN_OR_RETURN(n, scheduler::cancel_sweep(lifecycle_, runner_, *c->sweep_id, "cancelled by the user"));
      send_later(routing_id, Done{c->request_id, "cancelled sweep " + to_s(*c->sweep_id) + ": " + to_s(n) + " trials stopped", n});
      return Status::Ok();
    }
    Status s = lifecycle_.cancel_trial(*c->trial_id, "cancelled by the user");
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
    auto rows = store::list_agents(store_.connection(), seen_since);
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
  // A turn never waits longer than a heartbeat for input (turn()), so a
  // longer gap since the previous check is the loop's own absence.
  if (last_timers_ms_ && now - *last_timers_ms_ > options_.heartbeat_ms)
    excuse_stall(now, now - *last_timers_ms_ - options_.heartbeat_ms);
  last_timers_ms_ = now;
  for (const auto& rid : agents_.silent()) {
    log::warn("agent " + agents_.by_routing(rid)->name + " missed " + std::to_string(options_.liveness) +
              " heartbeats: declared lost; its trials are requeued when its lease is over");
    SWEPT_RETURN_IF_ERROR(on_agent_gone(rid, "no message for " + std::to_string(liveness_ms) + " ms", AgentState::kLost));
  }
  SWEPT_RETURN_IF_ERROR(lifecycle_.check_deadlines(
      [&](const std::string& agent) { return agents_.connected(agent); }, lease_ms()));
  return agents_.forget_old_agents();
}

void Broker::excuse_stall(int64_t now_ms, int64_t stall_ms) {
  // What an agent sent while this loop was away may be waiting unread (in
  // ZeroMQ's queues or the kernel's, or not even received: the I/O thread
  // may have starved too), so its silence is counted from its last message
  // plus the stall, never past now (one read this turn stays heard now).
  // An agent that is really gone is still declared lost, a liveness after
  // the loop came back. Deadlines move the same way: a lost agent's lease
  // (later is safe: it has stopped its trials by then), an unconfirmed
  // start, a restart's grace.
  agents_.excuse_stall(now_ms, stall_ms);
  lifecycle_.postpone_deadlines(stall_ms);
  stat_stalls_++;
  stat_stalled_ms_ += stall_ms;
  // A loop a little late under load is common; one away for a heartbeat or
  // more is worth saying, with what it was not blamed on.
  if (stall_ms >= options_.heartbeat_ms)
    log::warn("the scheduler's loop came back " + std::to_string(stall_ms) + " ms late (starved of CPU, stopped, "
              "or a slow disk): agents' silence and trial deadlines are counted without that time");
}

Status Broker::dispatch() {
  dirty_ = false;
  if (agents_.empty() || !runner_.has_work()) return Status::Ok();
  // What every registered agent offers when idle (could_ever_fit), and what
  // those that take work have free now.
  std::vector<AgentCapacity> all, caps;
  std::map<std::string, size_t> index;
  std::vector<std::string> held;  // quarantined or draining: no new work
  for (const AgentSession* agent : agents_.by_name_order()) {
    const AgentSession& s = *agent;
    const std::string& name = s.name;
    AgentCapacity c;
    c.name = name;
    c.total_slots = c.free_slots = s.slots;
    c.gangs = s.gangs;
    c.segments = s.segments;
    for (const auto& g : s.gpus) c.gpus.push_back({g.index, false, 0.0});
    all.push_back(c);
    if (agents_.held(s)) {  // host faults, or leaving: what it frees goes to the others
      // One not yet confirmed (an unkeyed agent before its first message
      // after REGISTER) is about to take work: nothing to warn about.
      if (s.recorded) held.push_back(name);
      continue;
    }
    index[name] = caps.size();
    caps.push_back(std::move(c));
  }
  for (const auto& [id, lt] : lifecycle_.live()) {
    if (lt.after) continue;  // its predecessor still holds the place
    auto it = index.find(lt.agent);
    if (it != index.end()) reserve(caps, Placement{it->second, lt.gpus, lt.gpu_fraction, lt.cpus});
    for (const GangNode& n : lt.more_nodes)
      if (auto m = index.find(n.agent); m != index.end() && !n.ended)
        reserve(caps, Placement{m->second, n.gpus, n.gpu_fraction, n.cpus});
  }
  std::vector<SweepQueue> queues = runner_.queues();
  const int64_t now_ms = clock_.now_ms();
  for (SweepQueue& q : queues)
    if (auto w = gang_waiting_since_ms_.find(q.sweep_id); w != gang_waiting_since_ms_.end())
      q.waiting_ms = now_ms - w->second;
  std::set<int64_t> unplaceable;
  bool waiting = false;  // a trial waits that some agent could run
  for (const SweepQueue& q : queues) {
    if (q.available <= 0) continue;
    if (!could_ever_fit(all, q.demand))
      unplaceable.insert(q.sweep_id);
    else
      waiting = true;
  }
  {
    MutexLock lock(unplaceable_mutex_);
    for (int64_t id : unplaceable)
      if (!unplaceable_.count(id))
        log::warn("sweep " + to_s(id) + " asks for more per trial (" + demand_text(runner_.demand(id)) +
                  ") than the registered agents have: its trials wait");
    unplaceable_ = unplaceable;
  }
  warn_all_held(caps.empty() && waiting ? held : std::vector<std::string>{});
  const Plan plan = plan_dispatch(caps, queues, options_.gang_reserve_after_ms);
  note_gang_waits(queues, plan);
  for (const Dispatch& d : plan.starts) {
    bool started = false;
    const Demand demand = runner_.demand(d.sweep_id);
    std::optional<GangDispatch> gang;
    if (demand.gang()) gang = gang_of(d, caps, demand);
    SWEPT_RETURN_IF_ERROR(start_next_trial(lifecycle_, runner_, d.sweep_id, caps[d.placement.agent].name,
                                           d.placement, 0, &started, gang ? &*gang : nullptr));
    if (!started) dirty_ = true;  // the plan counted trials that were not there; look again
  }
  if (!options_.commit.successors) return Status::Ok();
  std::set<std::string> takers;  // agents that hold a successor for a trial of theirs
  for (const auto& [name, i] : index)
    if (const AgentSession* s = agents_.by_name(name); s && s->start_after) takers.insert(name);
  return queue_successors(lifecycle_, runner_, takers, unplaceable);
}

void Broker::send_heartbeats() {
  const int64_t now = clock_.now_ms();
  refused_log_.flush(now);
  if (now - last_heartbeat_round_ms_ < options_.heartbeat_ms) return;
  last_heartbeat_round_ms_ = now;
  std::map<std::string, std::vector<MetricsAck>> acks = lifecycle_.take_metric_acks();
  for (const AgentSession* s : agents_.by_name_order()) {
    Heartbeat hb;
    hb.acked = std::move(acks[s->name]);
    send_later(s->routing_id, std::move(hb));
  }
}

}  // namespace swept::scheduler
