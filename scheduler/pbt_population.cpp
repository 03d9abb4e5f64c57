// PbtPopulation (pbt_population.h): the members' standings between rounds,
// and a round carried out on them through sweeps/'s pure plan_round.
#include "scheduler/pbt_population.h"

#include <algorithm>

namespace swept::scheduler {

using sweeps::pbt::Standing;

void PbtPopulation::add(int64_t trial_id, int slot, nlohmann::json params) {
  Member m;
  m.slot = slot;
  m.params = std::move(params);
  members_[trial_id] = std::move(m);
}

PbtPopulation::Stop PbtPopulation::observe(int64_t trial_id, int64_t step, double value) {
  auto it = members_.find(trial_id);
  // A gone member rerunning is stopped at the interval too: it joins the
  // round when it gets there before the round runs.
  if (it == members_.end() || it->second.stop_sent || it->second.standing == Standing::kReached) return Stop::kNone;
  Member& m = it->second;
  const auto& max_steps = spec_.pbt->max_steps;
  if (max_steps && step >= *max_steps) {
    m.stop_sent = true;
    return Stop::kDone;
  }
  // A segment given an earlier round's interval (a rerun the round did not
  // wait for) stops there too; its round has run, so reached() sends it on.
  const int64_t stop_at = m.segment_stop > 0 ? std::min(m.segment_stop, stop_step()) : stop_step();
  if (step < stop_at) return Stop::kNone;
  // The first value at or past the interval is the member's value for the
  // round (a program that logs every k steps may not log the interval's own).
  m.stop_sent = true;
  m.value = value;
  m.from_step = m.own_step = step;
  m.stopped_for = stop_at / spec_.pbt->interval;
  return Stop::kInterval;
}

int64_t PbtPopulation::segment_starts(int64_t trial_id) {
  auto it = members_.find(trial_id);
  if (it == members_.end()) return next_stop_step();
  return it->second.segment_stop = next_stop_step();
}

bool PbtPopulation::reached(int64_t trial_id, int attempt) {
  auto it = members_.find(trial_id);
  if (it == members_.end()) return false;
  Member& m = it->second;
  m.segment = attempt;
  m.stop_sent = false;
  m.next = protocol::CheckpointSegment{trial_id, attempt};
  m.next_step = m.own_step;
  if (m.stopped_for < round_) {  // its round ran while it was lost: on to the next
    m.standing = Standing::kRunning;
    return false;
  }
  m.standing = Standing::kReached;
  return true;
}

bool PbtPopulation::holding() const {
  return std::any_of(members_.begin(), members_.end(),
                     [](const auto& m) { return m.second.standing == Standing::kReached; });
}

bool PbtPopulation::gone(int64_t trial_id, bool failed) {
  auto it = members_.find(trial_id);
  if (it == members_.end()) return false;
  Member& m = it->second;
  m.standing = Standing::kGone;
  m.stop_sent = false;
  const bool from_donor = m.next.from_trial_id && *m.next.from_trial_id != trial_id;
  if (from_donor && !failed) {
    // Lost with its host: the donor's checkpoint is still the newest complete
    // one of its line (its own older one belongs to the branch the exploit
    // left), so it starts from that again. A stop at the interval may have
    // moved from_step on meanwhile; the checkpoint's own step holds.
    m.from_step = m.next_step;
    return false;
  }
  // Rerun from its own newest complete checkpoint, with the parameters it has.
  m.next = m.segment > 0 ? protocol::CheckpointSegment{trial_id, m.segment} : protocol::CheckpointSegment{};
  m.from_step = m.next_step = m.segment > 0 ? m.own_step : 0;
  return from_donor;
}

nlohmann::json PbtPopulation::params(int64_t trial_id) const {
  auto it = members_.find(trial_id);
  return it == members_.end() ? nlohmann::json() : it->second.params;
}

void PbtPopulation::ended(int64_t trial_id) { members_.erase(trial_id); }

bool PbtPopulation::ready() const {
  bool any_reached = false;
  for (const auto& [id, m] : members_) {
    if (m.standing == Standing::kRunning) return false;
    any_reached = any_reached || m.standing == Standing::kReached;
  }
  return any_reached;
}

std::vector<int64_t> PbtPopulation::release_waiting() {
  std::vector<int64_t> out;
  for (auto it = members_.begin(); it != members_.end();) {
    if (it->second.standing != Standing::kReached) {
      ++it;
      continue;
    }
    out.push_back(it->first);
    it = members_.erase(it);
  }
  return out;
}

sweeps::pbt::RoundPlan PbtPopulation::run_round(std::vector<int64_t>* resumed) {
  std::vector<sweeps::pbt::MemberReport> reports;
  for (const auto& [id, m] : members_) reports.push_back({id, m.slot, m.standing, m.value, m.params});
  sweeps::pbt::RoundPlan plan = sweeps::pbt::plan_round(spec_, round_, reports);
  for (const sweeps::pbt::MemberPlan& p : plan.members) {
    Member& m = members_.at(p.member);
    if (m.standing == Standing::kReached) {
      const int64_t source = p.donor.value_or(p.member);
      const Member& from = members_.at(source);
      m.next = protocol::CheckpointSegment{source, from.segment};
      m.params = p.params;
      if (p.donor) m.from_step = from.from_step;
      m.next_step = m.from_step;
      resumed->push_back(p.member);
    }
    // Every member, the gone ones too (rerunning meanwhile), aims at the next interval.
    m.standing = Standing::kRunning;
  }
  ++round_;
  return plan;
}

int64_t PbtPopulation::next_stop_step() const {
  const auto& max_steps = spec_.pbt->max_steps;
  return max_steps ? std::min(*max_steps, stop_step()) : stop_step();
}

protocol::CheckpointSegment PbtPopulation::next_checkpoint(int64_t trial_id) const {
  auto it = members_.find(trial_id);
  return it == members_.end() ? protocol::CheckpointSegment{} : it->second.next;
}

int64_t PbtPopulation::from_step(int64_t trial_id) const {
  auto it = members_.find(trial_id);
  return it == members_.end() ? 0 : it->second.from_step;
}

}  // namespace swept::scheduler
