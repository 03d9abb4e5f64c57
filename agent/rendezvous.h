// What the agent needs for multi-node trials (issue 25, docs/protocol.md
// START_TRIAL `gang`) beyond running processes: the address other hosts
// reach it at, the rendezvous port range it offers, the network interface
// that holds its address (for GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME), the
// check that node 0's MASTER_PORT is free, and torchrun's environment for
// one process of a node.
//
// Why the interface: in containers and network namespaces a host's name
// often resolves to loopback; Gloo and NCCL then advertise an address the
// other nodes cannot reach and the job hangs until it times out. Naming the
// interface that carries the advertised address makes them use that one.
//
// Thread safety: free functions on values; the system calls they make
// (getaddrinfo, getifaddrs, socket) are thread-safe.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/protocol.h"
#include "common/status.h"

namespace swept::agent {

// The rendezvous ports an agent offers by default (torchrun's own default
// MASTER_PORT, 29500, and the 499 above it).
inline constexpr int kDefaultRendezvousPortLo = 29500;
inline constexpr int kDefaultRendezvousPortHi = 29999;

// Parses `--rendezvous-ports LO-HI` (e.g. "29500-29999"; "29500" alone is
// the range of one port). InvalidArgument naming the text and the rule
// (1 <= LO <= HI <= 65535) otherwise.
Result<std::pair<int, int>> parse_port_range(const std::string& text);

// Checks an --advertise-addr value: 1 to 255 bytes, no whitespace or
// control characters, no "://" (a host, not an endpoint). InvalidArgument
// saying what is wrong otherwise.
Status check_advertise_addr(const std::string& addr);

// The local address of a connection toward `endpoint`'s host, numeric
// ("10.0.0.5", "fe80::1"): a UDP socket connect()ed toward the scheduler's
// host and port (which sends nothing) and getsockname(). "127.0.0.1" for
// inproc:// and ipc:// endpoints (the scheduler is on this host). Unavailable
// when the host does not resolve or no route leads there; InvalidArgument
// for an endpoint that is not tcp://HOST:PORT, inproc:// or ipc://.
Result<std::string> local_address_toward(const std::string& endpoint);

// The name of the network interface that holds `addr` (a numeric address,
// or a host name resolved with getaddrinfo) among this host's interfaces
// (getifaddrs), e.g. "eth0", "lo"; "" when none does (an address behind
// NAT, a name that does not resolve here).
std::string interface_holding(const std::string& addr);

// Whether TCP port `port` can be bound on this host (all IPv4 interfaces,
// SO_REUSEADDR as PyTorch's TCPStore sets it, so that old connections in
// TIME_WAIT do not count): Ok, or Unavailable naming the port and the
// error ("master_port 29517 cannot be bound on this host: Address already in
// use"). The socket is closed again at once.
Status check_port_bindable(int port);

// Which process of a gang's node: a worker (index: its local rank) or
// parameter server `index` (issue 30; START_TRIAL gang's ps_node).
struct GangProcess {
  bool server = false;
  int index = 0;
};

// TF_CONFIG exactly as TensorFlow defines it (issue 30):
// {"cluster": {"worker": ["host:port", ...], "ps": ["host:port", ...]},
//  "task": {"type": "worker" | "ps", "index": i}}, the workers in RANK order
// and "ps" only when the trial has servers. "" when `gang` carries no
// cluster (an older scheduler's START_TRIAL).
std::string tf_config(const protocol::Gang& gang, const GangProcess& process);

// The environment of `process` on `gang`'s node. A worker gets torchrun's
// (below) and TF_CONFIG; a parameter server gets MASTER_ADDR, MASTER_PORT,
// SWEPT_NODES, SWEPT_NODE_RANK, SWEPT_ROLE=ps, SWEPT_ROLE_INDEX=j, TF_CONFIG
// and the interface names, but no RANK, WORLD_SIZE or LOCAL_RANK: it is no
// rank of the workers' group, and a torchrun-style program would join that
// group as one.
std::vector<std::pair<std::string, std::string>> gang_environment(
    const protocol::Gang& gang, const GangProcess& process, const std::string& ifname,
    const std::map<std::string, std::string>& scheduler_env);

// torchrun's environment for local rank `local_rank` of `gang`'s node
// (docs/protocol.md, START_TRIAL `gang`): MASTER_ADDR, MASTER_PORT,
// WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
// GROUP_WORLD_SIZE, SWEPT_NODES, SWEPT_NODE_RANK, SWEPT_ROLE (worker),
// SWEPT_ROLE_INDEX (RANK) and TF_CONFIG; and GLOO_SOCKET_IFNAME and
// NCCL_SOCKET_IFNAME set to `ifname`, each unless `ifname` is empty or the
// variable is already set, in the agent's own environment (getenv) or in
// `scheduler_env` (the sweep's env): a user who names the interface knows
// better than the agent.
std::vector<std::pair<std::string, std::string>> gang_environment(
    const protocol::Gang& gang, int local_rank, const std::string& ifname,
    const std::map<std::string, std::string>& scheduler_env);

}  // namespace swept::agent
