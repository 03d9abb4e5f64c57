// The trial's transition function against a hand-written table of every
// (state, event) pair, and the name tables against themselves. That the
// database's CHECK constraints follow the tables is the store's test
// (store/state_checks_test.cpp): schema.sql spells no state name.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "common/states.h"

using namespace swept;
using S = TrialState;
using K = TrialEventKind;

namespace {

constexpr std::optional<S> kNone = std::nullopt;

struct Row {
  S from;
  TrialEvent event;
  std::optional<S> with_retry;     // retries_left = 1
  std::optional<S> without_retry;  // retries_left = 0
};

TrialEvent ev(K k) { return {k}; }

// Written by hand from the diagram in store/schema.sql, not derived from the
// code: one row per (state, event), outcomes of kFinish spelled out.
const std::vector<Row> kTable = {
    // dispatch: only a queued trial starts
    {S::kQueued, ev(K::kDispatch), S::kRunning, S::kRunning},
    {S::kRunning, ev(K::kDispatch), kNone, kNone},
    {S::kCompleted, ev(K::kDispatch), kNone, kNone},
    {S::kFailed, ev(K::kDispatch), kNone, kNone},
    {S::kStopped, ev(K::kDispatch), kNone, kNone},
    {S::kLost, ev(K::kDispatch), kNone, kNone},
    // adopt: only a requeued trial is taken back; lost is final
    {S::kQueued, ev(K::kAdopt), S::kRunning, S::kRunning},
    {S::kRunning, ev(K::kAdopt), kNone, kNone},
    {S::kCompleted, ev(K::kAdopt), kNone, kNone},
    {S::kFailed, ev(K::kAdopt), kNone, kNone},
    {S::kStopped, ev(K::kAdopt), kNone, kNone},
    {S::kLost, ev(K::kAdopt), kNone, kNone},
    // finish: running ends; a given-up (queued or lost) attempt's result stands
    {S::kRunning, TrialEvent::finish(S::kCompleted), S::kCompleted, S::kCompleted},
    {S::kRunning, TrialEvent::finish(S::kFailed), S::kFailed, S::kFailed},
    {S::kRunning, TrialEvent::finish(S::kStopped), S::kStopped, S::kStopped},
    {S::kQueued, TrialEvent::finish(S::kCompleted), S::kCompleted, S::kCompleted},
    {S::kQueued, TrialEvent::finish(S::kFailed), S::kFailed, S::kFailed},
    {S::kLost, TrialEvent::finish(S::kCompleted), S::kCompleted, S::kCompleted},
    {S::kLost, TrialEvent::finish(S::kFailed), S::kFailed, S::kFailed},
    // a given-up attempt the scheduler stopped as stale brings no result
    {S::kQueued, TrialEvent::finish(S::kStopped), kNone, kNone},
    {S::kLost, TrialEvent::finish(S::kStopped), kNone, kNone},
    {S::kCompleted, TrialEvent::finish(S::kCompleted), kNone, kNone},
    {S::kFailed, TrialEvent::finish(S::kCompleted), kNone, kNone},
    {S::kStopped, TrialEvent::finish(S::kCompleted), kNone, kNone},
    // a process cannot end as queued, running or lost
    {S::kRunning, TrialEvent::finish(S::kQueued), kNone, kNone},
    {S::kRunning, TrialEvent::finish(S::kRunning), kNone, kNone},
    {S::kRunning, TrialEvent::finish(S::kLost), kNone, kNone},
    // cancel: queued and running trials stop
    {S::kQueued, ev(K::kCancel), S::kStopped, S::kStopped},
    {S::kRunning, ev(K::kCancel), S::kStopped, S::kStopped},
    {S::kCompleted, ev(K::kCancel), kNone, kNone},
    {S::kFailed, ev(K::kCancel), kNone, kNone},
    {S::kStopped, ev(K::kCancel), kNone, kNone},
    {S::kLost, ev(K::kCancel), kNone, kNone},
    // lose: a running trial is requeued while a retry is left, else lost
    {S::kRunning, ev(K::kLose), S::kQueued, S::kLost},
    {S::kQueued, ev(K::kLose), kNone, kNone},
    {S::kCompleted, ev(K::kLose), kNone, kNone},
    {S::kFailed, ev(K::kLose), kNone, kNone},
    {S::kStopped, ev(K::kLose), kNone, kNone},
    {S::kLost, ev(K::kLose), kNone, kNone},
    // reject: a queued trial whose command cannot be built fails
    {S::kQueued, ev(K::kReject), S::kFailed, S::kFailed},
    {S::kRunning, ev(K::kReject), kNone, kNone},
    {S::kCompleted, ev(K::kReject), kNone, kNone},
    // retry: failed and lost trials are queued again
    {S::kFailed, ev(K::kRetry), S::kQueued, S::kQueued},
    {S::kLost, ev(K::kRetry), S::kQueued, S::kQueued},
    {S::kQueued, ev(K::kRetry), kNone, kNone},
    {S::kRunning, ev(K::kRetry), kNone, kNone},
    {S::kCompleted, ev(K::kRetry), kNone, kNone},
    {S::kStopped, ev(K::kRetry), kNone, kNone},
    // early_stopped (issue 16): only a running trial's process ends so (the
    // scheduler stopped it for its rule); final, kept by plain retry
    {S::kRunning, TrialEvent::finish(S::kEarlyStopped), S::kEarlyStopped, S::kEarlyStopped},
    {S::kQueued, TrialEvent::finish(S::kEarlyStopped), kNone, kNone},
    {S::kLost, TrialEvent::finish(S::kEarlyStopped), kNone, kNone},
    {S::kEarlyStopped, TrialEvent::finish(S::kCompleted), kNone, kNone},
    {S::kEarlyStopped, ev(K::kDispatch), kNone, kNone},
    {S::kEarlyStopped, ev(K::kAdopt), kNone, kNone},
    {S::kEarlyStopped, ev(K::kCancel), kNone, kNone},
    {S::kEarlyStopped, ev(K::kLose), kNone, kNone},
    {S::kEarlyStopped, ev(K::kRetry), kNone, kNone},
    // retry --early-stopped: early_stopped too, besides failed and lost
    {S::kEarlyStopped, ev(K::kRetryEarlyStopped), S::kQueued, S::kQueued},
    {S::kFailed, ev(K::kRetryEarlyStopped), S::kQueued, S::kQueued},
    {S::kLost, ev(K::kRetryEarlyStopped), S::kQueued, S::kQueued},
    {S::kQueued, ev(K::kRetryEarlyStopped), kNone, kNone},
    {S::kRunning, ev(K::kRetryEarlyStopped), kNone, kNone},
    {S::kCompleted, ev(K::kRetryEarlyStopped), kNone, kNone},
    {S::kStopped, ev(K::kRetryEarlyStopped), kNone, kNone},
    // requeue (a lease expired, a host fault, an agent draining): a running
    // attempt ended not by the trial goes back to the queue, retries or not
    {S::kRunning, ev(K::kRequeue), S::kQueued, S::kQueued},
    {S::kQueued, ev(K::kRequeue), kNone, kNone},
    {S::kLost, ev(K::kRequeue), kNone, kNone},
    {S::kCompleted, ev(K::kRequeue), kNone, kNone},
    {S::kFailed, ev(K::kRequeue), kNone, kNone},
    {S::kStopped, ev(K::kRequeue), kNone, kNone},
    {S::kEarlyStopped, ev(K::kRequeue), kNone, kNone},
    // imported (issue 28, warm starts): a result from elsewhere; nothing moves it
    {S::kImported, ev(K::kDispatch), kNone, kNone},
    {S::kImported, ev(K::kAdopt), kNone, kNone},
    {S::kImported, TrialEvent::finish(S::kCompleted), kNone, kNone},
    {S::kImported, ev(K::kCancel), kNone, kNone},
    {S::kImported, ev(K::kLose), kNone, kNone},
    {S::kImported, ev(K::kRetry), kNone, kNone},
    {S::kImported, ev(K::kRetryEarlyStopped), kNone, kNone},
    {S::kImported, ev(K::kRequeue), kNone, kNone},
    // and no process ends as imported
    {S::kRunning, TrialEvent::finish(S::kImported), kNone, kNone},
};

}  // namespace

TEST_CASE("common: the trial transition function matches the hand-written table") {
  for (const Row& r : kTable) {
    CAPTURE(name(r.from));
    CAPTURE(static_cast<int>(r.event.kind));
    CAPTURE(name(r.event.outcome));
    CHECK(next_trial_state(r.from, r.event, 1) == r.with_retry);
    CHECK(next_trial_state(r.from, r.event, 0) == r.without_retry);
  }
  // Every (state, event kind) pair is in the table at least once.
  std::set<std::pair<int, int>> seen;
  for (const Row& r : kTable) seen.insert({static_cast<int>(r.from), static_cast<int>(r.event.kind)});
  for (const auto& s : kTrialStates)
    for (K k : {K::kDispatch, K::kAdopt, K::kFinish, K::kCancel, K::kLose, K::kRetry, K::kRetryEarlyStopped, K::kRequeue})
      CHECK_MESSAGE(seen.count({static_cast<int>(s.state), static_cast<int>(k)}) == 1,
                    "missing row: ", name(s.state), " event ", static_cast<int>(k));
}

TEST_CASE("common: state names are unique and round-trip") {
  std::set<std::string_view> names;
  for (const auto& s : kTrialStates) {
    CHECK(names.insert(s.name).second);
    CHECK(trial_state_named(s.name) == s.state);
  }
  for (size_t i = 0; i < kSweepStateCount; ++i) {
    auto st = static_cast<SweepState>(i);
    CHECK(sweep_state_named(name(st)) == st);
  }
  for (size_t i = 0; i < kAgentStateCount; ++i) {
    auto st = static_cast<AgentState>(i);
    CHECK(agent_state_named(name(st)) == st);
  }
  CHECK_FALSE(trial_state_named("Queued"));
  CHECK_FALSE(trial_state_named(""));
  CHECK_FALSE(sweep_state_named("done"));
  CHECK_FALSE(agent_state_named("dead"));
  // Final states are exactly those no event but retry or a late result leaves.
  CHECK_FALSE(is_final(TrialState::kQueued));
  CHECK_FALSE(is_final(TrialState::kRunning));
  CHECK(is_final(TrialState::kCompleted));
  CHECK(info(TrialState::kCompleted).counts_for_best);
  CHECK_FALSE(info(TrialState::kRunning).counts_for_best);
  CHECK(is_final(TrialState::kEarlyStopped));
  CHECK_FALSE(info(TrialState::kEarlyStopped).retryable);
  CHECK_FALSE(info(TrialState::kEarlyStopped).counts_for_best);
  CHECK(name(TrialState::kEarlyStopped) == "early_stopped");
  CHECK(display_name(TrialState::kEarlyStopped) == "early-stopped");
  CHECK(display_name(TrialState::kLost) == "lost");
}
