// Tests of the agent's lease on its own (agent/lease.h): a fake host stands
// in for the agent's loop and records what the lease asks of it, with times
// given by the test (no clock, no keeper process). The last case starts a
// real lease keeper (agent/lease_keeper.h) for its verdicts on trials.
#include "agent/lease.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>

#include <string>
#include <vector>

#include "common/testing/eventually.h"

using namespace swept::agent;

namespace {

struct FakeHost final : LeaseHost {
  int64_t heard = 0;
  int heartbeat = 1000;
  bool is_registered = true;
  bool stopping = false;
  size_t running = 2;
  int reads = 0;
  std::vector<std::pair<std::string, int64_t>> stops;  // reason, grace
  std::vector<int64_t> reregistered;
  int64_t heard_on_read = -1;  // >= 0: a read hears the scheduler at this time

  int64_t last_heard_ms() const override { return heard; }
  int heartbeat_ms() const override { return heartbeat; }
  bool registered() const override { return is_registered; }
  bool shutting_down() const override { return stopping; }
  size_t running_trials() const override { return running; }
  void read_messages(int64_t) override {
    ++reads;
    if (heard_on_read >= 0) heard = heard_on_read;
  }
  std::vector<pid_t> trial_pids() const override { return {}; }
  void stop_trials_for_lease(const std::string& reason, int64_t grace_ms, bool keeper_acted) override {
    stops.emplace_back(reason, grace_ms);
    CHECK_FALSE(keeper_acted);  // no keeper here
  }
  void register_again(int64_t now) override { reregistered.push_back(now); }
};

}  // namespace

TEST_CASE("lease: the trials are stopped a grace before the lease ends, SIGKILL at its end, once") {
  FakeHost host;
  Lease lease(host, /*stop_grace_ms=*/10000);
  lease.renew(6000);
  CHECK(lease.running());
  CHECK(lease.grace_ms() == 3000);  // the stop grace, at most half the lease
  CHECK(lease.stop_at() == 3000);
  lease.check(2999);
  CHECK(host.stops.empty());
  CHECK(host.reads == 0);
  lease.check(3500);  // noticed late: the grace runs to the lease's end, not from now
  REQUIRE(host.stops.size() == 1);
  CHECK(host.reads == 1);  // what arrived during a long turn was read first
  CHECK(host.stops[0].second == 2500);
  CHECK(host.stops[0].first.rfind("lease expired", 0) == 0);  // the scheduler tells a lease stop by this prefix
  CHECK(lease.expired());
  CHECK_FALSE(lease.running());
  lease.check(4000);
  CHECK(host.stops.size() == 1);
  lease.renew(6000);  // the next REGISTER_ACK
  CHECK_FALSE(lease.expired());
}

TEST_CASE("lease: a message read at the last moment renews it, and without a lease or in a shutdown nothing is stopped") {
  FakeHost host;
  Lease lease(host, 1000);
  lease.renew(6000);
  host.heard_on_read = 5000;
  lease.check(5100);
  CHECK(host.reads == 1);
  CHECK(host.stops.empty());
  CHECK_FALSE(lease.expired());

  Lease none(host, 1000);
  none.renew(0);  // an older scheduler
  none.check(1000000);
  none.check_frozen(1000000);
  CHECK(host.stops.empty());
  CHECK(host.reregistered.empty());

  host.stopping = true;
  Lease shutting(host, 1000);
  shutting.renew(6000);
  shutting.check(1000000);
  CHECK(host.stops.empty());
}

TEST_CASE("lease: a loop that wakes past the stop time by more than the keeper's slack expires it and registers again") {
  FakeHost host;
  Lease lease(host, 1000);
  lease.renew(6000);  // stop at 5000, keeper's slack 250
  lease.check_frozen(5250);
  CHECK(host.stops.empty());
  CHECK(host.reregistered.empty());
  lease.check_frozen(5251);
  REQUIRE(host.stops.size() == 1);
  CHECK(host.stops[0].second == 749);  // to the lease's end
  CHECK(host.stops[0].first.find("could not act") != std::string::npos);
  CHECK(host.reregistered == std::vector<int64_t>{5251});
  // Not registered (already dropped): nothing more to judge.
  host.is_registered = false;
  lease.check_frozen(9000);
  CHECK(host.reregistered.size() == 1);
}

// Issue 26: the keeper, before it signals, notes which published trials had
// already ended by themselves (zombies their frozen agent could not reap), so
// that the agent reports those as they ended, not as stopped by the lease.
TEST_CASE("lease keeper: before it signals, it notes which published trials had already ended by themselves") {
  const pid_t ended = ::fork();
  if (ended == 0) ::_exit(0);
  const pid_t running = ::fork();
  if (running == 0) {
    ::pause();
    ::_exit(0);
  }
  REQUIRE(swept::testing::eventually([&] {
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(ended), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == ended;
  }, 20));
  TrialsView view;  // subreaper mode with a tag no process carries: it signals nothing here
  view.mode = ContainmentMode::kSubreaper;
  view.tag_prefix = "lease-test-" + std::to_string(::getpid()) + "-none-";
  auto keeper = LeaseKeeper::start(view);
  REQUIRE(keeper.ok());
  LeaseKeeper& k = **keeper;
  k.set_trial_pids({ended, running});
  CHECK_FALSE(k.found_ended(ended));  // no verdict before it acts
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  k.set_deadlines(now - 1, INT64_MAX);  // the SIGTERM deadline has passed
  CHECK(swept::testing::eventually([&] { return k.found_ended(ended); }, 20));
  CHECK_FALSE(k.found_ended(running));
  // The slot given to another trial: the old verdict goes with it.
  k.set_trial_pids({running});
  CHECK_FALSE(k.found_ended(ended));
  ::kill(running, SIGKILL);
  for (pid_t p : {ended, running}) ::waitpid(p, nullptr, 0);
}
