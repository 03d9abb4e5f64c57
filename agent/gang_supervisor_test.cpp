// Tests of GangSupervisor (one node of a multi-node trial) with real
// processes: small shell scripts as the node's processes, the agent's real
// containment, and waits on events (pipes, pidfds, deadlines) only.
#include "agent/gang_supervisor.h"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "agent/test_util.h"
#include "common/testing/eventually.h"
#include "common/testing/loopback.h"

using namespace swept;
using namespace swept::agent;
using swept::agent::testing::read_file;
using swept::agent::testing::TempDir;
using swept::testing::free_port;

namespace {

// One node, driven as the agent's loop drives it.
struct Node {
  TempDir root;
  PosixLauncher launcher;
  std::unique_ptr<Containment> containment;
  std::unique_ptr<GangSupervisor> sup;
  std::vector<MetricPoint> metrics;
  std::string log;

  void start(const TrialLaunch& launch, const protocol::Gang& gang, int grace_ms = 10000) {
    auto made = Containment::create("auto");
    REQUIRE(made.ok());
    containment = std::move(*made);
    SupervisorOptions options;
    options.workdir_root = root.path();
    options.stop_grace_ms = grace_ms;
    options.containment = containment.get();
    sup = GangSupervisor::start(launch, gang, "lo", options, launcher, SteadyClock::instance());
  }
  void step(int wait_ms) {
    int64_t until = sup->next_deadline_ms() - SteadyClock::instance().now_ms();
    swept::agent::testing::poll_readable(sup->poll_fds(), static_cast<int>(std::clamp<int64_t>(until, 0, wait_ms)));
    sup->service();
    for (auto& m : sup->take_metrics()) metrics.push_back(m);
    log += sup->take_log().text;
  }
  bool run_until(const std::function<bool()>& done, int timeout_ms = 20000) {
    return swept::testing::eventually([&] { return done() || (step(100), done()); }, timeout_ms / 1000.0,
                                      swept::agent::testing::kNoPause);
  }
  bool run_to_end() {
    return run_until([this] { return sup->finished(); });
  }
  std::string file(const std::string& name) { return read_file(sup->working_dir() + "/" + name); }
};

TrialLaunch shell(const std::string& script) {
  TrialLaunch l;
  l.sweep_id = 1;
  l.trial_id = 9;
  l.workdir = "sweep-1/trial-9";
  l.argv = {"/bin/sh", "-c", script};
  return l;
}

protocol::Gang gang(int nodes, int node_rank, int procs, int port = 1) {
  protocol::Gang g;
  g.nodes = nodes;
  g.node_rank = node_rank;
  g.procs_per_node = procs;
  g.master_addr = "127.0.0.1";
  g.master_port = port;  // node 0 checks it: the tests of node 0 pass a free one
  return g;
}

// "NAME=VALUE" lines into a map.
std::map<std::string, std::string> env_file(const std::string& text) {
  std::map<std::string, std::string> m;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

// The pids a node's processes wrote, one per line, in files named `prefix`N.
std::vector<pid_t> pids_in(Node& n, const std::string& prefix, int count) {
  std::vector<pid_t> pids;
  for (int i = 0; i < count; ++i) {
    std::string text = n.file(prefix + std::to_string(i));
    std::istringstream in(text);
    for (pid_t p; in >> p;) pids.push_back(p);
  }
  return pids;
}

bool all_gone(const std::vector<pid_t>& pids) {
  return swept::testing::eventually(
      [&] {
        return std::none_of(pids.begin(), pids.end(), [](pid_t p) { return process_alive(p); });
      },
      10, std::chrono::milliseconds(10));
}

}  // namespace

TEST_CASE("gang supervisor: each process of a node gets torchrun's environment, all the GPUs and its own logs") {
  Node n;
  TrialLaunch l = shell(
      "env | grep -E '^(MASTER_|WORLD_SIZE|RANK|LOCAL_|GROUP_|SWEPT_NODE|GLOO_|NCCL_|CUDA_VISIBLE)' > env-$RANK; "
      "echo out-$RANK; echo err-$RANK >&2");
  l.gpu_indices = {0, 2};
  n.start(l, gang(2, 1, 3));  // node 1 of 2: ranks 3, 4, 5
  REQUIRE(n.run_to_end());
  CHECK(n.sup->result().end == TrialEnd::kExited);
  CHECK(n.sup->result().exit_code == 0);
  REQUIRE(n.sup->processes() == 3);
  for (int local = 0; local < 3; ++local) {
    const int rank = 3 + local;
    auto env = env_file(n.file("env-" + std::to_string(rank)));
    std::map<std::string, std::string> want = {
        {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"},       {"WORLD_SIZE", "6"},
        {"RANK", std::to_string(rank)}, {"LOCAL_RANK", std::to_string(local)}, {"LOCAL_WORLD_SIZE", "3"},
        {"GROUP_RANK", "1"},          {"GROUP_WORLD_SIZE", "2"},  {"SWEPT_NODES", "2"},
        {"SWEPT_NODE_RANK", "1"},     {"GLOO_SOCKET_IFNAME", "lo"}, {"NCCL_SOCKET_IFNAME", "lo"},
        {"CUDA_VISIBLE_DEVICES", "0,2"}};
    CHECK(env == want);
    CHECK(n.file("rank-" + std::to_string(rank) + ".stdout.log") == "out-" + std::to_string(rank) + "\n");
    CHECK(n.file("rank-" + std::to_string(rank) + ".stderr.log") == "err-" + std::to_string(rank) + "\n");
  }
  CHECK_FALSE(std::filesystem::exists(n.sup->working_dir() + "/stdout.log"));
  // What TRIAL_STARTED reports: local rank 0's environment and pid.
  std::map<std::string, std::string> reported(n.sup->environment().begin(), n.sup->environment().end());
  CHECK(reported["RANK"] == "3");
  CHECK(n.sup->pid() == n.sup->process(0).pid());
  // Every process's output is the trial's log.
  for (const char* line : {"out-3\n", "out-5\n", "err-4\n"}) CHECK(n.log.find(line) != std::string::npos);
}

TEST_CASE("gang supervisor: only the process with RANK 0 has its metric lines read") {
  Node n;
  n.start(shell("echo \"{\\\"step\\\": 1, \\\"r\\\": $RANK}\"; cat swept-params.json"), gang(1, 0, 3, free_port()));
  REQUIRE(n.run_to_end());
  CHECK(n.sup->result().exit_code == 0);
  CHECK(n.metrics == std::vector<MetricPoint>{{1, "r", 0}});
  // The others' metric lines are log, and in their own stdout logs.
  CHECK(n.log.find("{\"step\": 1, \"r\": 1}") != std::string::npos);
  CHECK(n.log.find("{\"step\": 1, \"r\": 2}") != std::string::npos);
  CHECK(n.file("rank-2.stdout.log").find("{\"step\": 1, \"r\": 2}") == 0);
  // swept-params.json was there, whole, for every process.
  for (int r = 0; r < 3; ++r) CHECK(n.file("rank-" + std::to_string(r) + ".stdout.log").find("{}\n") != std::string::npos);

  Node other;  // node 1 of 2 has no RANK 0: nothing of it is metrics
  other.start(shell("echo '{\"step\": 1, \"x\": 1}'"), gang(2, 1, 2));
  REQUIRE(other.run_to_end());
  CHECK(other.metrics.empty());
  CHECK(other.log.find("\"x\": 1") != std::string::npos);
}

TEST_CASE("gang supervisor: one process exiting 1 stops the others, and its exit is the node's") {
  Node n;
  // Ranks 0 and 2 wait for ever (and ignore nothing); rank 1 fails once the others run.
  n.start(shell("echo $$ > pid-$LOCAL_RANK; "
                "if [ $LOCAL_RANK = 1 ]; then while [ ! -s pid-0 ] || [ ! -s pid-2 ]; do sleep 0.01; done; exit 1; fi; "
                "exec sleep 300"),
          gang(1, 0, 3, free_port()), /*grace_ms=*/2000);
  REQUIRE(n.run_to_end());
  const TrialResult& r = n.sup->result();
  CHECK(r.end == TrialEnd::kExited);
  CHECK(r.exit_code == 1);
  CHECK(r.reason == "rank 1: exit code 1");
  CHECK(n.log.find("rank 1 failed (exit code 1): stopping the node's other processes") != std::string::npos);
  CHECK(n.sup->process(0).result().end == TrialEnd::kStopped);
  CHECK(n.sup->process(2).result().signal == SIGTERM);
  CHECK(all_gone(pids_in(n, "pid-", 3)));
}

TEST_CASE("gang supervisor: a stop ends every process of the node and all they started, even outside their group") {
  Node n;
  // Each process leaves a grandchild in a session of its own (setsid), then waits.
  n.start(shell("setsid sleep 300 & echo $! > escaped-$LOCAL_RANK; echo $$ >> escaped-$LOCAL_RANK; "
                "echo ready-$LOCAL_RANK; exec sleep 300"),
          gang(2, 1, 3), /*grace_ms=*/300);
  REQUIRE(n.run_until([&] {
    return n.log.find("ready-0") != std::string::npos && n.log.find("ready-1") != std::string::npos &&
           n.log.find("ready-2") != std::string::npos;
  }));
  std::vector<pid_t> pids = pids_in(n, "escaped-", 3);
  REQUIRE(pids.size() == 6);
  n.sup->request_stop("stopped by the scheduler");
  CHECK(n.sup->stopping());
  REQUIRE(n.run_to_end());
  CHECK(n.sup->result().end == TrialEnd::kStopped);
  CHECK(n.sup->result().reason.find("stopped by the scheduler") == 0);
  CHECK(n.sup->live_pids().empty());
  CHECK(all_gone(pids));
}

TEST_CASE("gang supervisor: the node's timeout stops all its processes") {
  Node n;
  TrialLaunch l = shell("exec sleep 300");
  l.timeout_s = 0.2;
  n.start(l, gang(1, 0, 2, free_port()), /*grace_ms=*/300);
  REQUIRE(n.run_to_end());
  CHECK(n.sup->result().end == TrialEnd::kTimedOut);
  CHECK(n.sup->result().reason.find("timed out after 0.2 s") == 0);
}

TEST_CASE("gang supervisor: node 0 whose master_port is taken fails at once, the host's fault, naming the port") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const int port = ntohs(a.sin_port);

  Node n;
  n.start(shell("echo ran > ran-$RANK"), gang(2, 0, 2, port));
  REQUIRE(n.run_to_end());
  ::close(fd);
  const TrialResult& r = n.sup->result();
  CHECK(r.end == TrialEnd::kLaunchFailed);
  CHECK(r.host_fault);
  CHECK(r.reason.find("master_port " + std::to_string(port) + " cannot be bound") == 0);
  CHECK(n.sup->processes() == 0);  // nothing started
  CHECK_FALSE(std::filesystem::exists(n.sup->working_dir() + "/ran-0"));
  CHECK(n.sup->take_log().text.find("master_port " + std::to_string(port)) != std::string::npos);  // the trial's log says it

  Node other;  // only node 0 checks: node 1 has no rendezvous to host
  other.start(shell("exit 0"), gang(2, 1, 1, port));
  REQUIRE(other.run_to_end());
  CHECK(other.sup->result().end == TrialEnd::kExited);
}

TEST_CASE("gang supervisor: a command that does not exist fails the node with 127") {
  Node n;
  TrialLaunch l;
  l.trial_id = 4;
  l.argv = {"no-such-command-swept-gang"};
  n.start(l, gang(1, 0, 2, free_port()));
  REQUIRE(n.run_to_end());
  CHECK(n.sup->result().end == TrialEnd::kLaunchFailed);
  CHECK(n.sup->result().exit_code == 127);
  CHECK(n.sup->result().reason.find("rank 0: command not found: no-such-command-swept-gang") == 0);
  CHECK(n.sup->processes() == 1);  // the others never started
}

// Two nodes of one trial on this host (as `swept run --local-agents 2` would
// place them): the four processes meet at MASTER_ADDR:MASTER_PORT with
// nothing but the environment the agent gave them, as torch.distributed's
// env:// rendezvous does. Rank 0 listens there; every other rank connects
// and sends its RANK; rank 0 reports what it heard as metrics.
TEST_CASE("gang supervisor: the processes of two nodes meet at MASTER_ADDR:MASTER_PORT from their environment") {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    MESSAGE("no /usr/bin/python3: skipped");
    return;
  }
  const std::string script = R"(
import os, socket, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if rank == 0:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("", port))
    server.listen(world)
    heard = []
    for _ in range(world - 1):
        conn, _ = server.accept()
        heard.append(int(conn.recv(16)))
        conn.close()
    print('{"ranks_heard": %d}' % len(heard), flush=True)
    print('{"rank_sum": %d}' % sum(heard), flush=True)
else:
    deadline = time.time() + 20
    while True:
        try:
            conn = socket.create_connection((addr, port))
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.02)
    conn.sendall(str(rank).encode())
    conn.close()
)";
  TrialLaunch l;
  l.trial_id = 12;
  l.argv = {"/usr/bin/python3", "-c", script};
  const int port = free_port();
  Node node0, node1;
  node0.start(l, gang(2, 0, 2, port));
  node1.start(l, gang(2, 1, 2, port));
  REQUIRE(swept::testing::eventually(
      [&] {
        if (!node0.sup->finished()) node0.step(20);
        if (!node1.sup->finished()) node1.step(20);
        return node0.sup->finished() && node1.sup->finished();
      },
      30, swept::agent::testing::kNoPause));
  INFO(node0.log, node1.log);
  CHECK(node0.sup->result().exit_code == 0);
  CHECK(node1.sup->result().exit_code == 0);
  CHECK(node0.metrics == std::vector<MetricPoint>{{0, "ranks_heard", 3}, {0, "rank_sum", 6}});  // ranks 1 + 2 + 3
  CHECK(node1.metrics.empty());
}

namespace {
// Node `node_rank` of a trial with 2 workers' nodes of `procs` workers each and
// servers placed by `ps_node` (issue 30), every port free here.
protocol::Gang ps_gang(int node_rank, int procs, std::vector<int> ps_node, int nodes = 2) {
  protocol::Gang g = gang(nodes, node_rank, procs, free_port());
  const size_t all = static_cast<size_t>(std::max(nodes, ps_node.empty() ? 0 : *std::max_element(ps_node.begin(), ps_node.end()) + 1));
  for (size_t n = 0; n < all; ++n) g.addrs.push_back("10.0.0." + std::to_string(n + 1));
  for (int r = 0; r < nodes * procs; ++r) g.worker_ports.push_back(free_port());
  for (size_t j = 0; j < ps_node.size(); ++j) g.ps_ports.push_back(free_port());
  g.ps_node = std::move(ps_node);
  return g;
}

// Each process checks its TF_CONFIG with Python's json against the gang, and
// its SWEPT_ROLE / SWEPT_ROLE_INDEX against TF_CONFIG's task; servers then
// wait to be stopped, workers print a metric line and exit 0.
const char* kTfConfigCheck = R"(
import json, os, sys, time
c = json.loads(os.environ["TF_CONFIG"])
want = json.loads(sys.argv[1])
assert c["cluster"] == want, (c["cluster"], want)
task = c["task"]
assert sorted(task) == ["index", "type"] and task["type"] in ("worker", "ps"), task
assert os.environ["SWEPT_ROLE"] == task["type"] and int(os.environ["SWEPT_ROLE_INDEX"]) == task["index"]
if task["type"] == "worker":
    assert int(os.environ["RANK"]) == task["index"]
    print('{"step": 1, "worker": %d}' % task["index"], flush=True)
    sys.exit(0)
assert "RANK" not in os.environ and "WORLD_SIZE" not in os.environ
print("server %d ready" % task["index"], flush=True)
time.sleep(300)
)";

std::string cluster_json(const protocol::Gang& g) {
  std::string w, p;
  for (size_t r = 0; r < g.worker_ports.size(); ++r)
    w += (r ? ", \"" : "\"") + g.addrs[r / static_cast<size_t>(g.procs_per_node)] + ":" + std::to_string(g.worker_ports[r]) + "\"";
  for (size_t j = 0; j < g.ps_node.size(); ++j)
    p += (j ? ", \"" : "\"") + g.addrs[static_cast<size_t>(g.ps_node[j])] + ":" + std::to_string(g.ps_ports[j]) + "\"";
  return "{\"worker\": [" + w + "]" + (p.empty() ? "" : ", \"ps\": [" + p + "]") + "}";
}
}  // namespace

TEST_CASE("gang supervisor: parameter servers run beside the workers, each role's TF_CONFIG read by Python's json") {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    MESSAGE("no /usr/bin/python3: skipped");
    return;
  }
  // Node 0 of 2, two workers (ranks 0, 1) and servers 0 and 2 of 3 (round-robin: server 1 is on node 1).
  const protocol::Gang g = ps_gang(0, 2, {0, 1, 0});
  TrialLaunch l;
  l.trial_id = 30;
  l.argv = {"/usr/bin/python3", "-c", kTfConfigCheck, cluster_json(g)};
  Node n;
  n.start(l, g, /*grace_ms=*/2000);
  REQUIRE(n.sup->processes() == 4);
  // The workers exit 0 and the servers still run: the node says so, and waits.
  REQUIRE(n.run_until([&] { return n.sup->workers_ended(); }));
  INFO(n.log);
  CHECK_FALSE(n.sup->finished());
  CHECK(n.metrics == std::vector<MetricPoint>{{1, "worker", 0}});  // worker 0's lines only
  CHECK(n.file("rank-1.stdout.log") == "{\"step\": 1, \"worker\": 1}\n");
  REQUIRE(n.run_until([&] { return n.log.find("server 2 ready") != std::string::npos; }));
  // Each server writes its own file, in its own time: server 2's line says
  // nothing of server 0's, so its file is waited for too (with the deadline).
  CHECK(n.run_until([&] { return n.file("ps-0.stdout.log") == "server 0 ready\n"; }));
  // The scheduler's stop once every worker has ended: the node completed.
  n.sup->request_stop(std::string(protocol::kWorkersEndedStop));
  CHECK_FALSE(n.sup->workers_ended());
  REQUIRE(n.run_to_end());
  CHECK(n.sup->result().end == TrialEnd::kExited);
  CHECK(n.sup->result().exit_code == 0);
  CHECK(n.sup->process(2).result().signal == SIGTERM);
  CHECK(n.log.find(std::string(protocol::kWorkersEndedStop)) != std::string::npos);

  // A server's own node (resources.ps_nodes: node 2, past the 2 workers' nodes) runs its server only.
  const protocol::Gang own = ps_gang(2, 1, {2});
  l.argv.back() = cluster_json(own);
  Node server_node;
  server_node.start(l, own, /*grace_ms=*/2000);
  REQUIRE(server_node.sup->processes() == 1);
  REQUIRE(server_node.run_until([&] { return server_node.log.find("server 0 ready") != std::string::npos; }));
  INFO(server_node.log);
  CHECK(server_node.sup->workers_ended());  // no workers of its own: nothing to wait for
  server_node.sup->request_stop(std::string(protocol::kWorkersEndedStop));
  REQUIRE(server_node.run_to_end());
  CHECK(server_node.sup->result().exit_code == 0);
}

TEST_CASE("gang supervisor: a failed parameter server fails the node, and any other stop is a stop") {
  Node n;
  // Worker 0 waits for ever; server 0 fails once it has started.
  n.start(shell("if [ \"$SWEPT_ROLE\" = ps ]; then while [ ! -s pid-w ]; do sleep 0.01; done; exit 3; fi; "
                "echo $$ > pid-w; exec sleep 300"),
          ps_gang(0, 1, {0}, 1), /*grace_ms=*/2000);
  REQUIRE(n.run_to_end());
  const TrialResult& r = n.sup->result();
  CHECK(r.end == TrialEnd::kExited);
  CHECK(r.exit_code == 3);
  CHECK(r.reason == "parameter server 0: exit code 3");
  CHECK(n.sup->process(0).result().signal == SIGTERM);

  Node stopped;  // the workers still run: the scheduler's stop is a stop, whatever its reason
  stopped.start(shell("echo ready-$SWEPT_ROLE; exec sleep 300"), ps_gang(0, 1, {0}, 1), /*grace_ms=*/2000);
  REQUIRE(stopped.run_until([&] {
    return stopped.log.find("ready-worker") != std::string::npos && stopped.log.find("ready-ps") != std::string::npos;
  }));
  CHECK_FALSE(stopped.sup->workers_ended());
  stopped.sup->request_stop(std::string(protocol::kWorkersEndedStop));
  REQUIRE(stopped.run_to_end());
  CHECK(stopped.sup->result().end == TrialEnd::kStopped);
}
