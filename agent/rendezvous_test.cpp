// Tests of the agent's rendezvous helpers (agent/rendezvous.h) against this
// host's real network stack: loopback, a port held by a listening socket.
#include "agent/rendezvous.h"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>

#include <nlohmann/json.hpp>

using namespace swept;
using namespace swept::agent;

namespace {

// A TCP socket listening on 0.0.0.0 at a port the kernel picks.
struct Listener {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = 0;
  Listener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

std::map<std::string, std::string> as_map(const std::vector<std::pair<std::string, std::string>>& env) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : env) m[k] = v;
  return m;
}

}  // namespace

TEST_CASE("rendezvous: --rendezvous-ports parses LO-HI or one port, and refuses anything else with the rule") {
  auto range = parse_port_range("29500-29999");
  REQUIRE(range.ok());
  CHECK(range->first == 29500);
  CHECK(range->second == 29999);
  auto one = parse_port_range("4000");
  REQUIRE(one.ok());
  CHECK(*one == std::make_pair(4000, 4000));
  for (const char* bad : {"", "0-10", "10-5", "a-b", "1-70000", "29500-", "-5", "100-200x", "1--2", " 1-2"}) {
    auto r = parse_port_range(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find("1 <= LO <= HI <= 65535") != std::string::npos);
    CHECK(r.status().message().find(std::string("'") + bad + "'") != std::string::npos);
  }
}

TEST_CASE("rendezvous: --advertise-addr must be a host of 1 to 255 bytes") {
  CHECK(check_advertise_addr("10.0.0.5").ok());
  CHECK(check_advertise_addr("node7.cluster").ok());
  CHECK_FALSE(check_advertise_addr("").ok());
  CHECK_FALSE(check_advertise_addr(std::string(256, 'a')).ok());
  CHECK_FALSE(check_advertise_addr("a b").ok());
  CHECK(check_advertise_addr("tcp://10.0.0.5:1").message().find("not an endpoint") != std::string::npos);
}

TEST_CASE("rendezvous: the local address toward the scheduler, and the interface holding it") {
  auto loopback = local_address_toward("tcp://127.0.0.1:5555");
  REQUIRE(loopback.ok());
  CHECK(*loopback == "127.0.0.1");
  CHECK(*local_address_toward("inproc://swept-scheduler") == "127.0.0.1");
  CHECK(*local_address_toward("ipc:///tmp/x") == "127.0.0.1");
  CHECK(local_address_toward("tcp://host.invalid:5555").status().code() == StatusCode::kUnavailable);
  CHECK(local_address_toward("udp://1.2.3.4:5").status().code() == StatusCode::kInvalidArgument);
  CHECK(local_address_toward("tcp://nohostport").status().code() == StatusCode::kInvalidArgument);

  CHECK(interface_holding("127.0.0.1") == "lo");
  CHECK(interface_holding("192.0.2.77") == "");  // TEST-NET-1: on no interface here
  CHECK(interface_holding("host.invalid") == "");
}

TEST_CASE("rendezvous: a port something listens on is not bindable, and the reason names it") {
  int freed_port = 0;
  {
    Listener busy;
    freed_port = busy.port;
    Status s = check_port_bindable(busy.port);
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kUnavailable);  // the host's fault: the trial is requeued
    CHECK(s.message() == "master_port " + std::to_string(busy.port) +
                             " cannot be bound on this host: Address already in use");
  }
  CHECK(check_port_bindable(freed_port).ok());  // closed again: free (SO_REUSEADDR)
}

TEST_CASE("rendezvous: torchrun's environment for each local rank of a node") {
  protocol::Gang g;
  g.nodes = 2;
  g.node_rank = 1;
  g.procs_per_node = 3;
  g.master_addr = "10.0.0.5";
  g.master_port = 29517;
  ::unsetenv("GLOO_SOCKET_IFNAME");
  ::unsetenv("NCCL_SOCKET_IFNAME");
  auto env = as_map(gang_environment(g, 2, "eth1", {}));
  std::map<std::string, std::string> want = {
      {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "29517"},      {"WORLD_SIZE", "6"},
      {"RANK", "5"},               {"LOCAL_RANK", "2"},           {"LOCAL_WORLD_SIZE", "3"},
      {"GROUP_RANK", "1"},         {"GROUP_WORLD_SIZE", "2"},     {"SWEPT_NODES", "2"},
      {"SWEPT_NODE_RANK", "1"},    {"GLOO_SOCKET_IFNAME", "eth1"}, {"NCCL_SOCKET_IFNAME", "eth1"},
      {"SWEPT_ROLE", "worker"},    {"SWEPT_ROLE_INDEX", "5"}};
  CHECK(env == want);

  // Set by the user (the agent's environment, or the sweep's env): left to them.
  ::setenv("NCCL_SOCKET_IFNAME", "ib0", 1);
  auto kept = as_map(gang_environment(g, 0, "eth1", {{"GLOO_SOCKET_IFNAME", "eth9"}}));
  ::unsetenv("NCCL_SOCKET_IFNAME");
  CHECK(kept.count("GLOO_SOCKET_IFNAME") == 0);
  CHECK(kept.count("NCCL_SOCKET_IFNAME") == 0);
  CHECK(kept["RANK"] == "3");
  // No interface known: neither is set.
  CHECK(as_map(gang_environment(g, 0, "", {})).count("GLOO_SOCKET_IFNAME") == 0);
}

TEST_CASE("rendezvous: TF_CONFIG as TensorFlow defines it, for workers and parameter servers (issue 30)") {
  protocol::Gang g;
  g.nodes = 2;
  g.node_rank = 1;
  g.procs_per_node = 2;
  g.master_addr = "10.0.0.5";
  g.master_port = 29517;
  ::unsetenv("GLOO_SOCKET_IFNAME");
  ::unsetenv("NCCL_SOCKET_IFNAME");
  // No cluster in the START_TRIAL (an older scheduler): no TF_CONFIG.
  CHECK(tf_config(g, {false, 0}).empty());
  CHECK(as_map(gang_environment(g, 0, "", {})).count("TF_CONFIG") == 0);
  g.addrs = {"10.0.0.5", "10.0.0.6", "10.0.0.7"};
  g.worker_ports = {29518, 29519, 29500, 29501};
  g.ps_node = {2, 0};
  g.ps_ports = {29500, 29520};
  const nlohmann::json cluster = {{"worker", {"10.0.0.5:29518", "10.0.0.5:29519", "10.0.0.6:29500", "10.0.0.6:29501"}},
                                  {"ps", {"10.0.0.7:29500", "10.0.0.5:29520"}}};
  // Worker: its index is its RANK (node 1, local rank 1: 3).
  auto worker = as_map(gang_environment(g, 1, "", {}));
  CHECK(nlohmann::json::parse(worker["TF_CONFIG"]) ==
        nlohmann::json{{"cluster", cluster}, {"task", {{"type", "worker"}, {"index", 3}}}});
  CHECK(worker["SWEPT_ROLE"] == "worker");
  CHECK(worker["SWEPT_ROLE_INDEX"] == "3");
  // Server 1 (on node 0 here): no rank of the workers' group.
  g.node_rank = 0;
  auto server = as_map(gang_environment(g, GangProcess{true, 1}, "eth1", {}));
  CHECK(nlohmann::json::parse(server["TF_CONFIG"]) ==
        nlohmann::json{{"cluster", cluster}, {"task", {{"type", "ps"}, {"index", 1}}}});
  std::map<std::string, std::string> want = {
      {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "29517"},     {"SWEPT_NODES", "2"},
      {"SWEPT_NODE_RANK", "0"},    {"SWEPT_ROLE", "ps"},          {"SWEPT_ROLE_INDEX", "1"},
      {"TF_CONFIG", server["TF_CONFIG"]}, {"GLOO_SOCKET_IFNAME", "eth1"}, {"NCCL_SOCKET_IFNAME", "eth1"}};
  CHECK(server == want);
  // Workers only (a multi-node trial without servers): no "ps" key.
  g.ps_node.clear();
  g.ps_ports.clear();
  CHECK(tf_config(g, {false, 0}) ==
        R"({"cluster":{"worker":["10.0.0.5:29518","10.0.0.5:29519","10.0.0.6:29500","10.0.0.6:29501"]},)"
        R"("task":{"index":0,"type":"worker"}})");
}
