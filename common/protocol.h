// The swept wire protocol (docs/protocol.md): typed messages between the
// scheduler, its agents and the CLI, and their codec to and from ZeroMQ
// multipart frames.
//
// Every message is three frames: "swept/2", the kind ("REGISTER"), and a JSON
// object body. The codec works on plain strings (one per frame) so that it
// needs no socket library; scheduler/ and agent/ move the frames through
// cppzmq. JSON is parsed here, once, into the structs below; the rest of swept
// sees only typed values.
//
// Invariants kept by the codec: encode() always produces a message decode()
// accepts and decodes to an equal value; decode() never throws and never
// aborts, whatever the bytes, and names the offending field when it refuses.
// Thread safety: pure functions on values.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/rows.h"
#include "common/states.h"

namespace swept::protocol {

// Frame 0 of every message. Bump the digit for an incompatible change
// (docs/protocol.md, "Versions"). 2: an agent says it drains (REGISTER and
// HEARTBEAT `draining`); an agent_shutdown exit no longer implies it.
inline constexpr std::string_view kProtocolId = "swept/2";
// The version before: its peers are refused, answered in their own framing
// (the REGISTER_REJECT and ERROR bodies did not change) so they can say why.
inline constexpr std::string_view kPreviousProtocolId = "swept/1";
// The largest message the scheduler and agents accept (ZMQ_MAXMSGSIZE;
// docs/protocol.md, "Sockets and roles"): a peer that sends more is
// disconnected before the message is held in memory.
inline constexpr int64_t kMaxMessageBytes = int64_t{16} << 20;
// Messages queued per peer in each direction on the scheduler's socket
// (ZMQ_SNDHWM / ZMQ_RCVHWM): beyond it a reply is dropped, a sender waits.
inline constexpr int kPeerHighWaterMark = 1000;
// The longest containment a REGISTER may carry (docs/protocol.md, REGISTER
// `containment`): a mode's name and the limits enforced, not a description.
inline constexpr size_t kMaxContainmentBytes = 64;

// ---- pieces ----------------------------------------------------------------

// A GPU as REGISTER offers it: a row of agent_gpus (common/rows.h).
using swept::GpuInfo;

struct RunningTrial {
  int64_t trial_id = 0;
  int attempt = 0;
  int64_t pid = 0;
  double started_at = 0;
  bool operator==(const RunningTrial&) const = default;
};

// Why a trial's process ended (docs/protocol.md, TRIAL_EXITED).
enum class ExitCause { kExited, kSignaled, kTimeout, kLaunchFailed, kStopped, kAgentShutdown, kNotRunning };
const char* exit_cause_name(ExitCause cause);  // "exited", "timeout", ...

// [trial_id, attempt, seq]: the highest metrics batch stored for an attempt.
struct MetricsAck {
  int64_t trial_id = 0;
  int attempt = 0;
  int64_t seq = 0;
  bool operator==(const MetricsAck&) const = default;
};

struct MetricRecord {
  int64_t step = 0;
  std::string name;
  double value = 0;
  bool operator==(const MetricRecord&) const = default;
};

// ---- agent -> scheduler ----------------------------------------------------

struct TrialExited {
  int64_t trial_id = 0;
  int attempt = 0;
  ExitCause cause = ExitCause::kExited;
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool timed_out = false;
  std::string reason;
  double ended_at = 0;
  int64_t last_seq = 0;  // seq of the last METRICS batch sent for this attempt (0: none)
  // cause kLaunchFailed only: the host, not the trial, kept it from starting
  // (its work directory cannot be made, out of disk, fork refused, ...). The
  // scheduler requeues such a trial without spending a retry. Optional on
  // the wire ("host_fault": true), absent when false.
  bool host_fault = false;
  // The trial reported `"diverged": true` (docs/metrics.md): its metric value
  // is not a result, so a trial that still exited 0 never counts as best and
  // a searcher counts it as the worst. Optional ("diverged": true), absent
  // when false.
  bool diverged = false;
  // When its process started (wall seconds); 0 when it never started.
  // Optional on the wire ("started_at"), absent when 0: it lets a scheduler
  // that never stored the attempt's TRIAL_STARTED (killed before it was
  // written) still record when the attempt ran.
  double started_at = 0;
  bool operator==(const TrialExited&) const = default;
};

struct Register {
  std::string name;
  std::string host;
  std::string session;
  int64_t pid = 0;
  int slots = 0;
  std::vector<GpuInfo> gpus;
  std::vector<RunningTrial> running;
  std::vector<TrialExited> finished;
  // Optional behaviours this agent implements ("start_after": START_TRIAL's
  // `after`); the scheduler uses none the agent does not list.
  std::vector<std::string> features;
  // The agent's last self-check of its work directory (writable, free space
  // above a floor): nullopt when it reports none (optional on the wire).
  std::optional<bool> healthy;
  std::string health;  // what is wrong when !*healthy
  // The agent is draining or shutting down: it starts no new trial and
  // leaves once its trials have stopped. Optional on the wire (absent: false).
  bool draining = false;
  // How the agent keeps each trial's processes together (agent/containment.h:
  // "cgroup" or "subreaper"), then the limits it sets ("; limits memory,pids,cpus"
  // or "; no limits"); "" when it does not say (optional on the wire, at most
  // kMaxContainmentBytes).
  std::string containment;
  // Multi-node trials (issue 25), optional on the wire. `addr`: the address
  // other hosts reach this one at (--advertise-addr, else the local address
  // of the connection to the scheduler); "" when it does not say. The
  // rendezvous ports: the range [ports_lo, ports_hi] the scheduler picks a
  // gang's MASTER_PORT from when this agent holds its node 0 (0, 0: none).
  // An agent that runs gangs lists the feature "gang".
  std::string addr;
  int ports_lo = 0;
  int ports_hi = 0;
  bool operator==(const Register&) const = default;
};

struct TrialStarted {
  int64_t trial_id = 0;
  int attempt = 0;
  int64_t pid = 0;
  double started_at = 0;
  std::string workdir;
  std::map<std::string, std::string> env;
  bool operator==(const TrialStarted&) const = default;
};

struct Metrics {
  int64_t trial_id = 0;
  int attempt = 0;
  int64_t seq = 0;
  std::vector<MetricRecord> records;
  std::string log;
  int64_t log_dropped = 0;
  bool operator==(const Metrics&) const = default;
};

// ---- scheduler -> agent ----------------------------------------------------

struct RegisterAck {
  std::string session;
  int heartbeat_ms = 1000;
  int liveness = 5;
  std::vector<MetricsAck> acked;
  // The agent's lease (docs/protocol.md, "Leases"): after this long without
  // a message from the scheduler the agent has stopped its trials. Optional
  // on the wire; 0 (absent, an older scheduler): no lease.
  int64_t lease_ms = 0;
  bool operator==(const RegisterAck&) const = default;
};

struct RegisterReject {
  // "duplicate_name" | "bad_request"; keyed schedulers: "name_taken" |
  // "forbidden" | "unauthorized" (docs/protocol.md, "Security")
  std::string code;
  std::string message;
  int64_t retry_after_ms = 0;
  bool operator==(const RegisterReject&) const = default;
};

// The file in a trial's working directory that holds its parameters as JSON
// (docs/protocol.md, START_TRIAL): the scheduler expands ${args_json_file}
// to this name (sweeps::CommandContext), and the agent writes the file for a
// command that names it.
inline constexpr std::string_view kParamsFileName = "swept-params.json";

// A multi-node (or multi-process) trial's place in its gang: START_TRIAL
// `gang` (docs/protocol.md). Absent: one process on one node.
struct Gang {
  int nodes = 1;           // agents the trial spans
  int node_rank = 0;       // this agent's node: 0 .. nodes-1 (torchrun's GROUP_RANK)
  int procs_per_node = 1;  // processes on each node (LOCAL_WORLD_SIZE)
  std::string master_addr; // node 0's advertised address (MASTER_ADDR)
  int master_port = 0;     // free on node 0 when the trial starts (MASTER_PORT)
  // Every process's address (issue 30: TF_CONFIG, parameter servers),
  // optional on the wire (absent: empty, and no TF_CONFIG is set). `addrs`:
  // each node's advertised address, the workers' nodes 0 .. nodes-1 first,
  // then the nodes of their own that servers get with resources.ps_nodes
  // (their node_rank is nodes and above; they run no workers).
  // `worker_ports`: worker RANK r's port on its node's host (nodes x
  // procs_per_node entries). `ps_node`, `ps_ports`: parameter server j's node
  // (an index into addrs) and port. Every port is picked by the scheduler
  // from its node's rendezvous range, as master_port is.
  std::vector<std::string> addrs = {};
  std::vector<int> worker_ports = {};
  std::vector<int> ps_node = {};
  std::vector<int> ps_ports = {};
  // Whether it carries the whole cluster (every worker's and server's place).
  bool has_cluster() const {
    return !addrs.empty() && worker_ports.size() == static_cast<size_t>(nodes) * static_cast<size_t>(procs_per_node);
  }
  bool operator==(const Gang&) const = default;
};
inline constexpr int kMaxParameterServers = 64;
inline constexpr int kMaxGangNodes = 1024;
inline constexpr int kMaxProcsPerNode = 64;
// The REGISTER feature an agent lists when it runs START_TRIAL `gang`.
inline constexpr const char* kFeatureGang = "gang";

// A trial's limits (START_TRIAL `limits`, docs/protocol.md), which the agent
// sets in the trial's cgroup where its host can (docs/deploy.md, "Trial
// limits"). Each optional on the wire; 0 when absent.
struct TrialLimits {
  int64_t memory_bytes = 0;  // resources.memory; 0: none
  int64_t pids = 0;          // resources.pids; 0: the agent's default (4096)
  int cpus = 0;              // resources.cpus; a quota only under `swept agent --enforce-cpus`
  bool operator==(const TrialLimits&) const = default;
};
// Population-based training (issue 29): START_TRIAL `checkpoint`. A segment
// of a member runs with its own checkpoint directory, `<workdir>/segments/<attempt>`,
// filled before the start with a copy of `from`'s: the directory an ended
// segment (that trial, that attempt, of the same sweep) left behind, which
// nothing writes any more (docs/protocol.md, START_TRIAL `checkpoint`).
struct CheckpointSegment {
  CheckpointSegment() = default;
  CheckpointSegment(std::optional<int64_t> trial_id, int attempt, std::string agent = {})
      : from_trial_id(trial_id), from_attempt(attempt), from_agent(std::move(agent)) {}
  std::optional<int64_t> from_trial_id;  // nullopt: start with an empty directory
  int from_attempt = 0;
  // The agent that ran `from` (optional on the wire, "" : this agent). When
  // it names another agent, the agent pulls the directory through the
  // scheduler before the start (CHECKPOINT_PULL, CheckpointPull below).
  std::string from_agent;
  bool operator==(const CheckpointSegment&) const = default;
};
// The REGISTER feature an agent lists when it runs START_TRIAL `checkpoint`.
inline constexpr const char* kFeatureCheckpointSegments = "checkpoint_segments";
// The REGISTER feature an agent lists when it reads a CHECKPOINT_PART's
// bytes from a fourth frame; one that does not is sent them as base64 in
// the body (CheckpointPart::data_in_body).
inline constexpr const char* kFeatureCheckpointFrames = "checkpoint_frames";

struct StartTrial {
  int64_t trial_id = 0;
  int attempt = 0;
  int64_t sweep_id = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  nlohmann::json params = nlohmann::json::object();  // the trial's parameters, nested
  std::string workdir;  // relative to the agent's --workdir
  std::vector<int> gpus;
  double gpu_fraction = 0;
  double timeout_s = 0;
  // > 0: start only once this trial (this attempt) has ended on the agent,
  // in its place (docs/protocol.md, START_TRIAL `after`).
  int64_t after_trial_id = 0;
  int after_attempt = 0;
  std::optional<Gang> gang;  // a node of a multi-node trial (issue 25)
  TrialLimits limits;
  std::optional<CheckpointSegment> checkpoint;  // a pbt member's segment (issue 29)
  bool operator==(const StartTrial&) const = default;
};

struct StopTrial {
  int64_t trial_id = 0;
  int attempt = 0;
  std::string reason;
  bool operator==(const StopTrial&) const = default;
};

// Moving a pbt segment's checkpoint between agents (issue 29; docs/protocol.md,
// CHECKPOINT_PULL and CHECKPOINT_PART). The agent about to start segment
// (trial_id, attempt) from a directory another agent holds asks for it one
// piece at a time: first the manifest (`path` empty), then each file's bytes
// from `offset`. The scheduler relays a pull to the agent that ran (from_trial_id,
// from_attempt) and the part back, only between the agents its own records
// name, so every hop is the authenticated connection of a registered agent.
// One pull is answered by one part; the holder keeps no state between pulls.
struct CheckpointPull {
  int64_t trial_id = 0;  // the segment about to start (recipient side)
  int attempt = 0;
  int64_t sweep_id = 0;  // set by the scheduler when it relays (the holder's folder is sweep-S/trial-T)
  int64_t from_trial_id = 0;
  int from_attempt = 0;
  std::string path;      // "" : the manifest; else a file, relative to the segment's folder
  int64_t offset = 0;    // the first byte wanted
  bool operator==(const CheckpointPull&) const = default;
};
// One file of a segment's checkpoint: its size and CRC-32 (zlib's), which the
// recipient checks the bytes it received against before the start.
struct CheckpointFile {
  std::string path;  // relative, '/'-separated, no "..", never starting with '/'
  int64_t size = 0;
  uint32_t crc = 0;
  bool operator==(const CheckpointFile&) const = default;
};
// The answer to one pull: the manifest, or up to kCheckpointPartBytes of a
// file from `offset`, or `error` (the holder cannot read the segment, or the
// scheduler cannot reach its holder: the recipient then fails the start).
struct CheckpointPart {
  int64_t trial_id = 0;
  int attempt = 0;
  int64_t from_trial_id = 0;
  int from_attempt = 0;
  std::string path;                   // as pulled
  int64_t offset = 0;
  std::string data;                   // raw bytes: a fourth frame on the wire
  std::vector<CheckpointFile> files;  // the manifest (path "")
  std::string error;                  // "" : none
  // Encode `data` as base64 in the body instead of a fourth frame: for an
  // agent without kFeatureCheckpointFrames (the scheduler sets it when it
  // relays). decode() accepts either form and leaves this false.
  bool data_in_body = false;
  bool operator==(const CheckpointPart&) const = default;
};
// At most this many bytes of a file in one CHECKPOINT_PART (its own frame;
// a third more as base64, still well under kMaxMessageBytes).
inline constexpr int64_t kCheckpointPartBytes = int64_t{4} << 20;

struct ExitAck {
  int64_t trial_id = 0;
  int attempt = 0;
  bool operator==(const ExitAck&) const = default;
};

// ---- both directions between agent and scheduler ---------------------------

// A node of a trial with parameter servers whose workers have all exited 0
// while its servers still run (issue 30): HEARTBEAT `workers_ended`.
struct WorkersEnded {
  int64_t trial_id = 0;
  int attempt = 0;
  bool operator==(const WorkersEnded&) const = default;
};

// STOP_TRIAL's reason when the scheduler stops a trial's parameter servers
// because every worker has ended: a node whose own workers all exited 0
// then ends with exit 0, not as stopped (docs/protocol.md).
inline constexpr std::string_view kWorkersEndedStop = "the trial's workers have ended: its parameter servers are stopped";

struct Heartbeat {
  std::vector<MetricsAck> acked;  // scheduler -> agent only; empty otherwise
  // agent -> scheduler only, optional: as in REGISTER.
  std::optional<bool> healthy;
  std::string health;
  bool draining = false;
  // agent -> scheduler only, optional: every such node the agent holds, in
  // each heartbeat until the node ends (the scheduler stops the servers once
  // every workers' node has ended or is listed).
  std::vector<WorkersEnded> workers_ended = {};
  bool operator==(const Heartbeat&) const = default;
};

struct Disconnect {
  std::string reason;
  bool operator==(const Disconnect&) const = default;
};

// ---- CLI <-> scheduler -----------------------------------------------------

struct Error {
  std::string request_id;  // empty when answering an agent
  // "malformed" | "version" | "not_found" | "bad_request" | "internal";
  // keyed schedulers: "forbidden" (the key's role) | "unauthorized" (revoked)
  std::string code;
  std::string message;
  bool operator==(const Error&) const = default;
};

// One earlier trial a warm start offers (issue 28; sweeps/warm_start.h):
// read by the CLI from a file `swept export` wrote, sent with SUBMIT.
struct WarmTrial {
  nlohmann::json params;        // nested, as in a sweep file
  std::optional<double> value;  // its final value of the sweep's metric; nullopt: none
  std::string origin;           // "runs.csv, row 4": where it comes from
  bool text_values = false;     // read from CSV text: categorical values match by their text too
  bool operator==(const WarmTrial&) const = default;
};

struct Submit {
  std::string request_id;
  std::string spec;    // the sweep file's text
  std::string source;  // its file name, for messages
  // Warm start (docs/sweep-format.md "Warm starts"), both optional on the
  // wire: the sweep whose trials seed this one (`swept submit --warm-start
  // ID`, over the file's warm_start), and the trials of the file its
  // warm_start.file names, read by the client.
  std::optional<int64_t> warm_sweep = std::nullopt;
  std::optional<std::vector<WarmTrial>> warm_trials = std::nullopt;
  bool operator==(const Submit&) const = default;
};

struct Submitted {
  std::string request_id;
  int64_t sweep_id = 0;
  std::optional<int64_t> total_trials;
  // A warm-started sweep: what it imported and skipped, in words
  // ("3 of 5 earlier trials fit; 2 skipped: ..."); absent otherwise.
  std::optional<std::string> warm_start = std::nullopt;
  bool operator==(const Submitted&) const = default;
};

struct Cancel {
  std::string request_id;
  std::optional<int64_t> sweep_id;  // exactly one of the two is set
  std::optional<int64_t> trial_id;
  bool operator==(const Cancel&) const = default;
};

struct Retry {
  std::string request_id;
  int64_t sweep_id = 0;
  bool early_stopped = false;  // also the early-stopped trials (optional field, default false)
  bool operator==(const Retry&) const = default;
};

struct Done {
  std::string request_id;
  std::string message;
  int64_t count = 0;
  bool operator==(const Done&) const = default;
};

struct QuerySweeps {
  std::string request_id;
  std::optional<int64_t> sweep_id;  // none: every sweep
  bool operator==(const QuerySweeps&) const = default;
};

// SWEEPS and TRIALS carry the store's rows (common/rows.h): one type per
// table from SQLite to the wire.
struct Sweeps {
  std::string request_id;
  std::vector<SweepRow> sweeps;
  bool operator==(const Sweeps&) const = default;
};

// QUERY_TRIALS is paged (docs/protocol.md): trials with index above
// `after_index`, at most `limit` of them, in index order.
inline constexpr int64_t kTrialsPageDefault = 1000;
inline constexpr int64_t kTrialsPageMax = 10000;
// The first page: below every index, the negative ones of a warm start's
// imported trials (issue 28) included.
inline constexpr int64_t kFromFirstTrial = INT64_MIN;

struct QueryTrials {
  std::string request_id;
  int64_t sweep_id = 0;
  int64_t after_index = kFromFirstTrial;  // optional on the wire; absent: from the first trial
  int64_t limit = kTrialsPageDefault;  // optional on the wire; 1..kTrialsPageMax
  bool operator==(const QueryTrials&) const = default;
};

struct Trials {
  std::string request_id;
  std::vector<TrialRow> trials;
  // Set when more trials may follow: ask again with after_index = this
  // (the last index of this page). Optional on the wire.
  std::optional<int64_t> next_after_index;
  bool operator==(const Trials&) const = default;
};

// How long an agent that went away stays in the live view of QUERY_AGENTS
// (and of `swept agents --db`): the scheduler's default (--agent-display-s).
inline constexpr int kAgentDisplaySeconds = 600;

struct QueryAgents {
  std::string request_id;
  // false: the live view (alive agents, and those gone for less than the
  // scheduler's display window); true: every agent the database keeps.
  bool all = false;
  bool operator==(const QueryAgents&) const = default;
};

// AGENTS carries the store's agent rows (common/rows.h: AgentRow, with
// what runs on each agent as AgentTrial).
using swept::AgentTrial;

struct Agents {
  std::string request_id;
  std::vector<AgentRow> agents;
  bool operator==(const Agents&) const = default;
};

// Lifts an agent's quarantine (`swept agents --release NAME`); answered DONE.
struct ReleaseAgent {
  std::string request_id;
  std::string name;
  bool operator==(const ReleaseAgent&) const = default;
};

// ---- the message and its codec ---------------------------------------------

using Message = std::variant<Register, RegisterAck, RegisterReject, Heartbeat, StartTrial, StopTrial,
                             TrialStarted, Metrics, TrialExited, ExitAck, Disconnect, Error, Submit,
                             Submitted, Cancel, Retry, Done, QuerySweeps, Sweeps, QueryTrials, Trials,
                             QueryAgents, Agents, ReleaseAgent, CheckpointPull, CheckpointPart>;

// The kind frame of a message: "REGISTER", "TRIAL_EXITED", ...
const char* kind_name(const Message& message);

using Frames = std::vector<std::string>;

// Three frames: `protocol_id` (kProtocolId; kPreviousProtocolId only to
// refuse such a peer), kind_name(message), the JSON body; a CHECKPOINT_PART
// with data has a fourth, its raw bytes (docs/protocol.md, "Frames"). Never fails.
Frames encode(const Message& message, std::string_view protocol_id = kProtocolId);

enum class DecodeFailure {
  kNone,
  kNotSwept,     // frame 0 is not a swept protocol id: drop it
  kVersion,      // "swept/N" with another N
  kUnknownKind,  // frame 1 names no message
  kMalformed,    // wrong frame count, bad JSON, missing or mistyped field
};

struct Decoded {
  std::optional<Message> message;  // set exactly when failure == kNone
  DecodeFailure failure = DecodeFailure::kNone;
  std::string error;       // what was wrong, naming the field ("METRICS.records[2][0]: expected an integer")
  std::string kind;        // frame 1 as received (may be empty)
  std::string request_id;  // the body's request_id when it could be read, so errors can be answered
  bool ok() const { return failure == DecodeFailure::kNone; }
};

// Decodes frames (the routing id already removed). Never throws.
Decoded decode(const Frames& frames);

// JSON forms of the query rows, shared by the CLI's --json output and the
// codec so that `swept trials --json` prints what the protocol carries.
// {"queued": n, "running": n, ...}: every trial state, zeros included.
nlohmann::json counts_json(const StateCounts& counts);
// The one JSON shape of a sweep summary: the SWEEPS reply's and the
// dashboard API's (docs/api.md, GET /api/sweeps) alike.
nlohmann::json to_json(const SweepRow& s);
nlohmann::json to_json(const TrialRow& t);
nlohmann::json to_json(const AgentRow& a);

}  // namespace swept::protocol
