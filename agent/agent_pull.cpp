// The agent's checkpoint pulls (agent/agent_loop.h; issue 29): a pbt
// segment whose checkpoint another agent holds (START_TRIAL
// `checkpoint.from_agent`) starts only once that checkpoint is here, pulled
// through the scheduler piece by piece (checkpoint_transfer.h) and verified.
// As the holder, the agent answers each pull it is relayed.
//
// A pull not answered within kPullResendMs is sent again (the holder keeps
// no state, so that is safe; the scheduler leaves a pull whose holder is
// not connected unanswered, and a resend reaches the holder once it is
// back); one that makes no progress for kPullGiveUpMs ends the trial
// unstarted. A failed pull is reported as a launch failure
// (TRIAL_EXITED launch_failed), so that the scheduler reruns the member from
// a checkpoint it can still reach (docs/checkpoints.md, "Faults").
#include <filesystem>
#include <utility>

#include "agent/agent_loop.h"

namespace swept::agent::loop {
namespace {

constexpr int64_t kPullResendMs = 2000;
constexpr int64_t kPullGiveUpMs = 60000;

std::string source_of(const pr::StartTrial& start) {
  const pr::CheckpointSegment& c = *start.checkpoint;
  return "the checkpoint of trial " + std::to_string(*c.from_trial_id) + " segment " +
         std::to_string(c.from_attempt) + " from agent " + c.from_agent;
}

}  // namespace

bool Agent::needs_pull(const pr::StartTrial& start) {
  return start.checkpoint && start.checkpoint->from_trial_id && !start.checkpoint->from_agent.empty();
}

void Agent::begin_pull(const TrialKey& key, const pr::StartTrial& start, int64_t now) {
  const std::string relative = trial_relative_dir(start.sweep_id, start.trial_id, start.workdir);
  if (Status ok = check_relative_workdir(relative); !ok.ok()) {
    finish_without_start(key, trials_[key], pr::ExitCause::kLaunchFailed, ok.message());
    return;
  }
  // Where the supervisor looks for it (supervisor.cpp, prepare_segment).
  const std::filesystem::path dest = std::filesystem::path(supervisor_options_.workdir_root) / relative / "segments" /
                                     (std::to_string(start.attempt) + ".pulled");
  const pr::CheckpointSegment& c = *start.checkpoint;
  pr::CheckpointPull first{start.trial_id, start.attempt, 0, *c.from_trial_id, c.from_attempt, "", 0};
  Pulling p{start, CheckpointFetch(first, dest.string()), now, now, now};
  log::info(describe(key) + ": pulling " + source_of(start));
  auto [it, fresh] = pulls_.insert_or_assign(key, std::move(p));
  send(it->second.fetch.pull());
}

void Agent::on(const pr::CheckpointPull& pull, int64_t now) {
  const int64_t t0 = clock_.now_us();
  pr::CheckpointPart part = serve_pull(supervisor_options_.workdir_root, pull);
  const TrialKey key{pull.trial_id, pull.attempt};
  const std::string what = "the checkpoint of trial " + std::to_string(pull.from_trial_id) + " segment " +
                           std::to_string(pull.from_attempt) + " for " + describe(key);
  if (!part.error.empty()) log::warn("a pull for " + describe(key) + ": " + part.error);
  if (pull.path.empty() && part.error.empty()) {
    // A transfer begins (or begins again): noted, to log its size and time at its end.
    if (serving_.size() > 1000) serving_.clear();  // pulls given up long ago; a log line is all they cost
    Serving& s = serving_[key] = Serving{now, static_cast<int64_t>(part.files.size()), 0, "", 0};
    for (const pr::CheckpointFile& f : part.files) {
      s.bytes += f.size;
      if (f.size > 0) s.last_path = f.path, s.last_size = f.size;
    }
    log::info("sending " + what + ": " + std::to_string(s.files) + " files, " + std::to_string(s.bytes) +
              " bytes (manifest in " + std::to_string((clock_.now_us() - t0) / 1000) + " ms)");
  }
  auto s = serving_.find(key);
  const bool last = s != serving_.end() && part.error.empty() &&
                    (s->second.last_path.empty() ? pull.path.empty()
                                                 : pull.path == s->second.last_path &&
                                                       pull.offset + static_cast<int64_t>(part.data.size()) ==
                                                           s->second.last_size);
  if (last) {
    log::info("sent " + what + ": " + std::to_string(s->second.files) + " files, " + std::to_string(s->second.bytes) +
              " bytes in " + std::to_string(now - s->second.began_ms) + " ms");
    serving_.erase(s);
  }
  send(part);
}

void Agent::on(const pr::CheckpointPart& part, int64_t now) {
  const TrialKey key{part.trial_id, part.attempt};
  auto it = pulls_.find(key);
  if (it == pulls_.end()) {
    log::debug("a CHECKPOINT_PART for " + describe(key) + ", which pulls nothing here: ignored");
    return;
  }
  Pulling& p = it->second;
  auto moved = p.fetch.take(part);
  if (!moved.ok()) {
    const std::string why = source_of(p.start) + " could not be pulled: " + moved.status().message();
    pulls_.erase(it);
    finish_without_start(key, trials_[key], pr::ExitCause::kLaunchFailed, why);
    return;
  }
  if (!*moved) return;  // a duplicate of a part already taken
  p.progress_ms = now;
  if (!p.fetch.done()) {
    p.sent_ms = now;
    send(p.fetch.pull());
    return;
  }
  log::info(describe(key) + ": " + source_of(p.start) + " pulled and verified: " +
            std::to_string(p.fetch.stats().files) + " files, " + std::to_string(p.fetch.stats().bytes) + " bytes in " +
            std::to_string(now - p.began_ms) + " ms");
  pr::StartTrial start = std::move(p.start);
  pulls_.erase(it);
  start_trial(key, start, now, /*pulled=*/true);
}

void Agent::service_pulls(int64_t now) {
  for (auto it = pulls_.begin(); it != pulls_.end();) {
    Pulling& p = it->second;
    if (now - p.progress_ms >= kPullGiveUpMs) {
      const TrialKey key = it->first;
      const std::string why = source_of(p.start) + " could not be pulled: no answer for " +
                              std::to_string(kPullGiveUpMs / 1000) + " s";
      p.fetch.abandon();
      it = pulls_.erase(it);
      finish_without_start(key, trials_[key], pr::ExitCause::kLaunchFailed, why);
      continue;
    }
    if (now - p.sent_ms >= kPullResendMs && link_state_ == Link::kRegistered) {
      p.sent_ms = now;
      send(p.fetch.pull());
    }
    ++it;
  }
}

bool Agent::stop_pull(const TrialKey& key, const std::string& reason) {
  auto it = pulls_.find(key);
  if (it == pulls_.end()) return false;
  it->second.fetch.abandon();
  pulls_.erase(it);
  finish_without_start(key, trials_[key], pr::ExitCause::kStopped,
                       reason.empty() ? "stopped by the scheduler before its checkpoint arrived" : reason);
  return true;
}

void Agent::end_pulls(std::optional<pr::ExitCause> cause, const std::string& reason) {
  for (auto& [key, p] : std::exchange(pulls_, {})) {
    p.fetch.abandon();
    if (cause) finish_without_start(key, trials_[key], *cause, reason);
  }
}

}  // namespace swept::agent::loop
