// world_from_env (see world.h): the environment contract of multi-process
// runs, parsed strictly. A half-set environment is refused rather than
// guessed at: a rank that silently trained alone would produce a run that
// looks fine and is wrong, while its peers wait for it until they time out.
#include "trainer/dist/world.h"

#include <cmath>
#include <cstdlib>

namespace swept::trainer {
namespace {

// A whole decimal number in [lo, hi], nothing else (no sign, no spaces).
Result<long long> whole(const std::string& name, const std::string& text, long long lo, long long hi,
                        const std::string& what_to_do) {
  bool digits = !text.empty() && text.size() <= 12;
  for (char c : text) digits = digits && c >= '0' && c <= '9';
  const long long v = digits ? std::stoll(text) : -1;
  if (!digits || v < lo || v > hi)
    return Status::InvalidArgument(name + "=\"" + text + "\" is not a whole number in [" + std::to_string(lo) +
                                   ", " + std::to_string(hi) + "]: " + what_to_do);
  return v;
}

struct RankVars {
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;  // nullptr: not read
};
constexpr RankVars kTorchrun{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr RankVars kSlurm{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr};

Status read_ranks(const EnvLookup& env, const RankVars& vars, World& w) {
  const std::string fix = std::string("set ") + vars.rank + " and " + vars.size +
                          " together (RANK in [0, WORLD_SIZE)), or neither for a single-process run";
  const std::optional<std::string> rank = env(vars.rank), size = env(vars.size);
  if (!rank || !size)
    return Status::InvalidArgument(std::string(rank ? vars.rank : vars.size) + " is set but " +
                                   (rank ? vars.size : vars.rank) + " is not: " + fix);
  Result<long long> n = whole(vars.size, *size, 1, 65536, fix);
  if (!n.ok()) return n.status();
  Result<long long> r = whole(vars.rank, *rank, 0, 65535, fix);
  if (!r.ok()) return r.status();
  if (*r >= *n)
    return Status::InvalidArgument(std::string(vars.rank) + "=" + *rank + " is not below " + vars.size + "=" +
                                   *size + ": ranks are 0 .. " + vars.size + "-1");
  w.size = static_cast<int>(*n);
  w.rank = static_cast<int>(*r);
  if (vars.local_size != nullptr) {
    if (std::optional<std::string> ls = env(vars.local_size)) {
      Result<long long> v = whole(vars.local_size, *ls, 1, w.size, "the processes on this host, at most WORLD_SIZE");
      if (!v.ok()) return v.status();
      w.local_size = static_cast<int>(*v);
    }
  }
  if (std::optional<std::string> lr = env(vars.local_rank)) {
    const long long hi = vars.local_size != nullptr ? w.local_size - 1 : w.size - 1;
    Result<long long> v = whole(vars.local_rank, *lr, 0, hi,
                                std::string("this process's index on its host, below ") +
                                    (vars.local_size != nullptr ? "LOCAL_WORLD_SIZE (default 1)" : vars.size));
    if (!v.ok()) return v.status();
    w.local_rank = static_cast<int>(*v);
  }
  return Status::Ok();
}

Status read_rendezvous(const EnvLookup& env, World& w) {
  const std::optional<std::string> addr = env("MASTER_ADDR");
  if (!addr || addr->empty())
    return Status::InvalidArgument("WORLD_SIZE=" + std::to_string(w.size) +
                                   " but MASTER_ADDR is not set: set it to rank 0's host name or address as "
                                   "the other ranks reach it (and MASTER_PORT, default 29500)");
  w.master_addr = *addr;
  if (std::optional<std::string> port = env("MASTER_PORT")) {
    Result<long long> p = whole("MASTER_PORT", *port, 1, 65535, "a TCP port free on rank 0's host");
    if (!p.ok()) return p.status();
    w.master_port = static_cast<int>(*p);
  }
  return Status::Ok();
}

Status read_timeout(const EnvLookup& env, World& w) {
  const std::optional<std::string> t = env("SWEPT_RENDEZVOUS_TIMEOUT");
  if (!t) return Status::Ok();
  char* end = nullptr;
  const double seconds = std::strtod(t->c_str(), &end);
  if (t->empty() || end != t->c_str() + t->size() || !std::isfinite(seconds) || seconds <= 0 || seconds > 86400)
    return Status::InvalidArgument("SWEPT_RENDEZVOUS_TIMEOUT=\"" + *t +
                                   "\" is not a number of seconds in (0, 86400]: the time a rank waits for its "
                                   "peers (default 300)");
  w.timeout = std::chrono::milliseconds(std::max<long long>(1, std::llround(seconds * 1000)));
  return Status::Ok();
}

}  // namespace

Result<World> world_from_env(const EnvLookup& env) {
  World w;
  if (env("RANK") || env("WORLD_SIZE")) {
    SWEPT_RETURN_IF_ERROR(read_ranks(env, kTorchrun, w));
    w.source = "torchrun";
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS") && env("MASTER_ADDR")) {
    // Only with MASTER_ADDR: a program started by a process that is itself
    // an srun task (a swept agent under deploy/slurm) inherits that task's
    // SLURM_PROCID and SLURM_NTASKS, and must not take them for its own.
    SWEPT_RETURN_IF_ERROR(read_ranks(env, kSlurm, w));
    w.source = "slurm";
  }
  SWEPT_RETURN_IF_ERROR(read_timeout(env, w));
  if (!w.distributed()) return w;
  SWEPT_RETURN_IF_ERROR(read_rendezvous(env, w));
  if (std::optional<std::string> ifname = env("GLOO_SOCKET_IFNAME")) {
    // Like PyTorch, a comma-separated list is accepted; swept-train binds one
    // device, the first.
    w.socket_ifname = ifname->substr(0, ifname->find(','));
  }
  return w;
}

}  // namespace swept::trainer
