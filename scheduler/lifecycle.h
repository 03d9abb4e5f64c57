// TrialLifecycle: the trials out on agents, from the START_TRIAL that sends
// one to the state it ends in. Socket-free: the broker decodes what agents
// and clients say and calls in here; what must go out (START_TRIAL,
// STOP_TRIAL) comes back in an outbox addressed by agent name, and the
// broker sends it after its commit. Time comes from the injected Clock only,
// so every deadline here (recovery, lease, an unconfirmed start) is tested
// by advancing a FakeClock.
//
// It decides and records, and calls nothing of the sweep runner's: what it
// decided about a trial (ended, requeued, adopted) goes to a second outbox
// as a LifecycleEvent (trial_events.h), which the broker passes to the
// runner once (flow.h). What it knows of sweeps (their terms: retries, CPU
// slots, metric) it is told by the broker as SweepNotices, and the trials it
// starts are handed to it ready-made (TrialToStart).
//
// A live trial is one attempt of a trial on one agent: dispatched (running
// in the store from then on) or adopted back when its agent reported it. It
// leaves in exactly one of these ways, each a TrialEvent that
// next_trial_state (common/states.h, the one transition table) turns into
// the trial's next state:
//  - finish: its process ended (completed, failed, stopped; early_stopped
//    when its sweep's early_terminate rule had stopped it);
//  - lose: its agent went away, or came back without it, or the scheduler
//    restarted and its agent did not return in time. A retry left requeues
//    it; none leaves it `lost` (its host failed, not the trial);
//  - requeue: the attempt ended for a reason that is not the trial's (its
//    host could not start it, its agent drains or shut down): queued again
//    without spending a retry;
//  - cancel: the user stopped it (stopped at once in the store; the agent is
//    sent STOP_TRIAL and the attempt ends when it reports the exit).
// A trial its sweep's rule stopped is never rerun: whatever ends it, it ends
// early_stopped. A stop decided here (cancel, early stop) is sent again when
// the trial's agent re-registers still running it, so a reconnect in
// between never leaves a stopped trial running.
//
// Bookkeeping carried with each live trial: the TRIAL_STARTED record not yet
// written (deferred, see write_starts), the highest METRICS batch stored and
// acknowledged, the deadline it waits on, and its successor links: a
// successor is a trial sent ahead to wait at the agent for a running one's
// place (START_TRIAL `after`); it holds no resources until that one ends.
//
// Errors: Status from the store (the broker rolls its turn back and stops).
// Every write opens the store's transaction when none is open; committing is
// the broker's. Thread safety: one thread (the broker's loop), except the
// counters (finished(), dispatched(), successors()), readable from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/protocol.h"
#include "common/states.h"
#include "common/status.h"
#include "scheduler/placement.h"
#include "scheduler/trial_events.h"
#include "store/writer.h"

namespace swept::scheduler {

// A node past node 0 of a multi-node trial (issue 25): where it runs, and
// whether its agent has reported its end.
struct GangNode {
  std::string agent;
  std::vector<int> gpus;
  double gpu_fraction = 0;
  int cpus = 0;
  bool started = false;  // its TRIAL_STARTED came
  bool ended = false;    // its TRIAL_EXITED came
  bool ack_owed = false;  // that exit's EXIT_ACK waits for the attempt's end (hold_exit_ack)
};

// How a multi-node trial is sent (dispatch): its nodes past node 0 and the
// rendezvous every process gets.
struct GangDispatch {
  std::vector<std::pair<std::string, Placement>> more_nodes;  // nodes 1 .. N-1: agent, placement
  int procs_per_node = 1;
  std::string master_addr;  // node 0's advertised address
  int master_port = 0;
  // Parameter servers and TF_CONFIG (issue 30; protocol::Gang): how many of
  // the nodes run workers (the rest are servers' own nodes; 0: all of
  // them), every node's address and every process's port.
  int worker_nodes = 0;
  std::vector<std::string> addrs = {};
  std::vector<int> worker_ports = {}, ps_node = {}, ps_ports = {};
};

// One trial out on an agent (dispatched or adopted, not yet ended).
struct LiveTrial {
  // Which attempt, and where it runs.
  int64_t trial_id = 0;
  int64_t sweep_id = 0;
  int attempt = 0;
  int max_retries = 0;
  std::string agent;
  std::vector<int> gpus;
  double gpu_fraction = 0;
  int cpus = 0;
  // What the scheduler knows of it.
  bool started = false;      // TRIAL_STARTED received (or adopted running)
  bool start_recorded = false;  // the trial's started_at is in the store (or goes in with its end)
  bool cancelled = false;    // the user stopped it: already `stopped` in the store
  bool early_stop = false;   // its sweep's early_terminate rule stopped it: STOP_TRIAL sent
  bool stop_on_record = false;  // a previous scheduler recorded that decision (see RecoveredTrial)
  std::string early_stop_reason;
  // A pbt member the runner stopped (STOP_TRIAL sent): at its interval (its
  // segment ends, requeued at no cost, for its population's round), or done
  // at pbt.max_steps (it ends completed). Issue 29.
  bool interval_stop = false;
  bool done_stop = false;
  // METRICS batches: the highest stored, and the highest acknowledged.
  int64_t stored_seq = 0;
  int64_t acked_seq = 0;
  // > 0: it waits for its agent until then (recovered after a restart, an
  // unconfirmed start, or its agent lost: see lease_wait).
  int64_t await_deadline_ms = 0;
  bool lease_wait = false;  // its agent was lost: lost at await_deadline_ms, its lease over
  // Its agent's lease and margin end (> 0 with lease_wait): said once in the log.
  int64_t lease_over_ms = 0;
  // TRIAL_STARTED's record, not written yet (see write_starts()).
  std::optional<std::string> start_env_json;
  double start_started_at = 0;
  int64_t start_received_ms = 0;
  // A successor: sent to start in the place of `after` once that trial ends
  // on the agent; until then it holds no resources of its own.
  int64_t after = 0;      // the live trial it waits for; 0 once that one ended
  int64_t successor = 0;  // the live trial waiting for this one's place
  // A multi-node trial: `agent`, `gpus` above are node 0's, where the
  // metrics come from; the other nodes are in more_nodes. The attempt ends
  // as one when every node has ended, or when one fails or its agent is
  // gone, or silent past its lease (silent_nodes; the others are then sent
  // STOP_TRIAL). Several processes on one
  // node are the agent's business: to the lifecycle that is one trial.
  bool gang() const { return !more_nodes.empty(); }
  bool stops_sent = false;  // every node that had not ended was sent STOP_TRIAL (mail_stop)
  std::vector<GangNode> more_nodes;
  int master_port = 0;  // node 0's rendezvous port (START_TRIAL `gang`), while the trial lives; 0: none
  // Every port its processes were given (TF_CONFIG's), by agent: none is
  // given to another trial on that agent while this one lives (issue 30).
  std::vector<std::pair<std::string, int>> ports = {};
  // Parameter servers (issue 30): the trial ends when its workers have
  // ended; then the nodes still running (servers) get STOP_TRIAL with
  // protocol::kWorkersEndedStop and end with exit 0.
  bool servers = false;
  int worker_nodes = 1;            // nodes 0 .. worker_nodes-1 run workers
  std::set<int> workers_ended = {};  // nodes whose agent said (HEARTBEAT) their workers exited 0
  bool servers_stop_sent = false;
  bool node0_ended = false;
  bool node0_ack_owed = false;  // as GangNode::ack_owed, for node 0
  std::optional<protocol::TrialExited> node0_exit;  // held until the other nodes end
  // A node failed while others had not reported: its verdict waits (see
  // TrialLifecycle::set_gang_hold_ms) in case it failed only because another
  // node's host died, which makes the attempt lost, not failed.
  struct HeldFailure {
    TrialState state = TrialState::kFailed;
    protocol::TrialExited exit;
    std::string reason;
    int64_t until_ms = 0;
  };
  std::optional<HeldFailure> held_failure;
  // Nodes whose agent went silent (issue 26), by agent: the attempt goes on
  // (its ranks there may well run on: a frozen agent, a short link blip)
  // until `lease_over_ms`, when they are surely dead; then it ends lost if
  // another node still runs (its collectives are broken), else it waits for
  // that node's report until `until_ms` (the report window). An agent back
  // meanwhile keeps its rank or reports its end (reconcile).
  struct SilentNode {
    int64_t lease_over_ms = 0;
    int64_t until_ms = 0;
  };
  std::map<std::string, SilentNode> silent_nodes = {};
  // Which node `agent` runs: 0 for node 0, k for more_nodes[k-1], -1 for none.
  int node_of(const std::string& name) const {
    if (name == agent) return 0;
    for (size_t k = 0; k < more_nodes.size(); ++k)
      if (more_nodes[k].agent == name) return static_cast<int>(k) + 1;
    return -1;
  }
  // Whether node `n`'s agent has reported its end.
  bool node_ended(int n) const { return n == 0 ? node0_ended : more_nodes[static_cast<size_t>(n) - 1].ended; }
};

// A message for the agent NAME (sent only while that agent is connected).
struct AgentMail {
  std::string agent;
  protocol::Message message;
};

class TrialLifecycle {
 public:
  // How long a TRIAL_STARTED record may wait for a commit that happens
  // anyway before it is written on its own (write_starts).
  static constexpr int64_t kStartWriteDelayMs = 50;
  // A sweep whose trials run shorter than this on average gets successors.
  static constexpr double kSuccessorBelowSeconds = 1.0;

  // What a TRIAL_EXITED meant for the agent that sent it.
  enum class ExitOutcome {
    kNotCurrent,    // not its current attempt (late, repeated or superseded): history only
    kRan,           // its process ran and ended: the agent's host works
    kLaunchFailed,  // it could not start, not for its host's sake
    kHostFault,     // it could not start for its host's sake: requeued at no cost
    // Reported in REGISTER.finished before all its METRICS batches are
    // stored (last_seq above the stored seq): still live; it ends when the
    // agent's re-sent TRIAL_EXITED follows the re-sent batches.
    kAwaitingMetrics,
  };
  // What a re-registering agent is told of the trials it reported.
  struct Reconciled {
    std::vector<protocol::MetricsAck> acked;     // REGISTER_ACK.acked
    std::vector<protocol::StopTrial> stops;      // sent after the ack
    std::vector<ExitOutcome> finished;           // one per REGISTER.finished, in order
  };
  // What the metric path did (metrics()): where the batch went, so that the
  // broker can have it judged by the sweep's early_terminate rule.
  struct MetricsOutcome {
    int64_t rows = 0;           // rows stored (0: a duplicate or a dropped batch)
    int64_t ingest_us = 0;      // time the store spent on it
    int64_t sweep_id = 0;       // the trial's sweep (0: dropped)
    bool current = false;       // the batch is of the trial's current, live attempt
  };
  // A place where a successor may wait (queue_successors).
  struct SuccessorPlace {
    int64_t before = 0;  // the live trial whose place it takes when that one ends
    std::string agent;
    Placement placement;
  };

  // `store` and `clock` must outlive the lifecycle.
  TrialLifecycle(store::Writer& store, const Clock& clock) : store_(store), clock_(clock) {}

  // ---- what there is ----
  const std::unordered_map<int64_t, LiveTrial>& live() const { return live_; }
  const LiveTrial* find(int64_t trial_id) const;
  size_t size() const { return live_.size(); }
  // What must be sent, in the order decided; empties the outbox.
  std::vector<AgentMail> take_mail() { return std::exchange(mail_, {}); }
  // What was decided about trials, for the sweep runner, in the order
  // decided; empties that outbox (flow.h passes them on).
  std::vector<LifecycleEvent> take_events() { return std::exchange(events_, {}); }
  // What the runner decided about a sweep (flow.h): a running sweep's terms
  // are kept; an ended sweep's are dropped (with what was learnt of it).
  void on_sweep(const SweepNotice& notice);
  // Whether the sweep is running, as the runner last said.
  bool sweep_running(int64_t sweep_id) const { return terms_.count(sweep_id) != 0; }
  // Whether a trial ended, was requeued or cancelled since the last call: a
  // place or a trial may have come free for dispatch.
  bool take_changed() { return std::exchange(changed_, false); }
  // How long a gang node's failure waits for the other nodes before it is
  // the attempt's verdict: a rank fails within milliseconds when another
  // host dies (its peers' sockets close), while that host's agent is found
  // lost only after the liveness period. The broker sets it a little above
  // that period; a lost node's agent within it makes the attempt lost.
  void set_gang_hold_ms(int64_t ms) { gang_hold_ms_ = ms; }
  // When the next held gang retry may be released by time (its silent
  // nodes' leases over); nullopt: none waits on a time. The broker wakes
  // for it, and check_deadlines releases it then (docs/protocol.md,
  // "Partitions").
  std::optional<int64_t> next_release_ms() const;
  int64_t finished() const { return finished_.load(); }
  int64_t dispatched() const { return dispatched_.load(); }
  int64_t successors() const { return successors_.load(); }

  // ---- after a restart ----
  // Takes the trials the store had as running (the runner's recover(), its
  // sweeps already notified) as live: each waits `grace_ms` for its agent to
  // re-register (reconcile) before it is lost. Returns how many.
  Result<size_t> recover(const std::vector<RecoveredTrial>& running, int64_t grace_ms);
  // After recover (issue 26): the "not before" hold of a gang's retry lived
  // in the previous scheduler's memory. Every queued multi-node trial of a
  // running sweep that has run before may still have ranks of its last
  // attempt alive (the store does not say whether every node reported its
  // end), so each is held until `until_ms` (the broker: now + lease +
  // margin, when any rank a silent agent still ran is dead), or sooner once
  // every node's agent has re-registered without that attempt (or reported
  // its end). Returns how many are held; their TrialHeld events are in the outbox.
  Result<size_t> hold_recovered_gangs(int64_t until_ms);

  // ---- dispatch ----
  // Sends `trial` (the runner's next, counted as running there) to `agent`
  // with `placement`; with `before` (a live trial id, not 0), as that
  // trial's successor. The attempt is recorded as running. With `gang`, a
  // START_TRIAL goes to each node (node 0 on `agent`); a gang sweep gets no
  // successors (queue_successors, flow.h), so `before` is then 0.
  Status dispatch(TrialToStart trial, const std::string& agent, const Placement& placement, int64_t before,
                  const GangDispatch* gang = nullptr);
  // Where successors of `sweep_id` may wait: at most `available` places, one
  // per running trial of the sweep on the agents in `agents` (those that
  // implement `after` and take work), and only when the sweep's trials are
  // short (kSuccessorBelowSeconds), where the round trip to the scheduler is
  // a visible part of each trial's time; in trial id order.
  std::vector<SuccessorPlace> successor_places(int64_t sweep_id, const std::set<std::string>& agents,
                                               int64_t available) const;
  // Whether `st` is a successor whose predecessor still holds its place (so
  // sending it may wait: the agent would only hold it).
  bool successor_waits(const protocol::StartTrial& st) const;

  // ---- what agents report ----
  // TRIAL_STARTED from `agent`. False: not its current attempt (the caller
  // tells the agent to stop it). The record is written later (write_starts).
  bool started(const std::string& agent, const protocol::TrialStarted& m);
  // Writes the TRIAL_STARTED records held: all, or those older than
  // kStartWriteDelayMs (a trial is on record as running since its dispatch;
  // its pid, environment and start time may ride on the next commit).
  Status write_starts(bool all);
  bool has_pending_starts() const { return !pending_starts_.empty(); }
  // When the oldest held record is due (clock ms); nullopt: none held.
  std::optional<int64_t> next_start_due_ms() const;
  // A METRICS batch from `agent`: stored once (a repeated seq is dropped).
  // A late batch of an attempt that ended is still stored; another agent's
  // or a superseded attempt's is dropped. A live trial whose stop a
  // previous scheduler decided is sent that stop now.
  Result<MetricsOutcome> metrics(const std::string& agent, const protocol::Metrics& m);
  // Its sweep's early_terminate rule stopped the trial (the runner judged a
  // stored batch): STOP_TRIAL goes to the outbox once, and whatever ends it
  // then, it ends early_stopped. No-op unless it is live and not cancelled.
  void stop_early(int64_t trial_id, const std::string& why);
  // A pbt member reached its interval (`done`: pbt.max_steps): STOP_TRIAL
  // goes out once. When it then exits stopped, its segment ends requeued at
  // no cost with TrialRequeued.at_interval (done: it ends completed); a
  // process that ended by itself first keeps its own outcome. No-op unless
  // it is live and not stopped for another reason.
  void stop_at_interval(int64_t trial_id, const std::string& why, bool done);
  // A TRIAL_EXITED from `agent`: the current attempt ends (finish, lose or
  // requeue as its cause says); an attempt given up while its agent was
  // away keeps a result it reports; a superseded one is history only.
  Result<ExitOutcome> exited(const std::string& agent, const protocol::TrialExited& e);
  // Whether the EXIT_ACK of this TRIAL_EXITED (just passed to exited())
  // waits: true for a node of a gang whose attempt goes on. Its ack is then
  // mailed when the attempt ends, so that until then the agent keeps the
  // exit and reports it in REGISTER `finished` to a scheduler restarted
  // meanwhile, which would otherwise find that node gone and lose the
  // attempt. False: the caller acknowledges it now.
  bool hold_exit_ack(const std::string& agent, const protocol::TrialExited& e);
  // HEARTBEAT `workers_ended` from `agent` (issue 30): that node of the
  // current attempt has only parameter servers left. Once every workers'
  // node has, its servers are sent STOP_TRIAL (protocol::kWorkersEndedStop);
  // a node that says so again after that is sent it again. Anything not
  // current is ignored.
  void workers_ended(const std::string& agent, const protocol::WorkersEnded& w);
  // An agent (re-)registers reporting what it runs and what finished while
  // it was away: its current attempts are kept (their deadlines cleared, a
  // stop decided meanwhile sent again), an attempt given up but still
  // queued is adopted back, a stale one is stopped; finished ones end as
  // exited() says; live trials it did not report are lost, except
  // unconfirmed ones, which wait until `confirm_deadline_ms` for their
  // TRIAL_STARTED (their START_TRIAL may have crossed the REGISTER).
  Result<Reconciled> reconcile(const std::string& agent, const std::vector<protocol::RunningTrial>& running,
                               const std::vector<protocol::TrialExited>& finished, int64_t confirm_deadline_ms);

  // ---- agents going away, deadlines ----
  // `agent` went silent (lost, not gone): it may still run its trials, so
  // they keep their places until `until_ms` (its lease, a margin and the
  // report window), then are lost (check_deadlines). Back before that, it
  // keeps them or reports how they ended. `lease_over_ms` (0: none): when its
  // lease and margin end, which check_deadlines logs once per trial. A gang
  // it runs a node of goes on too, until then; at `lease_over_ms` it is lost
  // if another node still runs (LiveTrial::silent_nodes).
  void agent_silent(const std::string& agent, int64_t until_ms, int64_t lease_over_ms = 0);
  // `agent` is gone (disconnected, key revoked): its trials are lost now.
  Status agent_gone(const std::string& agent, const std::string& reason);
  // Loses the trials whose deadline passed: recovered ones whose agent did
  // not come back, unconfirmed starts, and lost agents' trials whose lease
  // (`lease_ms`, for the reason) is over. `connected(agent)`: whether it is
  // registered now.
  Status check_deadlines(const std::function<bool(const std::string&)>& connected, int64_t lease_ms);
  // The scheduler's own loop stalled for `stall_ms` (Broker::excuse_stall):
  // every deadline above moves that much later, so that nothing an agent
  // said during the stall and the scheduler has not read yet counts against it.
  void postpone_deadlines(int64_t stall_ms);

  // ---- clients ----
  // Cancels the sweep's live trials (each sent STOP_TRIAL; the runner
  // stops its queued ones). Returns how many.
  Result<int64_t> cancel_live(int64_t sweep_id, const std::string& reason);
  // Cancels one trial, live or queued. FailedPrecondition when it has
  // already ended ("trial 7 is already lost"); NotFound when unknown.
  Status cancel_trial(int64_t trial_id, const std::string& reason);

  // ---- heartbeats, housekeeping ----
  // The batches stored since they were last acknowledged, by agent name.
  std::map<std::string, std::vector<protocol::MetricsAck>> take_metric_acks();

  // The ways a live trial ends, by trial id (no-ops for one not live).
  // `state` completed | failed | stopped; `e` the exit when there is one.
  Status finish(int64_t trial_id, TrialState state, const protocol::TrialExited* e, std::string reason);
  Status lose(int64_t trial_id, const std::string& reason);
  // `at_interval`: a pbt member's segment that ended at its interval (the event says so).
  Status requeue(int64_t trial_id, const std::string& reason, bool at_interval = false);
  // A pbt member's segment failed (`e`): requeued to rerun from its last
  // complete checkpoint while max_retries allows (true; lifecycle_pbt.cpp).
  // False, changing nothing, for a trial of another method, a cancelled or
  // early-stopped one, or one with no retries left: it ends as any trial.
  Result<bool> retry_member(int64_t trial_id, const protocol::TrialExited& e, const std::string& reason);

 private:
  // What a TRIAL_EXITED means for the trial: the event (the process ended
  // with an outcome, or the agent lost it) and the reason shown.
  static TrialEvent event_for_exit(const protocol::TrialExited& e, std::string* reason);
  Status ensure_tx();
  // Writes one trial's held start (before its end is written).
  Status write_start(LiveTrial& lt);
  // Whether its sweep's early_terminate rule stopped this trial (this
  // scheduler's decision, or one on record from before a restart), and the
  // user did not cancel it first: it ends early_stopped, whatever ends it.
  static bool early_stop_decided(const LiveTrial& lt) { return (lt.early_stop || lt.stop_on_record) && !lt.cancelled; }
  // Marks `lt` stopped by its sweep's rule and sends the stop to its agent.
  void send_early_stop(LiveTrial& lt, const std::string& reason);
  // A live trial the user stopped or the rule stopped: the STOP_TRIAL that
  // its agent must get again when it re-registers still running it.
  std::optional<protocol::StopTrial> stop_owed(LiveTrial& lt);
  // Removes a live trial, unlinking it from its successor or predecessor; a
  // gang's nodes that have not ended are sent STOP_TRIAL (no rank of an
  // ended attempt may keep running), and its late exits are history only.
  LiveTrial take(std::unordered_map<int64_t, LiveTrial>::iterator it);
  // Sends STOP_TRIAL to each node of `lt` that has not ended.
  void mail_stop(LiveTrial& lt, const std::string& reason);
  // take() of a gang: its nodes still running are stopped and counted in
  // gang_ended_; the EXIT_ACKs its ended nodes wait for are mailed.
  void gang_taken(LiveTrial& lt);
  // Records a dispatched gang's ports and servers in `lt` (dispatch).
  static void note_gang_ports(LiveTrial& lt, const GangDispatch& gang, const std::string& node0);
  // A dispatched gang's processes as the store keeps them (attempts.gang),
  // and their adoption by a recovered trial whose nodes are set (issue 30).
  static GangRecord gang_record(const GangDispatch& gang, const Placement& node0);
  static void adopt_gang(LiveTrial& lt, const GangRecord& g);
  // A trial with parameter servers whose every workers' node has ended (exit
  // 0) or said its workers did: its servers are stopped (issue 30).
  void stop_servers_if_workers_ended(LiveTrial& lt);
  // A TRIAL_EXITED of node `node` of a gang's current attempt (exited()).
  Result<ExitOutcome> gang_node_exited(LiveTrial& lt, int node, const std::string& agent,
                                       const protocol::TrialExited& e);
  // The opening of lose() and requeue(): a live attempt that ends without a
  // result of its own. Writes its pending start, takes it out of the live
  // trials and opens the transaction. Empty when it is not live, or when its
  // sweep's rule had stopped it: then it ends here (early_stopped), never rerun.
  Result<std::optional<LiveTrial>> take_for_rerun(int64_t trial_id, const std::string& reason);
  // A live trial under its sweep's terms (retries, CPU slots).
  LiveTrial make_live(int64_t trial_id, int64_t sweep_id, int attempt, const std::string& agent) const;
  // The sweep's metric (for trials.metric_value): its terms', else the store's.
  std::optional<std::string> metric_of(int64_t sweep_id);
  // A trial reached a final state: its event for the runner; a place may be free.
  void ended(int64_t trial_id, int64_t sweep_id, TrialState state, bool was_running);
  // How a given-up attempt's result is recorded when its agent reports it (exited()).
  Status record_late_result(const TrialRow& rec, const std::string& agent,
                            const protocol::TrialExited& e, TrialState late, const std::string& reason);

  store::Writer& store_;
  const Clock& clock_;
  std::unordered_map<int64_t, LiveTrial> live_;  // by trial id
  std::map<int64_t, SweepTerms> terms_;          // running sweeps, by id (on_sweep)
  std::map<int64_t, std::optional<std::string>> ended_metric_;  // metrics of sweeps no longer running
  std::set<int64_t> pending_starts_;             // live_ entries with a start_env_json
  std::map<int64_t, double> mean_run_seconds_;   // by sweep: how long its trials run
  std::vector<AgentMail> mail_;
  std::vector<LifecycleEvent> events_;
  // Gang attempts that ended while some node still ran, by (trial, attempt):
  // which nodes' agents have yet to report. Their late TRIAL_EXITEDs are history
  // only, never a late result; the entry goes with the last of them (or when
  // the trial is dispatched again), so only nodes whose agents never
  // report again stay here.
  //
  // Each node yet to report holds the trial's next attempt back (issue 26):
  // a queued trial is not started again before every rank of its previous
  // attempt is known dead. A node whose agent is connected is known dead
  // when it reports its end (kUntilConfirmed until then); a silent agent's,
  // when its lease and margin are over (it, or its keeper, has SIGKILLed
  // them: the bound the one-node rule requeues after, less the report
  // window). The latest of these is the trial's not-before time, given to
  // the runner as a TrialHeld whenever it changes (0: released).
  static constexpr int64_t kUntilConfirmed = std::numeric_limits<int64_t>::max();
  struct GangRemains {
    int64_t sweep_id = 0;
    std::map<std::string, int64_t> pending;  // agent -> when its ranks are known dead
    int64_t told = 0;                        // the not-before last given to the runner; 0: none
  };
  std::map<std::pair<int64_t, int>, GangRemains> gang_ended_;
  // Silent agents: when their lease and margin are over (agent_silent),
  // until they come back or are gone.
  std::map<std::string, int64_t> silent_until_;
  // Records `lt`'s nodes that have not reported their end (take()), and
  // holds the trial's next attempt back until they are known dead.
  void remember_gang_remains(const LiveTrial& lt);
  // A TRIAL_EXITED of an attempt that ended as one while this node ran:
  // true (history only) when it is one; that node is known dead now.
  bool gang_remains_exited(const std::string& agent, const protocol::TrialExited& e);
  // What became of `agent` for the held retries: silent until `bound_ms`,
  // gone (its ranks went with it, as its one-node trials do), or back
  // reporting `running` (those it still runs are owed their exit).
  void gang_agent_silent(const std::string& agent, int64_t bound_ms);
  void gang_agent_gone(const std::string& agent);
  void gang_agent_back(const std::string& agent, const std::vector<protocol::RunningTrial>& running);
  // Gives the runner each held retry's not-before time where it changed;
  // a place may be free when one is released.
  void refresh_holds();
  // Gangs one of whose agents went silent while another node's failure was
  // held (that host is likely down): lost at the next check_deadlines.
  std::vector<std::pair<int64_t, std::string>> gang_losses_;
  // Gangs with a silent node past its lease and margin: lost when another
  // node still runs, or when the node's report window is over too (LiveTrial::silent_nodes).
  Status check_silent_gangs();
  int64_t gang_hold_ms_ = 7500;
  // Gang attempts whose held failure is due (check_deadlines).
  Status settle_held_failures();
  bool changed_ = true;
  std::atomic<int64_t> finished_{0}, dispatched_{0}, successors_{0};
};

}  // namespace swept::scheduler
