// allreduce_bench: the bandwidth of swept-train's cross-process all-reduce
// alone (trainer/dist/process_group.h: over Gloo's TCP pairs, one exchange
// with 2 ranks and Gloo's ring with more; the call swept-train makes once per
// step for the whole gradient), for message
// sizes from --min_mb to --max_mb (powers of two). bench/multinode.sh runs two
// of these in two network namespaces and sets the figures against iperf3 on
// the same veth link.
//
//   WORLD_SIZE=2 RANK=r MASTER_ADDR=... MASTER_PORT=... allreduce_bench [--min_mb 1] [--max_mb 64]
//
// The process joins exactly as swept-train does (torchrun's environment,
// world_from_env, ProcessGroup::join), so what is timed is the group a
// training run uses. Per size: one all-reduce whose result is checked (every
// element must be the sum of every rank's value: a fast wrong answer is not a
// result), a warm-up one, then `iters` all-reduces timed as one loop after a
// one-float all-reduce that lines the ranks up, as nccl-tests time theirs.
// Rank 0 prints one JSON line per size:
//   algbw = bytes / seconds per all-reduce
//   busbw = algbw * 2 (n - 1) / n   (nccl-tests' bus bandwidth for all-reduce:
//           what each rank sends on its link per second in a ring)
// in Gbit/s (iperf3's unit). Exit 0; 2 on bad flags or environment; 1 when
// the group cannot form, a peer is lost, or a result is wrong.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "trainer/dist/process_group.h"
#include "trainer/dist/world.h"

namespace {

using swept::trainer::ProcessGroup;
using swept::trainer::World;

struct Flags {
  int min_mb = 1;
  int max_mb = 64;
  // Bytes moved per size, in all: small messages repeat more, so each size
  // takes about as long as the others (5 to 100 timed all-reduces; the values
  // grow n-fold per call and stay finite over 100 calls of 2 ranks).
  long long budget_mb = 512;
};

std::optional<Flags> parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return std::nullopt;
    const int v = std::atoi(argv[++i]);
    if (a == "--min_mb") f.min_mb = v;
    else if (a == "--max_mb") f.max_mb = v;
    else if (a == "--budget_mb") f.budget_mb = v;
    else return std::nullopt;
  }
  if (f.min_mb < 1 || f.max_mb < f.min_mb || f.max_mb > 4096 || f.budget_mb < 1) return std::nullopt;
  return f;
}

// The value rank r puts at element i: small integers, so every sum is exact
// in float and the check below can ask for equality.
float value(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(1 + i % 7)); }

int fail(const swept::Status& s) {
  std::cerr << "allreduce_bench: " << s.message() << "\n";
  return swept::kExitFailure;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Flags> flags = parse(argc, argv);
  if (!flags) {
    std::cerr << "usage: allreduce_bench [--min_mb 1] [--max_mb 64] [--budget_mb 512]\n"
                 "  with torchrun's environment (WORLD_SIZE >= 2, RANK, MASTER_ADDR, MASTER_PORT)\n";
    return swept::kExitUsage;
  }
  auto env = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  swept::Result<World> world = swept::trainer::world_from_env(env);
  if (!world.ok()) {
    std::cerr << "allreduce_bench: " << world.status().message() << "\n";
    return swept::kExitUsage;
  }
  if (!world->distributed()) {
    std::cerr << "allreduce_bench: WORLD_SIZE must be 2 or more (one process has nothing to all-reduce with)\n";
    return swept::kExitUsage;
  }
  swept::Result<std::unique_ptr<ProcessGroup>> joined = ProcessGroup::join(*world);
  if (!joined.ok()) return fail(joined.status());
  ProcessGroup& group = **joined;
  const int n = group.size();
  float line_up = 0;

  for (long long mb = flags->min_mb; mb <= flags->max_mb; mb *= 2) {
    const size_t bytes = static_cast<size_t>(mb) << 20;
    const size_t count = bytes / sizeof(float);
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = value(group.rank(), i);
    if (swept::Status s = group.sum(data.data(), count); !s.ok()) return fail(s);
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += value(r, i);
      if (data[i] != want) {
        std::cerr << "allreduce_bench: wrong sum at element " << i << " of " << count << ": " << data[i]
                  << ", not " << want << "\n";
        return swept::kExitFailure;
      }
    }
    if (swept::Status s = group.sum(data.data(), count); !s.ok()) return fail(s);  // warm-up
    const long long iters = std::clamp<long long>(flags->budget_mb / mb, 5, 100);
    if (swept::Status s = group.sum(&line_up, 1); !s.ok()) return fail(s);
    const auto t0 = std::chrono::steady_clock::now();
    for (long long k = 0; k < iters; ++k)
      if (swept::Status s = group.sum(data.data(), count); !s.ok()) return fail(s);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(iters);
    if (group.rank() == 0) {
      const double algbw = static_cast<double>(bytes) * 8 / seconds / 1e9;
      const double busbw = algbw * 2.0 * (n - 1) / n;
      std::printf(
          "{\"bench\": \"allreduce\", \"ranks\": %d, \"bytes\": %zu, \"iters\": %lld, \"us_per_op\": %.1f, "
          "\"algbw_gbit_s\": %.3f, \"busbw_gbit_s\": %.3f}\n",
          n, bytes, iters, seconds * 1e6, algbw, busbw);
      std::fflush(stdout);
    }
  }
  return swept::kExitOk;
}
