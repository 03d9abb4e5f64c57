// Broker: the scheduler's event loop (docs/protocol.md). One ROUTER socket,
// one poll loop, one handler per kind of peer (agents, CLI clients): in
// shape and size the ZeroMQ guide's Majordomo broker, with the trials kept
// elsewhere.
//
// It owns the socket, decoding, client requests and statistics, and decides
// what starts where by asking placement (pure) and the sweep runner
// (queues). Who the agents are (sessions, keys, liveness, quarantine) is the
// AgentRegistry's (agent_registry.h); what happens to a trial once it is out
// on an agent (start, metrics, finish, loss, requeue, cancel, early stop,
// adoption, reconciliation, successors) is the TrialLifecycle's
// (lifecycle.h); the sweeps are the SweepRunner's (sweep_runner.h). The
// broker hands them what agents and clients say, passes the lifecycle's
// events to the runner (flow.h), and sends what they decide. Everything
// durable goes through the store's Writer.
//
// Each turn of the loop receives what is waiting, handles it inside one
// store transaction, checks timers, dispatches, commits, and only then
// sends: an acknowledgement or a START_TRIAL never leaves before the state
// it implies is on disk, which is what makes a SIGKILL at any moment
// recoverable. The commit-batching tricks (CommitPolicy) only move when
// things are written and sent: a turn whose only output can wait (exit
// acknowledgements, successors whose predecessor still runs) leaves its
// transaction open for up to 2 ms so that the next turns share its commit,
// and still commits before it sends.
//
// Time comes from a Clock, so liveness and recovery can be tested with a
// FakeClock; the socket is real.
// Thread safety: run()/turn() on one thread. request_cancel_all(), wake(),
// wait_for_change(), live_trials(), stats(), unplaceable_sweeps() and
// all_quarantined() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <tuple>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "common/clock.h"
#include "common/curvezmq.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/protocol.h"
#include "common/status.h"
#include "common/wakeup.h"
#include "scheduler/agent_registry.h"
#include "scheduler/flow.h"
#include "scheduler/lifecycle.h"
#include "scheduler/placement.h"
#include "scheduler/zap.h"
#include "store/reader.h"
#include "store/writer.h"
#include "scheduler/sweep_runner.h"

namespace swept::scheduler {

// The broker's commit-batching tricks, named together so that they can be
// switched off (to measure them, or to rule them out when something is
// wrong). Each trades latency nobody sees for fewer commits and wake-ups;
// none changes what is stored or acknowledged, only when.
struct CommitPolicy {
  // An open transaction whose only mail may wait (exit acknowledgements,
  // successors) stays open up to 2 ms for more, so one commit serves several.
  bool gather_window = true;
  // A TRIAL_STARTED record (pid, environment, start time) rides on the next
  // commit, or gets its own 50 ms later, instead of a commit of its own.
  bool defer_start_writes = true;
  // Short trials of a sweep alone in the cluster get a successor waiting at
  // their agent (START_TRIAL `after`), so the agent need not ask again.
  bool successors = true;
  // All off: commit and send at the end of every turn, write every start in
  // the turn it arrives, send no successors.
  static CommitPolicy off() { return CommitPolicy{false, false, false}; }
};

struct BrokerOptions {
  // Where to listen; "tcp://127.0.0.1:*" picks a free port (see endpoint()).
  std::string bind = "tcp://127.0.0.1:5555";
  // A second address on the same socket, for an agent in the same process
  // (swept run): "inproc://NAME" reaches the broker without the network
  // stack or ZeroMQ's I/O thread. That agent must use context(). Empty: none.
  std::string local_bind;
  int heartbeat_ms = 1000;  // sent to agents in REGISTER_ACK
  int liveness = 5;         // heartbeats missed before an agent is lost
  // After a restart, how long a trial recorded as running waits for its
  // agent to re-register before it is declared lost. Default: long enough
  // for an agent at the end of its 32 s backoff.
  int recovery_grace_ms = 75000;
  CommitPolicy commit;
  // Host faults (docs/protocol.md, "Host faults and quarantine"): after this
  // many launch failures in a row that its agent blames on its host, the
  // agent gets no more work until it reports healthy again or an operator
  // releases it (`swept agents --release`). 0: never quarantine.
  int quarantine_after = 3;
  // Agents that went away: shown by QUERY_AGENTS (without `all`) for this
  // long after they were last seen, and their rows deleted from the
  // database after forget_agents_after_s (docs/protocol.md, QUERY_AGENTS).
  int agent_display_s = protocol::kAgentDisplaySeconds;
  int64_t forget_agents_after_s = 7 * 86400;
  // New unkeyed agent sessions admitted per second (a burst of twice that);
  // docs/protocol.md, "Security".
  int unkeyed_register_rate = 32;
  // CurveZMQ (docs/protocol.md, "Security"). With a server key the socket
  // is a CURVE server: only keys in `keys` get in (the ZAP handler of
  // context(), scheduler/zap.h, must be started before bind()), each message
  // is checked against the key's role, and an agent's name is bound to its
  // key. Null: no authentication (loopback and inproc only, or --insecure).
  std::optional<curvezmq::KeyPair> server_key;
  std::shared_ptr<const KeyRing> keys;
  // A multi-node trial that has found no place for this long gets agents
  // reserved for it (placement.h; docs/protocol.md, "Multi-node trials").
  int64_t gang_reserve_after_ms = kGangReserveAfterMs;
};

struct BrokerStats {
  int64_t messages_in = 0;
  int64_t messages_dropped = 0;  // undecodable or refused
  int64_t trials_dispatched = 0;
  int64_t trials_finished = 0;
  int64_t successors = 0;  // of trials_dispatched: sent to wait for a running trial's place
  int64_t metric_rows = 0;
  int64_t registers = 0;         // REGISTER messages received (refused ones included)
  int64_t host_fault_requeues = 0;  // trials requeued because their host could not start them
  double loop_cpu_seconds = 0;    // CPU time of the thread running run() (all of the broker's work)
  double ingest_seconds = 0;      // wall time spent storing METRICS batches
  int64_t turns = 0;
  // Times the loop itself came back more than a heartbeat late (starved of
  // CPU, stopped, a slow disk), and how long it was away in all: time no
  // agent is blamed for (see Broker::excuse_stall).
  int64_t stalls = 0;
  int64_t stalled_ms = 0;
};

class Broker {
 public:
  // `store` and `clock` must outlive the broker.
  Broker(store::Writer& store, const Clock& clock, BrokerOptions options);
  ~Broker();

  // Binds the socket. Unavailable when the address is taken or invalid.
  Status bind();
  // The endpoint actually bound ("tcp://127.0.0.1:41234"), after bind().
  const std::string& endpoint() const { return endpoint_; }
  // The ZeroMQ context of the broker's socket: an agent in the same process
  // connects through it to `local_bind`.
  zmq::context_t& context() { return context_; }

  // Loads running sweeps and trials from the store (after a restart).
  Status recover();

  // Submits a sweep directly (swept run), as SUBMIT would.
  Result<SubmitResult> submit(const std::string& spec_text, const WarmInput& warm = {});

  // One turn of the loop: waits up to `max_wait_ms` for messages. Errors are
  // fatal store failures (the caller stops).
  Status turn(int max_wait_ms);
  // Turns until `stop` is set: checked every 100 ms at most, and at once
  // after wake().
  Status run(const std::atomic<bool>& stop);
  // Ends the loop's current wait (after setting its stop flag, say). Any
  // thread; async-signal-safe.
  void wake() const { wake_.notify(); }

  // Blocks until a sweep ends or the last trial out on agents ends, counted
  // from `seen` (0 at first; pass back what the previous call returned), or
  // until `timeout` passes. Returns the count of such changes. Any thread.
  int64_t wait_for_change(int64_t seen, std::chrono::milliseconds timeout);

  // Cancels every running sweep: queued trials stopped, running ones sent
  // STOP_TRIAL (swept run's Ctrl-C). Takes effect at the next turn.
  void request_cancel_all() {
    cancel_all_requested_ = true;
    wake();
  }
  // Trials out on agents (dispatched or adopted, not yet ended).
  size_t live_trials() const { return live_count_.load(); }
  BrokerStats stats() const;
  // Sweeps whose trials fit on no registered agent even when it is idle
  // (e.g. 4 GPUs per trial, agents with 2): they wait for a bigger agent.
  std::vector<int64_t> unplaceable_sweeps() const;
  // While trials wait and every registered agent is quarantined: which, and
  // why ("every registered agent is quarantined: a (3 host faults ...)");
  // empty otherwise (swept run stops on it: its one agent cannot work).
  std::string all_quarantined() const;

 private:
  struct Outgoing {
    std::string routing_id;
    protocol::Message message;
    // Frame 0: ours, or kPreviousProtocolId to refuse a peer of that version
    // in words it can read.
    std::string_view protocol_id = protocol::kProtocolId;
  };

  Status ensure_tx();
  // swept run's Ctrl-C (request_cancel_all): every running sweep cancelled.
  Status cancel_all();
  void send_later(const std::string& routing_id, protocol::Message m,
                  std::string_view protocol_id = protocol::kProtocolId);
  // Queues what the lifecycle decided to send (to agents by name; an agent
  // not connected now gets it again when it re-registers, see reconcile).
  void post_mail();
  // Everything in outgoing_ may wait a little (see turn()).
  bool deferrable_outgoing() const;
  void flush();

  Status handle(const std::string& routing_id, const protocol::Frames& frames, const std::string& user_id);
  // On a keyed scheduler: whether this message's key may send it. Refuses
  // (and answers) otherwise; a session whose key was revoked is dropped.
  Result<bool> authorized(const std::string& routing_id, const protocol::Message& m, const std::string& user_id,
                          const std::string& request_id);
  Status handle_agent(AgentSession& s, const protocol::Message& m);
  Status handle_client(const std::string& routing_id, const protocol::Message& m);
  Status on_register(const std::string& routing_id, const protocol::Register& r);
  Status on_trial_exited(AgentSession& s, const protocol::TrialExited& e);
  // A pbt checkpoint moved between agents (broker_checkpoints.cpp): a pull
  // relayed to the agent that holds the segment, a part back to the puller.
  Status on_checkpoint_pull(AgentSession& s, const protocol::CheckpointPull& pull);
  Status on_checkpoint_part(AgentSession& s, const protocol::CheckpointPart& part);
  // What an agent's TRIAL_EXITED says of its host.
  Status note_exit(AgentSession& s, const protocol::TrialExited& e, TrialLifecycle::ExitOutcome outcome);
  // Takes the routing id by value: callers pass the session's own, which
  // this erases.
  Status on_agent_gone(std::string routing_id, const std::string& why, AgentState new_state);
  // The lease an agent gets in REGISTER_ACK, and how long after its last
  // message the scheduler requeues the trials of a lost agent: lease +
  // margin + report window (docs/protocol.md, "Leases"). The margin covers
  // the two sides' last messages (two heartbeats apart at most) and clocks
  // that run at rates up to 1 % apart; by its end the agent, or its keeper,
  // has stopped every trial. The report window then holds the trials for the
  // agent's report of those that ended by themselves meanwhile (issue 26):
  // requeued sooner, they would run to their end twice.
  int64_t lease_ms() const { return int64_t{2} * options_.heartbeat_ms * options_.liveness; }
  int64_t lease_margin_ms() const { return int64_t{2} * options_.heartbeat_ms + lease_ms() / 100; }
  int64_t report_window_ms() const { return lease_ms(); }
  Status check_timers();
  // The loop was away `stall_ms` longer than it ever waits (a heartbeat):
  // the agents' messages of that time may still be unread, so their silence
  // and every deadline of the lifecycle are counted without it. Without this
  // a scheduler starved of CPU past liveness declared every agent lost at
  // once, blaming them for its own stall (docs/protocol.md, "Heartbeats").
  void excuse_stall(int64_t now_ms, int64_t stall_ms);
  // Answers RELEASE_AGENT (broker_agents.cpp).
  Status on_release(const std::string& routing_id, const protocol::ReleaseAgent& r);
  // Work is waiting but every registered agent is quarantined or draining:
  // says so (once per change), with how to release them.
  void warn_all_held(const std::vector<std::string>& held);
  Status dispatch();
  // Multi-node trials (broker_gangs.cpp): the rendezvous of a planned gang
  // (its nodes' agents, node 0's address and a port of its range), and how
  // long each multi-node sweep's next trial has waited for a place.
  // With parameter servers or several nodes (issue 30), every node's address
  // and a port of its agent's range for each process (TF_CONFIG).
  GangDispatch gang_of(const Dispatch& d, const std::vector<AgentCapacity>& caps, const Demand& demand);
  // The ports live trials hold (MASTER_PORT and TF_CONFIG's), by host: the
  // agent's address, which agents on one machine share.
  std::map<std::string, std::set<int>> ports_in_use() const;
  // A port of `agent`'s rendezvous range not in `taken` (every port in use
  // on its host: ports_in_use()'s, and those this gang already took there).
  int pick_port(const AgentSession& agent, const std::set<int>& taken);
  void note_gang_waits(const std::vector<SweepQueue>& queues, const Plan& plan);
  void send_heartbeats();

  store::Writer& store_;
  const Clock& clock_;
  // One WARN per refused message, throttled: a peer cannot flood the log.
  log::Throttle refused_log_{log::Level::kWarn, 20, 10000};
  BrokerOptions options_;
  AgentRegistry agents_;      // the agents
  SweepRunner runner_;        // the sweeps and their queues
  TrialLifecycle lifecycle_;  // the trials out on agents
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;

  std::string current_key_;  // the key of the message being handled (CURVE only)
  std::string held_warned_;  // the agents warn_all_held() last named ("": none held)
  std::vector<Outgoing> outgoing_;
  bool dirty_ = true;  // something changed that may allow a dispatch
  bool gathering_ = false;  // the open transaction waits for more (turn())
  int64_t gather_until_us_ = 0;  // clock_.now_us() when the gather window closes
  int64_t last_heartbeat_round_ms_ = 0;
  std::optional<int64_t> last_timers_ms_;  // clock_.now_ms() at the previous check_timers()
  std::atomic<bool> cancel_all_requested_{false};
  mutable Mutex unplaceable_mutex_;
  std::set<int64_t> unplaceable_ SWEPT_GUARDED_BY(unplaceable_mutex_);
  std::string all_quarantined_ SWEPT_GUARDED_BY(unplaceable_mutex_);  // see all_quarantined()
  std::atomic<size_t> live_count_{0};
  std::map<int64_t, int64_t> gang_waiting_since_ms_;  // by sweep: when its next multi-node trial began to wait
  std::map<std::tuple<std::string, int, int>, int> next_port_;  // by host and range: where the next rendezvous port search starts
  std::string reserved_logged_;                       // the reservation last logged ("": none)
  Wakeup wake_;
  int64_t sweeps_ended_seen_ = 0;
  Mutex change_mutex_;
  std::condition_variable_any change_cv_;
  int64_t changes_ SWEPT_GUARDED_BY(change_mutex_) = 0;
  mutable std::atomic<int64_t> stat_in_{0}, stat_dropped_{0}, stat_rows_{0}, stat_turns_{0}, stat_registers_{0},
      stat_host_requeues_{0}, stat_stalls_{0}, stat_stalled_ms_{0};
  std::atomic<double> stat_cpu_{0}, stat_ingest_{0};
};

}  // namespace swept::scheduler
