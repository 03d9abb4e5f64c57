// `swept wait SWEEP`: blocks until the sweep is over (no trial queued or
// running, or cancelled and its trials ended). Exit 0 when every trial
// completed, 7 when some did not, 6 when the scheduler cannot be reached.
// Each poll is one bounded request; --timeout-s bounds the whole wait.
#include <chrono>
#include <thread>

#include "cli/client_common.h"
#include "cli/command.h"

namespace swept::cli {
namespace {

int run_wait(const std::vector<std::string>& args) {
  ClientFlags flags;
  std::string sweep;
  int poll_ms = 500;
  double timeout_s = 0;
  po::options_description desc("options");
  desc.add_options()("sweep", po::value(&sweep), "a sweep id")(
      "poll-ms", po::value(&poll_ms)->default_value(500), "how often to ask")(
      "timeout-s", po::value(&timeout_s)->default_value(0), "give up after this long (0: never); exit 1");
  add_client_flags(desc, flags, true);
  po::positional_options_description pos;
  pos.add("sweep", 1);
  if (auto rc = parse_flags("wait", "swept wait SWEEP [--scheduler ADDR | --db FILE]", args, desc, pos)) return *rc;
  auto id = parse_id("SWEEP", sweep);
  if (!id.ok()) return report("wait", id.status());
  auto src = ResultSource::open(flags);
  if (!src.ok()) return report("wait", src.status());
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    auto sums = src->sweeps(*id);
    if (!sums.ok()) return report("wait", sums.status());
    const auto& s = sums->front();
    if (s.state != SweepState::kRunning && s.counts[TrialState::kRunning] == 0) {
      std::cout << "sweep " << s.id << " " << name(s.state) << ": " << final_counts_text(s.counts) << "\n";
      // Early-stopped trials are the sweep's rule at work, not a failure;
      // imported ones (a warm start's) were never this sweep's to run.
      bool all = s.state == SweepState::kCompleted &&
                 s.counts[TrialState::kCompleted] + s.counts[TrialState::kEarlyStopped] +
                         s.counts[TrialState::kImported] ==
                     s.counts.total();
      return all ? kExitOk : kExitNotAllCompleted;
    }
    if (timeout_s > 0 && std::chrono::steady_clock::now() - start > std::chrono::duration<double>(timeout_s)) {
      std::cerr << "swept wait: sweep " << s.id << " still running after " << timeout_s << " s\n";
      return kExitFailure;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::max(10, poll_ms)));
  }
}

}  // namespace
SWEPT_COMMAND("wait", "wait until a sweep is over; exit 0 when every trial completed, 7 otherwise", run_wait);
}  // namespace swept::cli
