// The agent's part of multi-node trials' rendezvous: see rendezvous.h.
#include "agent/rendezvous.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/net.h"

namespace swept::agent {
namespace {

// A whole decimal number, or nullopt.
std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Whether two socket addresses name the same host address (ports ignored).
bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

}  // namespace

Result<std::pair<int, int>> parse_port_range(const std::string& text) {
  auto bad = [&] {
    return Status::InvalidArgument("--rendezvous-ports '" + text +
                                   "' must be a port range LO-HI (or one port) with 1 <= LO <= HI <= 65535, "
                                   "e.g. 29500-29999");
  };
  std::string_view s(text);
  size_t dash = s.find('-');
  std::optional<int> lo = parse_int(s.substr(0, dash));
  std::optional<int> hi = dash == std::string_view::npos ? lo : parse_int(s.substr(dash + 1));
  if (!lo || !hi || *lo < 1 || *hi > 65535 || *lo > *hi) return bad();
  return std::make_pair(*lo, *hi);
}

Status check_advertise_addr(const std::string& addr) {
  if (addr.empty() || addr.size() > 255)
    return Status::InvalidArgument("--advertise-addr '" + addr + "' must be a host address of 1 to 255 bytes");
  for (unsigned char c : addr) {
    if (std::isspace(c) || std::iscntrl(c))
      return Status::InvalidArgument("--advertise-addr '" + addr + "' must not contain spaces or control characters");
  }
  if (addr.find("://") != std::string::npos)
    return Status::InvalidArgument("--advertise-addr '" + addr +
                                   "' must be a host (e.g. 10.0.0.5 or node7), not an endpoint");
  return Status::Ok();
}

Result<std::string> local_address_toward(const std::string& endpoint) {
  if (endpoint.rfind("inproc://", 0) == 0 || endpoint.rfind("ipc://", 0) == 0) return std::string("127.0.0.1");
  if (endpoint.rfind("tcp://", 0) != 0)
    return Status::InvalidArgument("scheduler endpoint '" + endpoint + "' is not tcp://HOST:PORT, inproc:// or ipc://");
  std::string rest = endpoint.substr(6);
  // ZeroMQ's "tcp://SOURCE;HOST:PORT": the scheduler is after the ';'.
  if (size_t semi = rest.rfind(';'); semi != std::string::npos) rest = rest.substr(semi + 1);
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return Status::InvalidArgument("scheduler endpoint '" + endpoint + "' has no HOST:PORT");
  std::string host = rest.substr(0, colon), port = rest.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  Result<std::string> local = source_address_toward(host, port);
  if (!local.ok()) return local.status().WithContext("this host's address toward the scheduler " + endpoint);
  return local;
}

std::string interface_holding(const std::string& addr) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* wanted = nullptr;
  if (::getaddrinfo(addr.c_str(), nullptr, &hints, &wanted) != 0) return "";
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) {
    ::freeaddrinfo(wanted);
    return "";
  }
  std::string name;
  for (ifaddrs* i = interfaces; i && name.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    for (addrinfo* w = wanted; w; w = w->ai_next) {
      if (same_address(i->ifa_addr, w->ai_addr)) {
        name = i->ifa_name;
        break;
      }
    }
  }
  ::freeifaddrs(interfaces);
  ::freeaddrinfo(wanted);
  return name;
}

Status check_port_bindable(int port) {
  Fd s{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) return Status::Unavailable(std::string("cannot make a socket to check master_port: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return Status::Unavailable("master_port " + std::to_string(port) + " cannot be bound on this host: " +
                               std::strerror(errno));
  return Status::Ok();
}

std::string tf_config(const protocol::Gang& gang, const GangProcess& process) {
  if (!gang.has_cluster()) return "";
  nlohmann::json workers = nlohmann::json::array();
  for (size_t r = 0; r < gang.worker_ports.size(); ++r) {
    const size_t node = r / static_cast<size_t>(std::max(1, gang.procs_per_node));
    workers.push_back(gang.addrs[node] + ":" + std::to_string(gang.worker_ports[r]));
  }
  nlohmann::json cluster = {{"worker", workers}};
  if (!gang.ps_node.empty()) {
    nlohmann::json servers = nlohmann::json::array();
    for (size_t j = 0; j < gang.ps_node.size(); ++j)
      servers.push_back(gang.addrs[static_cast<size_t>(gang.ps_node[j])] + ":" + std::to_string(gang.ps_ports[j]));
    cluster["ps"] = std::move(servers);
  }
  const int index = process.server ? process.index : gang.node_rank * gang.procs_per_node + process.index;
  nlohmann::json config = {{"cluster", std::move(cluster)},
                           {"task", {{"type", process.server ? "ps" : "worker"}, {"index", index}}}};
  return config.dump();
}

std::vector<std::pair<std::string, std::string>> gang_environment(
    const protocol::Gang& gang, const GangProcess& process, const std::string& ifname,
    const std::map<std::string, std::string>& scheduler_env) {
  std::vector<std::pair<std::string, std::string>> env;
  if (!process.server) {
    const int world = gang.nodes * gang.procs_per_node;
    const int rank = gang.node_rank * gang.procs_per_node + process.index;
    env = {
        {"MASTER_ADDR", gang.master_addr},
        {"MASTER_PORT", std::to_string(gang.master_port)},
        {"WORLD_SIZE", std::to_string(world)},
        {"RANK", std::to_string(rank)},
        {"LOCAL_RANK", std::to_string(process.index)},
        {"LOCAL_WORLD_SIZE", std::to_string(gang.procs_per_node)},
        {"GROUP_RANK", std::to_string(gang.node_rank)},
        {"GROUP_WORLD_SIZE", std::to_string(gang.nodes)},
        {"SWEPT_NODES", std::to_string(gang.nodes)},
        {"SWEPT_NODE_RANK", std::to_string(gang.node_rank)},
        // A worker's index among the workers is its rank, as TF_CONFIG's task says.
        {"SWEPT_ROLE", "worker"},
        {"SWEPT_ROLE_INDEX", std::to_string(rank)},
    };
  } else {
    env = {
        {"MASTER_ADDR", gang.master_addr},
        {"MASTER_PORT", std::to_string(gang.master_port)},
        {"SWEPT_NODES", std::to_string(gang.nodes)},
        {"SWEPT_NODE_RANK", std::to_string(gang.node_rank)},
        {"SWEPT_ROLE", "ps"},
        {"SWEPT_ROLE_INDEX", std::to_string(process.index)},
    };
  }
  if (std::string config = tf_config(gang, process); !config.empty()) env.emplace_back("TF_CONFIG", config);
  if (!ifname.empty()) {
    for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
      if (std::getenv(name) || scheduler_env.count(name)) continue;  // the user's choice stands
      env.emplace_back(name, ifname);
    }
  }
  return env;
}

std::vector<std::pair<std::string, std::string>> gang_environment(
    const protocol::Gang& gang, int local_rank, const std::string& ifname,
    const std::map<std::string, std::string>& scheduler_env) {
  return gang_environment(gang, GangProcess{false, local_rank}, ifname, scheduler_env);
}

}  // namespace swept::agent
