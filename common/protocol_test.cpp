// Tests of the protocol codec: every message kind goes through encode() and
// decode() and comes back equal; malformed, unknown and foreign messages are
// refused with the failure the protocol prescribes and a message naming the
// field.
#include "common/protocol.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace swept::protocol;
using nlohmann::json;

namespace {

TrialExited sample_exit() {
  TrialExited e;
  e.trial_id = 17;
  e.attempt = 2;
  e.cause = ExitCause::kSignaled;
  e.signal = 9;
  e.reason = "killed by signal 9";
  e.ended_at = 1763762100.25;
  e.last_seq = 40;
  e.started_at = 1763762090.5;
  return e;
}

// All the messages of the protocol, with their fields set to non-default values.
std::vector<Message> every_message() {
  std::vector<Message> all;
  Register reg;
  reg.name = "gpu-node-3";
  reg.host = "gpu-node-3.example";
  reg.session = "0123456789abcdef";
  reg.pid = 4211;
  reg.slots = 4;
  reg.gpus = {{0, "GPU-aaaa", "NVIDIA H100", 85899345920}, {1, "GPU-bbbb", "NVIDIA H100", 85899345920}};
  reg.running = {{17, 1, 5120, 1763762000.5}};
  reg.finished = {sample_exit()};
  reg.features = {"start_after"};
  all.push_back(reg);
  reg.healthy = false;  // the optional self-check (issue 15)
  reg.health = "cannot write /srv/swept: No space left on device";
  all.push_back(reg);
  reg.draining = true;  // an agent that drains and registers again (version 2)
  all.push_back(reg);
  reg.containment = "cgroup";  // optional: how the agent contains its trials
  all.push_back(reg);
  reg.addr = "10.1.2.3";  // optional: multi-node trials (issue 25)
  reg.ports_lo = 29500;
  reg.ports_hi = 29999;
  reg.features = {"start_after", "gang"};
  all.push_back(reg);
  all.push_back(RegisterAck{"0123456789abcdef", 250, 4, {{17, 1, 12}, {18, 3, 0}}});
  all.push_back(RegisterAck{"0123456789abcdef", 250, 4, {}, 2000});
  TrialExited diverged = sample_exit();  // a trial that reported "diverged": true
  diverged.diverged = true;
  all.push_back(diverged);  // with a lease (optional field)
  all.push_back(RegisterReject{"duplicate_name", "agent gpu-node-3 is already connected", 5000});
  all.push_back(Heartbeat{});
  Heartbeat with_acks;
  with_acks.acked = {{5, 1, 99}};
  all.push_back(with_acks);
  all.push_back(Heartbeat{{}, true, ""});
  all.push_back(Heartbeat{{}, true, "", /*draining=*/true});
  Heartbeat servers_left;  // issue 30: nodes whose workers ended while their servers run
  servers_left.workers_ended = {{17, 2}, {18, 1}};
  all.push_back(servers_left);
  StartTrial st;
  st.trial_id = 17;
  st.attempt = 2;
  st.sweep_id = 3;
  st.argv = {"swept-train", "--lr=0.1", "--hidden=64"};
  st.env = {{"SWEPT_SWEEP_ID", "3"}, {"SWEPT_TRIAL_ID", "17"}, {"SWEPT_PARAMS", "{\"lr\":0.1}"}};
  st.params = json{{"lr", 0.1}, {"opt", {{"name", "adam"}}}};
  st.workdir = "sweep-3/trial-17";
  st.gpus = {2, 3};
  st.gpu_fraction = 0.4;
  st.timeout_s = 60;
  all.push_back(st);
  st.attempt = 1;
  st.after_trial_id = 16;  // waits for trial 16, attempt 3, to end
  st.after_attempt = 3;
  all.push_back(st);
  st.after_trial_id = 0;
  st.after_attempt = 0;
  st.gang = Gang{4, 2, 8, "10.1.2.3", 29517};  // node 2 of a 4-node trial (issue 25)
  all.push_back(st);
  // Issue 30: the whole cluster, two workers' nodes of 2 processes and a
  // server on a node of its own (node_rank 2, past the workers' nodes).
  st.gang = Gang{2, 2, 2, "10.1.2.3", 29517, {"10.1.2.3", "10.1.2.4", "10.1.2.5"}, {29518, 29519, 29500, 29501},
                 {2}, {29500}};
  all.push_back(st);
  st.gang.reset();
  st.limits = TrialLimits{int64_t{8} << 30, 4096, 2};  // resources.memory, pids, cpus (optional)
  all.push_back(st);
  st.limits = TrialLimits{0, 64, 0};  // only some of them
  all.push_back(st);
  st.limits = TrialLimits{};
  st.checkpoint = CheckpointSegment{};  // a pbt member's first segment: an empty directory of its own
  all.push_back(st);
  st.checkpoint = CheckpointSegment{12, 3};  // its next: a copy of trial 12's third segment (issue 29)
  all.push_back(st);
  st.checkpoint = CheckpointSegment{12, 3, "gpu-node-2"};  // held by another agent: pulled first
  all.push_back(st);
  st.checkpoint.reset();
  all.push_back(StopTrial{17, 2, "cancelled by the user"});
  // Moving a checkpoint between agents (issue 29): the manifest, then bytes
  // (every length mod 3, for base64's padding, and bytes above 127).
  all.push_back(CheckpointPull{17, 3, 0, 12, 2, "", 0});
  all.push_back(CheckpointPull{17, 3, 5, 12, 2, "model/weights.bin", 4194304});
  all.push_back(CheckpointPart{17, 3, 12, 2, "", 0, "", {{"ckpt.bin", 10485760, 4294967295u}, {"sub/x", 0, 0}}, ""});
  all.push_back(CheckpointPart{17, 3, 12, 2, "", 0, "", {}, ""});
  for (std::string data : {std::string("a"), std::string("ab"), std::string("abc"), std::string("\xff\x00\x80\x01", 4)})
    all.push_back(CheckpointPart{17, 3, 12, 2, "ckpt.bin", 7, data, {}, ""});
  all.push_back(CheckpointPart{17, 3, 12, 2, "ckpt.bin", 0, "", {}, "agent a2 that holds it is not connected"});
  all.push_back(TrialStarted{17, 2, 5120, 1763762000.5, "/var/swept/sweep-3/trial-17", {{"CUDA_VISIBLE_DEVICES", "2,3"}}});
  all.push_back(TrialStarted{17, 2, 5121, 1763762000.5, "/var/swept/sweep-3/trial-17", {}});  // a gang's node 1
  Metrics m;
  m.trial_id = 17;
  m.attempt = 2;
  m.seq = 12;
  m.records = {{100, "loss", 0.41}, {100, "lr", 0.1}, {200, "loss", -3.5e-7}};
  m.log = "epoch 1\nünïcode ok\n";
  m.log_dropped = 1234;
  all.push_back(m);
  all.push_back(sample_exit());
  TrialExited launch_failed;
  launch_failed.trial_id = 4;
  launch_failed.attempt = 1;
  launch_failed.cause = ExitCause::kLaunchFailed;
  launch_failed.exit_code = 127;
  launch_failed.timed_out = false;
  launch_failed.reason = "no such command: frobnicate";
  launch_failed.ended_at = 1.5;
  all.push_back(launch_failed);
  launch_failed.host_fault = true;  // the host's fault, not the trial's
  launch_failed.exit_code.reset();
  launch_failed.reason = "cannot create the trial directory /w/sweep-1: No space left on device";
  all.push_back(launch_failed);
  all.push_back(ExitAck{17, 2});
  all.push_back(Disconnect{"shutting down"});
  all.push_back(Error{"r1", "malformed", "METRICS.seq: missing"});
  all.push_back(Submit{"r2", "{\"method\": \"grid\"}", "grid.json"});
  all.push_back(Submitted{"r2", 3, 12});
  all.push_back(Submitted{"r3", 4, std::nullopt});
  // Warm starts (issue 28): the sweep to seed from, the file's trials, the summary.
  all.push_back(Submit{"r2w", "{}", "w.json", 7,
                       std::vector<WarmTrial>{{{{"lr", 0.1}, {"opt", {{"name", "adam"}}}}, 0.25, "runs.csv, row 2", true},
                                              {{{"lr", 0.2}}, std::nullopt, "runs.csv, row 3", false}}});
  all.push_back(Submit{"r2e", "{}", "w.json", std::nullopt, std::vector<WarmTrial>{}});
  all.push_back(Submitted{"r3w", 5, 4, "1 of 2 earlier trials fit; 1 skipped: ..."});
  all.push_back(Cancel{"r4", 3, std::nullopt});
  all.push_back(Cancel{"r5", std::nullopt, 17});
  all.push_back(Retry{"r6", 3});
  all.push_back(Done{"r6", "requeued 2 failed trials", 2});
  all.push_back(QuerySweeps{"r7", std::nullopt});
  all.push_back(QuerySweeps{"r8", 3});
  swept::SweepRow s;
  s.id = 3;
  s.name = "mnist";
  s.method = "grid";
  s.state = swept::SweepState::kRunning;
  s.metric_name = "val_loss";
  s.metric_goal = "minimize";
  s.total_trials = 12;
  s.created_at = 1763762000;
  s.counts.n = {1, 2, 3, 4, 5, 6};
  s.best = swept::BestTrial{17, 0.12, json{{"lr", 0.1}}};
  swept::SweepRow empty;
  empty.id = 4;
  empty.name = "";
  empty.method = "random";
  empty.state = swept::SweepState::kCompleted;
  empty.finished_at = 1763762999.0;
  swept::SweepRow missing = s;  // a metric no trial reports (optional field)
  missing.best.reset();
  missing.metric_missing = swept::MetricMissing{4, {"loss", "validation_loss"}};
  all.push_back(Sweeps{"r8", {s, empty, missing}});
  all.push_back(QueryTrials{"r9", 3});
  all.push_back(QueryTrials{"r9b", 3, 999, 50});  // the page after index 999
  swept::TrialRow t;
  t.id = 17;
  t.sweep_id = 3;
  t.index = 5;
  t.state = swept::TrialState::kCompleted;
  t.attempts = 2;
  t.agent = "gpu-node-3";
  t.gpus = {2, 3};
  t.exit_code = 0;
  t.reason = "exit code 0";
  t.metric_value = 0.12;
  t.params = json{{"lr", 0.1}};
  t.command = {"swept-train", "--lr=0.1"};
  t.started_at = 10.0;
  t.ended_at = 20.0;
  t.latest = {{"loss", 0.1}, {"val_loss", 0.12}};
  t.suggestion = json{{"method", "tpe"}, {"mode", "model"}, {"n_finished", 12}};
  swept::TrialRow queued;
  queued.id = 18;
  queued.sweep_id = 3;
  queued.state = swept::TrialState::kQueued;
  queued.params = json::object();
  swept::TrialRow stopped = queued;
  stopped.id = 19;
  stopped.state = swept::TrialState::kEarlyStopped;
  stopped.stop = swept::TrialStop{"hyperband", 9, 9, 1.5, std::nullopt, "hyperband: band 9, ...: stop", 30.0};
  all.push_back(Trials{"r9", {t, queued, stopped}, std::nullopt});
  all.push_back(Trials{"r9b", {t}, 5});
  swept::TrialRow gang = t;  // a multi-node trial's nodes (optional field, issue 25)
  gang.nodes = {{"gpu-node-3", {2, 3}}, {"gpu-node-4", {0, 1}}};
  all.push_back(Trials{"r9c", {gang}, std::nullopt});
  swept::TrialRow member = t;  // a pbt member's schedule (optional field, issue 29)
  member.schedule = {{0, 0, std::nullopt, std::nullopt, json{{"lr", 0.1}}, {}},
                     {1, 100, 12, 1, json{{"lr", 0.24}}, {"lr: 0.2 -> 0.24 (x1.2)"}}};
  all.push_back(Trials{"r9d", {member}, std::nullopt});
  all.push_back(Retry{"r11", 3, true});
  all.push_back(Retry{"r12", 3, false});
  all.push_back(QueryAgents{"r10"});
  swept::AgentRow a;
  a.name = "gpu-node-3";
  a.host = "gpu-node-3.example";
  a.state = swept::AgentState::kAlive;
  a.slots = 4;
  a.last_seen = 1763762000.75;
  a.gpus = {{0, "GPU-aaaa", "NVIDIA H100", 85899345920}};
  a.running = {{17, {0}, std::nullopt, 0}, {18, {0}, 0.4, 0}};
  all.push_back(QueryAgents{"r11", true});
  swept::AgentRow q = a;
  q.name = "bad-disk";
  q.quarantine = "3 host faults in a row: cannot create the trial directory";
  q.containment = "subreaper";
  all.push_back(Agents{"r10", {a, q}});
  all.push_back(ReleaseAgent{"r12", "bad-disk"});
  return all;
}

Frames frames_of(std::string kind, std::string body) { return {std::string(kProtocolId), std::move(kind), std::move(body)}; }

}  // namespace

TEST_CASE("every message kind survives encode then decode") {
  std::set<std::string> kinds;
  for (const Message& original : every_message()) {
    Frames frames = encode(original);
    const auto* part = std::get_if<CheckpointPart>(&original);
    REQUIRE(frames.size() == (part && !part->data.empty() ? 4u : 3u));  // a part's bytes: a 4th frame
    CHECK(frames[0] == "swept/2");
    CHECK(frames[1] == kind_name(original));
    Decoded d = decode(frames);
    INFO(frames[1] << " " << frames[2] << " -> " << d.error);
    REQUIRE(d.ok());
    CHECK(*d.message == original);
    kinds.insert(frames[1]);
  }
  // One of each of the kinds docs/protocol.md defines.
  CHECK(kinds.size() == std::variant_size_v<Message>);
}

TEST_CASE("TRIAL_STARTED without an environment (a gang's node other than 0) leaves `env` out") {
  Frames frames = encode(TrialStarted{17, 2, 5121, 1.5, "w", {}});
  REQUIRE(frames.size() == 3);
  CHECK(frames[2].find("env") == std::string::npos);
  Decoded d = decode(frames);
  REQUIRE(d.ok());
  CHECK(std::get<TrialStarted>(*d.message).env.empty());
}

TEST_CASE("a checkpoint part's bytes travel as a frame of their own, or as base64 in the body for older agents") {
  const std::string bytes("\xff\x00\x80{\"x\"}\n", 9);
  CheckpointPart part{17, 3, 12, 2, "ckpt.bin", 4194304, bytes, {}, ""};
  Frames frames = encode(part);
  REQUIRE(frames.size() == 4);
  CHECK(frames[3] == bytes);  // as they are: nothing to encode or decode on the way
  CHECK(frames[2].find("data") == std::string::npos);
  Decoded d = decode(frames);
  REQUIRE(d.ok());
  CHECK(std::get<CheckpointPart>(*d.message) == part);
  // For an agent without the checkpoint_frames feature: base64 in the body,
  // three frames; read back the same (and sent on as a frame, the default).
  part.data_in_body = true;
  Frames old = encode(part);
  REQUIRE(old.size() == 3);
  CHECK(old[2].find("\"data\":\"/wCAeyJ4In0K\"") != std::string::npos);
  d = decode(old);
  REQUIRE(d.ok());
  CHECK(std::get<CheckpointPart>(*d.message).data == bytes);
  CHECK(!std::get<CheckpointPart>(*d.message).data_in_body);
  // A fourth frame anywhere else, or one the part cannot have, is malformed.
  auto refused = [](Frames f) {
    Decoded r = decode(f);
    CHECK(r.failure == DecodeFailure::kMalformed);
    return r.error;
  };
  Frames manifest = encode(CheckpointPart{17, 3, 12, 2, "", 0, "", {{"a", 1, 2}}, ""});
  manifest.push_back("x");
  CHECK(refused(manifest) ==
        "CHECKPOINT_PART: a data frame belongs to a part of a file, not to a manifest or an error");
  Frames both = old;
  both.push_back(bytes);
  CHECK(refused(both) == "CHECKPOINT_PART: data both in the body and in a frame");
  Frames empty = frames;
  empty[3].clear();
  CHECK(refused(empty) == "CHECKPOINT_PART: an empty data frame (a part without bytes has none)");
  Frames big = frames;
  big[3].assign(static_cast<size_t>(kCheckpointPartBytes) + 1, 'x');
  CHECK(refused(big) == "CHECKPOINT_PART: the data frame holds more than 4194304 bytes");
  CHECK(refused({"swept/2", "HEARTBEAT", "{}", "x"}) == "expected 3 frames (protocol, kind, body), got 4");
}

TEST_CASE("request ids are readable even when the body is refused") {
  Decoded d = decode(frames_of("SUBMIT", R"({"request_id": "abc", "spec": 5})"));
  CHECK(d.failure == DecodeFailure::kMalformed);
  CHECK(d.request_id == "abc");
  CHECK(d.error == "SUBMIT.spec: expected a string, found an integer");
}

TEST_CASE("malformed messages name the field") {
  struct Case {
    Frames frames;
    DecodeFailure failure;
    std::string error;
  };
  const Case cases[] = {
      {{"swept/2", "HEARTBEAT"}, DecodeFailure::kMalformed, "expected 3 frames (protocol, kind, body), got 2"},
      {frames_of("HEARTBEAT", "not json"), DecodeFailure::kMalformed, "HEARTBEAT: the body is not a JSON object"},
      {frames_of("HEARTBEAT", "[1,2]"), DecodeFailure::kMalformed, "HEARTBEAT: the body is not a JSON object"},
      {frames_of("METRICS", R"({"trial_id":1,"attempt":1,"records":[]})"), DecodeFailure::kMalformed,
       "METRICS.seq: missing"},
      {frames_of("METRICS", R"({"trial_id":1,"attempt":1,"seq":1,"records":[[1,"loss"]]})"),
       DecodeFailure::kMalformed, "METRICS.records[0]: expected [step, name, value], found an array"},
      {frames_of("METRICS", R"({"trial_id":1,"attempt":1,"seq":1,"records":[[-1,"loss",1]]})"),
       DecodeFailure::kMalformed, "METRICS.records[0][0]: step must be 0 or more"},
      {frames_of("METRICS", R"({"trial_id":1,"attempt":1,"seq":1,"records":[[1,"loss","x"]]})"),
       DecodeFailure::kMalformed, "METRICS.records[0][2]: expected a number, found a string"},
      {frames_of("TRIAL_EXITED", R"({"trial_id":1,"attempt":1,"cause":"boom","ended_at":1})"),
       DecodeFailure::kMalformed,
       "TRIAL_EXITED.cause: unknown exit cause \"boom\" (expected exited, signaled, timeout, launch_failed, stopped, "
       "agent_shutdown or not_running)"},
      {frames_of("REGISTER", R"({"name":"a","host":"h","session":"s","pid":1,"slots":1,"gpus":[{"index":"0"}],"running":[],"finished":[]})"),
       DecodeFailure::kMalformed, "REGISTER.gpus[0].index: expected an integer, found a string"},
      {frames_of("START_TRIAL",
                 R"({"trial_id":1,"attempt":1,"sweep_id":1,"argv":["x"],"workdir":"w","checkpoint":{"segments":true,"from":[0,2]}})"),
       DecodeFailure::kMalformed, "START_TRIAL.checkpoint.from: the trial id and attempt must be positive"},
      {frames_of("CHECKPOINT_PULL", R"({"trial_id":1,"attempt":2,"from":[3,1],"path":"../../etc/passwd","offset":0})"),
       DecodeFailure::kMalformed, "CHECKPOINT_PULL.path: '../../etc/passwd' is not a relative path inside the checkpoint"},
      {frames_of("CHECKPOINT_PULL", R"({"trial_id":1,"attempt":2,"from":[3,1],"path":"/etc/passwd","offset":0})"),
       DecodeFailure::kMalformed, "CHECKPOINT_PULL.path: '/etc/passwd' is not a relative path inside the checkpoint"},
      {frames_of("CHECKPOINT_PULL", R"({"trial_id":1,"attempt":2,"from":[3,0],"path":"","offset":0})"),
       DecodeFailure::kMalformed, "CHECKPOINT_PULL: trial ids and attempts must be positive"},
      {frames_of("CHECKPOINT_PART", R"({"trial_id":1,"attempt":2,"from":[3,1],"path":"","offset":0,"files":[["a/./b",1,2]]})"),
       DecodeFailure::kMalformed, "CHECKPOINT_PART.files[0][0]: 'a/./b' is not a relative path inside the checkpoint"},
      {frames_of("CHECKPOINT_PART", R"({"trial_id":1,"attempt":2,"from":[3,1],"path":"a","offset":0,"data":"YW=j"})"),
       DecodeFailure::kMalformed, "CHECKPOINT_PART.data: expected base64 text, found a string"},
      {frames_of("START_TRIAL", R"({"trial_id":1,"attempt":1,"sweep_id":1,"argv":[],"workdir":"w"})"),
       DecodeFailure::kMalformed, "START_TRIAL.argv: must not be empty"},
      {frames_of("START_TRIAL", R"({"trial_id":2,"attempt":1,"sweep_id":1,"argv":["x"],"workdir":"w","after":[1]})"),
       DecodeFailure::kMalformed, "START_TRIAL.after: expected [trial_id, attempt], found an array"},
      {frames_of("START_TRIAL", R"({"trial_id":2,"attempt":1,"sweep_id":1,"argv":["x"],"workdir":"w","after":[0,1]})"),
       DecodeFailure::kMalformed, "START_TRIAL.after: the trial id must be positive"},
      {frames_of("START_TRIAL", R"({"trial_id":2,"attempt":1,"sweep_id":1,"argv":["x"],"workdir":"w",)"
                                R"("gang":{"nodes":2,"node_rank":2,"procs_per_node":1,"master_addr":"h","master_port":1}})"),
       DecodeFailure::kMalformed, "START_TRIAL.gang.node_rank: must be 0 to the number of nodes - 1"},
      {frames_of("START_TRIAL", R"({"trial_id":2,"attempt":1,"sweep_id":1,"argv":["x"],"workdir":"w",)"
                                R"("gang":{"nodes":2,"node_rank":0,"procs_per_node":1,"master_addr":"h","master_port":1,)"
                                R"("addrs":["h","i"],"worker_ports":[1],"ps_node":[],"ps_ports":[]}})"),
       DecodeFailure::kMalformed, "START_TRIAL.gang.worker_ports: must be one port per worker (nodes x procs_per_node)"},
      {frames_of("START_TRIAL", R"({"trial_id":2,"attempt":1,"sweep_id":1,"argv":["x"],"workdir":"w",)"
                                R"("gang":{"nodes":2,"node_rank":0,"procs_per_node":1,"master_addr":"h","master_port":1,)"
                                R"("addrs":["h","i"],"worker_ports":[1,2],"ps_node":[2],"ps_ports":[3]}})"),
       DecodeFailure::kMalformed, "START_TRIAL.gang.ps_node: must be indices into addrs"},
      {frames_of("START_TRIAL", R"({"trial_id":2,"attempt":1,"sweep_id":1,"argv":["x"],"workdir":"w",)"
                                R"("gang":{"nodes":2,"node_rank":0,"procs_per_node":1,"master_addr":"h","master_port":1,)"
                                R"("addrs":["h","i"],"worker_ports":[1,2],"ps_node":[1],"ps_ports":[0]}})"),
       DecodeFailure::kMalformed, "START_TRIAL.gang.ps_ports: must be ports, 1 to 65535"},
      {frames_of("HEARTBEAT", R"({"workers_ended":[[17]]})"), DecodeFailure::kMalformed,
       "HEARTBEAT.workers_ended[0]: expected [trial_id, attempt], found an array"},
      {frames_of("START_TRIAL", R"({"trial_id":2,"attempt":1,"sweep_id":1,"argv":["x"],"workdir":"w",)"
                                R"("gang":{"nodes":2,"node_rank":0,"procs_per_node":65,"master_addr":"h","master_port":1}})"),
       DecodeFailure::kMalformed, "START_TRIAL.gang.procs_per_node: must be 1 to 64"},
      {frames_of("CANCEL", R"({"request_id":"r","sweep_id":1180591620717411303424})"), DecodeFailure::kMalformed,
       "CANCEL.sweep_id: expected an integer, found an integer too large (at most 2^53 in magnitude)"},
      {frames_of("CANCEL", R"({"request_id":"r","sweep_id":18446744073709551615})"), DecodeFailure::kMalformed,
       "CANCEL.sweep_id: expected an integer, found an integer too large (at most 2^63 - 1)"},
      {frames_of("CANCEL", R"({"request_id":"r","sweep_id":1.5})"), DecodeFailure::kMalformed,
       "CANCEL.sweep_id: expected an integer, found a fractional number"},
      {frames_of("CANCEL", R"({"request_id":"r"})"), DecodeFailure::kMalformed,
       "CANCEL: exactly one of sweep_id and trial_id must be given"},
      {frames_of("ATTACK", "{}"), DecodeFailure::kUnknownKind, "unknown message kind \"ATTACK\""},
      {{"swept/1", "HEARTBEAT", "{}"}, DecodeFailure::kVersion,
       "protocol version \"swept/1\" is not supported; this peer speaks swept/2: use the same swept version on both sides"},
      {frames_of("HEARTBEAT", R"({"draining": "yes"})"), DecodeFailure::kMalformed,
       "HEARTBEAT.draining: expected true or false, found a string"},
      {frames_of("REGISTER", R"({"name":"a","host":"h","session":"s","pid":1,"slots":1,"gpus":[],"running":[],"finished":[],"containment":1})"),
       DecodeFailure::kMalformed, "REGISTER.containment: expected a string, found an integer"},
      {frames_of("REGISTER", R"({"name":"a","host":"h","session":"s","pid":1,"slots":1,"gpus":[],"running":[],"finished":[],"containment":""})"),
       DecodeFailure::kMalformed, "REGISTER.containment: expected a containment mode name of 1 to 64 bytes, found a string"},
      {{"GET / HTTP/1.1"}, DecodeFailure::kNotSwept, "not a swept message (frame 0 is \"GET / HTTP/1.1\")"},
      {{}, DecodeFailure::kNotSwept, "empty message"},
  };
  for (const Case& c : cases) {
    Decoded d = decode(c.frames);
    INFO(d.error);
    CHECK_FALSE(d.ok());
    CHECK_FALSE(d.message.has_value());
    CHECK(d.failure == c.failure);
    CHECK(d.error == c.error);
  }
}

TEST_CASE("unknown fields are ignored and optional fields default") {
  Decoded d = decode(frames_of("HEARTBEAT", R"({"future_field": [1, 2, 3]})"));
  REQUIRE(d.ok());
  CHECK(std::get<Heartbeat>(*d.message).acked.empty());
  d = decode(frames_of("TRIAL_EXITED", R"({"trial_id":3,"attempt":1,"cause":"exited","exit_code":0,"ended_at":2.5})"));
  REQUIRE(d.ok());
  const auto& e = std::get<TrialExited>(*d.message);
  CHECK(e.exit_code == 0);
  CHECK_FALSE(e.signal.has_value());
  CHECK(e.last_seq == 0);
  CHECK_FALSE(e.timed_out);
  // A REGISTER without `containment` (an agent that does not say) reads as "".
  d = decode(frames_of("REGISTER", R"({"name":"a","host":"h","session":"s","pid":1,"slots":1,"gpus":[],"running":[],"finished":[]})"));
  REQUIRE(d.ok());
  CHECK(std::get<Register>(*d.message).containment.empty());
  CHECK(json::parse(encode(std::get<Register>(*d.message))[2]).count("containment") == 0);
}

TEST_CASE("invalid UTF-8 in a log chunk is replaced, not thrown") {
  Metrics m;
  m.trial_id = 1;
  m.attempt = 1;
  m.seq = 1;
  m.log = std::string("bad \xff\xfe bytes\n");
  Frames f = encode(m);
  Decoded d = decode(f);
  REQUIRE(d.ok());
  CHECK(std::get<Metrics>(*d.message).log.find("bytes") != std::string::npos);
}

TEST_CASE("random bytes never crash the decoder") {
  uint64_t x = 88172645463325252ull;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  const std::vector<std::string> kinds = {"REGISTER", "METRICS", "TRIAL_EXITED", "START_TRIAL", "TRIALS", "SWEEPS"};
  for (int i = 0; i < 2000; ++i) {
    // Take a valid body and flip a few bytes.
    Message msg = every_message()[next() % every_message().size()];
    Frames f = encode(msg);
    for (int k = 0; k < 3; ++k) f[2][next() % f[2].size()] = static_cast<char>(next() & 0xff);
    Decoded d = decode(f);
    CHECK((d.ok() || !d.error.empty()));
  }
}
