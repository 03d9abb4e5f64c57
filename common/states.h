// The states of trials, sweeps and agents, as types, with their names in one
// table each (the X-macro lists below) and the one transition function of a
// trial. The names are the spellings on the wire (docs/protocol.md), in the
// database (store/schema.sql) and in the dashboard's API (docs/api.md): no
// other source file spells a state's name.
//
// Adding a final trial state is one line in SWEPT_TRIAL_STATES: its
// enumerator, name and properties; the counts, the JSON, "best", the
// database's CHECK constraints (every state column's list is built from
// these tables when the writer opens a file: store/state_checks.h) and the
// dashboard's list (served by /api/info) follow from the row. Its tone (below)
// is how the dashboard colours it: app.css styles tones and names no state.
// The transition function needs its rules, and states_test.cpp its
// hand-written rows.
//
// Pure; no I/O; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace swept {

// How a state is shown: a small closed set of presentation tones. The
// dashboard (web/static/app.css) styles each tone, and takes each state's tone
// from /api/info, so a new state picks a tone here and needs no CSS.
// X(enumerator, name)
#define SWEPT_TONES(X)      \
  X(kNeutral, "neutral")    \
  X(kActive, "active")      \
  X(kGood, "good")          \
  X(kBad, "bad")            \
  X(kHalted, "halted")      \
  X(kWarn, "warn")          \
  X(kPartial, "partial")

// X(enumerator, name, final, counts_for_best, retryable, process_outcome, tone)
//   final:           the trial will not run again by itself
//   counts_for_best: its metric value may be the sweep's best (store/reader.h)
//   retryable:       `swept retry` queues it again
//   process_outcome: what a trial's ended process can make of it (kFinish)
//   tone:            how it is shown (Tone): waiting, at work, a result, a
//                    failure, stopped by a person, lost, stopped early
// early_stopped: the sweep's early_terminate rule stopped it (issue 16); its
// metrics stay, it is never retried by itself and `swept retry` takes it back
// only when asked (--early-stopped). Shown to users as "early-stopped"
// (display_name).
// imported: a result this sweep did not run, taken from an earlier sweep or an
// exported file by a warm start (issue 28, docs/sweep-format.md "Warm
// starts"); its `reason` names the source. It may be best and the searchers
// learn from it, but no event moves it: never dispatched, retried or counted
// as work the sweep launched.
#define SWEPT_TRIAL_STATES(X)                                         \
  X(kQueued, "queued", false, false, false, false, kNeutral)          \
  X(kRunning, "running", false, false, false, false, kActive)         \
  X(kCompleted, "completed", true, true, false, true, kGood)          \
  X(kFailed, "failed", true, false, true, true, kBad)                 \
  X(kStopped, "stopped", true, false, false, true, kHalted)           \
  X(kLost, "lost", true, false, true, false, kWarn)                   \
  X(kEarlyStopped, "early_stopped", true, false, false, true, kPartial) \
  X(kImported, "imported", true, true, false, false, kGood)

// X(enumerator, name, tone)
#define SWEPT_SWEEP_STATES(X)          \
  X(kRunning, "running", kActive)      \
  X(kCompleted, "completed", kGood)    \
  X(kCancelled, "cancelled", kHalted)

// X(enumerator, name, tone): an agent that takes work (good), or one that
// does not (warn).
#define SWEPT_AGENT_STATES(X)   \
  X(kAlive, "alive", kGood)     \
  X(kLost, "lost", kWarn)       \
  X(kGone, "gone", kWarn)

#define SWEPT_STATE_ENUMERATOR(e, ...) e,
enum class Tone : uint8_t { SWEPT_TONES(SWEPT_STATE_ENUMERATOR) };
enum class TrialState : uint8_t { SWEPT_TRIAL_STATES(SWEPT_STATE_ENUMERATOR) };
enum class SweepState : uint8_t { SWEPT_SWEEP_STATES(SWEPT_STATE_ENUMERATOR) };
enum class AgentState : uint8_t { SWEPT_AGENT_STATES(SWEPT_STATE_ENUMERATOR) };
#undef SWEPT_STATE_ENUMERATOR

#define SWEPT_STATE_ONE(...) +1
inline constexpr size_t kToneCount = 0 SWEPT_TONES(SWEPT_STATE_ONE);
inline constexpr size_t kTrialStateCount = 0 SWEPT_TRIAL_STATES(SWEPT_STATE_ONE);
inline constexpr size_t kSweepStateCount = 0 SWEPT_SWEEP_STATES(SWEPT_STATE_ONE);
inline constexpr size_t kAgentStateCount = 0 SWEPT_AGENT_STATES(SWEPT_STATE_ONE);
#undef SWEPT_STATE_ONE

struct TrialStateInfo {
  TrialState state;
  std::string_view name;
  bool final, counts_for_best, retryable, process_outcome;
  Tone tone;
};

#define SWEPT_TRIAL_STATE_ROW(e, n, f, b, r, o, t) TrialStateInfo{TrialState::e, n, f, b, r, o, Tone::t},
// Every trial state in declaration (display) order.
inline constexpr std::array<TrialStateInfo, kTrialStateCount> kTrialStates = {
    SWEPT_TRIAL_STATES(SWEPT_TRIAL_STATE_ROW)};
#undef SWEPT_TRIAL_STATE_ROW

#define SWEPT_STATE_NAME(e, n, ...) std::string_view(n),
inline constexpr std::array<std::string_view, kToneCount> kToneNames = {SWEPT_TONES(SWEPT_STATE_NAME)};
inline constexpr std::array<std::string_view, kSweepStateCount> kSweepStateNames = {
    SWEPT_SWEEP_STATES(SWEPT_STATE_NAME)};
inline constexpr std::array<std::string_view, kAgentStateCount> kAgentStateNames = {
    SWEPT_AGENT_STATES(SWEPT_STATE_NAME)};
#undef SWEPT_STATE_NAME

#define SWEPT_STATE_TONE(e, n, t) Tone::t,
inline constexpr std::array<Tone, kSweepStateCount> kSweepStateTones = {SWEPT_SWEEP_STATES(SWEPT_STATE_TONE)};
inline constexpr std::array<Tone, kAgentStateCount> kAgentStateTones = {SWEPT_AGENT_STATES(SWEPT_STATE_TONE)};
#undef SWEPT_STATE_TONE

constexpr size_t index_of(TrialState s) { return static_cast<size_t>(s); }
constexpr const TrialStateInfo& info(TrialState s) { return kTrialStates[index_of(s)]; }
constexpr std::string_view name(TrialState s) { return info(s).name; }
// The names of the trial states for which `keep` holds, quoted for SQL and
// joined by ", " ('completed', 'failed'): for the CHECK on trials.state and
// for queries over a class of states (those that count for best, say).
std::string sql_state_list(bool (*keep)(const TrialStateInfo&));
constexpr std::string_view name(SweepState s) { return kSweepStateNames[static_cast<size_t>(s)]; }
constexpr std::string_view name(AgentState s) { return kAgentStateNames[static_cast<size_t>(s)]; }
constexpr bool is_final(TrialState s) { return info(s).final; }
// A tone's name (the dashboard's CSS class is "tone-" + name), and each
// state's tone.
constexpr std::string_view name(Tone t) { return kToneNames[static_cast<size_t>(t)]; }
constexpr Tone tone(TrialState s) { return info(s).tone; }
constexpr Tone tone(SweepState s) { return kSweepStateTones[static_cast<size_t>(s)]; }
constexpr Tone tone(AgentState s) { return kAgentStateTones[static_cast<size_t>(s)]; }
// The name shown to people ("early-stopped"): the wire name with '_' as '-'.
inline std::string display_name(TrialState s) {
  std::string out(name(s));
  for (char& c : out)
    if (c == '_') c = '-';
  return out;
}

// The state a name spells, or nullopt for a name that is not one.
std::optional<TrialState> trial_state_named(std::string_view name);
std::optional<SweepState> sweep_state_named(std::string_view name);
std::optional<AgentState> agent_state_named(std::string_view name);

// What happens to a trial.
enum class TrialEventKind : uint8_t {
  kDispatch,  // the scheduler starts a new attempt on an agent
  kAdopt,     // its agent came back still running the attempt given up while it was away
  kFinish,    // its process ended; `outcome` says how (a process_outcome state)
  kCancel,    // the user cancelled it (or its sweep)
  kLose,      // its agent went away while it ran
  kReject,    // its command cannot be built from its parameters
  kRetry,     // `swept retry` (failed, lost)
  kRetryEarlyStopped,  // `swept retry --early-stopped`: early_stopped as well
  // The attempt ended for a reason that is not the trial's (a host fault, its
  // agent draining or shutting down): queued again WITHOUT spending a retry.
  kRequeue,
};

struct TrialEvent {
  TrialEventKind kind;
  TrialState outcome = TrialState::kFailed;  // kFinish only
  static constexpr TrialEvent finish(TrialState outcome) { return {TrialEventKind::kFinish, outcome}; }
};

// The one transition function of a trial (the table in store/schema.sql's
// essay; tested against a hand-written table in states_test.cpp).
// `retries_left`: how many more attempts the trial may have (only kLose reads
// it: a retry left requeues, none leaves it `lost`; kRequeue ignores it). nullopt: the event does
// not apply in that state (a stale or repeated message); the caller keeps the
// state as it is.
std::optional<TrialState> next_trial_state(TrialState from, TrialEvent event, int retries_left);

}  // namespace swept
