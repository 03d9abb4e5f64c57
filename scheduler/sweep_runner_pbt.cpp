// SweepRunner's population-based training (issue 29; sweep_runner.h): a
// `method: pbt` sweep's members are its trials; PbtPopulation decides when a
// member stops and when its round runs, sweeps/pbt.h what each member does
// next; this file records those decisions (parameters, command, lineage)
// and keeps the queue and the running count as the rest of the runner does.
#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "common/log.h"
#include "scheduler/sweep_runner.h"
#include "sweeps/pbt.h"
#include "sweeps/trial.h"

namespace swept::scheduler {
namespace {

// The command macros read the scheduler's environment, as generate() does.
const sweeps::CommandContext& pbt_command_context() {
  static const sweeps::CommandContext context = [] {
    sweeps::CommandContext c;
    c.getenv = [](const std::string& name) -> std::optional<std::string> {
      const char* v = std::getenv(name.c_str());
      return v ? std::optional<std::string>(v) : std::nullopt;
    };
    return c;
  }();
  return context;
}

std::string sweep_and_trial(int64_t sweep_id, int64_t trial_id) {
  return "sweep " + std::to_string(sweep_id) + " trial " + std::to_string(trial_id);
}

// The SWEPT_PBT_STOP_STEP a running member's segment was given, from the
// environment its start recorded (trials.env), when that start is of
// attempt `attempt` (a start not yet written leaves an earlier attempt's);
// 0 when it cannot be told.
int64_t given_stop_step(const std::string& env_json, int attempt) {
  const nlohmann::json env = nlohmann::json::parse(env_json, nullptr, /*allow_exceptions=*/false);
  if (!env.is_object()) return 0;
  auto text = [&](const char* name) {
    auto it = env.find(name);
    return it != env.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (text("SWEPT_ATTEMPT") != std::to_string(attempt)) return 0;
  const std::string stop = text("SWEPT_PBT_STOP_STEP");
  int64_t v = 0;
  auto [end, ec] = std::from_chars(stop.data(), stop.data() + stop.size(), v);
  return ec == std::errc() && end == stop.data() + stop.size() && v > 0 ? v : 0;
}

}  // namespace

void SweepRunner::make_population(Active& s) {
  if (s.spec.pbt && s.spec.metric) s.population = std::make_shared<PbtPopulation>(s.spec);
}

Status SweepRunner::rebuild_population(Active& s, std::vector<RecoveredTrial>& live) {
  PbtPopulation& pop = *s.population;
  const sweeps::pbt::PbtSettings& pbt = *s.spec.pbt;
  const std::string& metric = s.spec.metric->name;
  SWEPT_ASSIGN_OR_RETURN(records, store_.pbt_members(s.id, kPbtIntervalReason));
  int64_t round = 1;  // the round being gathered: one past the newest that ran
  for (const auto& r : records) round = std::max(round, r.lineage_round + 1);
  pop.restore_round(round);
  int restored = 0;
  for (const auto& r : records) {
    if (r.state != TrialState::kQueued && r.state != TrialState::kRunning) continue;  // it left the population
    PbtPopulation::Member m;
    m.slot = static_cast<int>(r.index);
    m.params = nlohmann::json::parse(r.params_json, nullptr, false);
    m.segment = r.interval_segment;
    m.stopped_for = round - 1;
    // Its newest lineage row names where its segments since start from (a
    // round's decision, a correction after a failed segment, or its own
    // after a round that ran without it): a member lost after the restart
    // reruns from there, as it would have before (PbtPopulation::gone).
    if (r.donor_trial_id) {
      m.next = protocol::CheckpointSegment{*r.donor_trial_id, r.donor_segment};
      m.next_step = m.from_step = r.lineage_from_step;
      // Its own newest complete checkpoint, should the donor's fail: the one
      // at that round's interval.
      SWEPT_ASSIGN_OR_RETURN(own, store_.first_metric_from(r.trial_id, metric, r.lineage_round * pbt.interval));
      m.own_step = own ? own->first : 0;
    } else {
      m.own_step = m.from_step = m.next_step = r.lineage_round > 0 ? r.lineage_from_step : 0;
      m.next = m.segment > 0 ? protocol::CheckpointSegment{r.trial_id, m.segment} : protocol::CheckpointSegment{};
    }
    // Its first value at or past the interval (or max_steps) being gathered.
    std::optional<std::pair<int64_t, double>> at_max;
    if (pbt.max_steps) {
      SWEPT_ASSIGN_OR_RETURN(done, store_.first_metric_from(r.trial_id, metric, *pbt.max_steps));
      at_max = done;
    }
    // A running rerun may have been given an earlier round's interval, which
    // that round, not waiting for it, has passed (PbtPopulation::observe): it stops there.
    int64_t stop_at = pop.stop_step();
    if (r.state == TrialState::kRunning) {
      m.segment_stop = given_stop_step(r.env_json, r.attempts);
      if (m.segment_stop > 0) stop_at = std::min(stop_at, m.segment_stop);
    }
    SWEPT_ASSIGN_OR_RETURN(at_stop, store_.first_metric_from(r.trial_id, metric, stop_at));
    if (r.state == TrialState::kRunning) {
      // Running toward the interval; one already past it was sent its stop
      // by the scheduler before (or will be now): owed again on re-registration.
      if (at_max || at_stop) {
        m.stop_sent = true;
        if (!at_max)
          m.value = at_stop->second, m.from_step = m.own_step = at_stop->first, m.stopped_for = stop_at / pbt.interval;
        for (RecoveredTrial& t : live)
          if (t.trial_id == r.trial_id) (at_max ? t.pbt_done_stop : t.pbt_interval_stop) = true;
      }
    } else if (r.attempts > 0 && r.interval_segment == r.attempts && at_stop) {
      // Its segment ended at this round's interval: it waits for the round, not in the queue.
      m.standing = sweeps::pbt::Standing::kReached;
      m.value = at_stop->second;
      m.from_step = m.own_step = at_stop->first;
      m.stopped_for = round;
      std::erase(s.queued, r.trial_id);
    } else if (r.attempts > 0 && r.interval_segment == r.attempts) {
      // Resumed by the round before (or gone on after it), waiting for a
      // place: from where its lineage says, as set above.
    } else if (r.attempts > 0) {
      m.standing = sweeps::pbt::Standing::kGone;  // lost or failed: reruns from its own checkpoint
    }
    pop.restore(r.trial_id, std::move(m));
    ++restored;
  }
  log::info("sweep " + std::to_string(s.id) + ": pbt population rebuilt after the restart: " +
            std::to_string(restored) + " members, gathering round " + std::to_string(round));
  return Status::Ok();
}

Status SweepRunner::pbt_created(Active& s, TrialToStart& t) {
  s.population->add(t.trial_id, static_cast<int>(t.index), t.params);
  t.checkpoint = protocol::CheckpointSegment{};  // its first segment: an empty directory of its own
  t.env["SWEPT_PBT_STOP_STEP"] = std::to_string(s.population->segment_starts(t.trial_id));
  store::Writer::LineageRow row;
  row.trial_id = t.trial_id;
  row.params_json = t.params.dump();
  row.decided_at = clock_.wall_seconds();
  return store_.record_lineage(row);
}

Result<std::optional<SweepRunner::PbtStopOrder>> SweepRunner::observe_pbt(
    int64_t sweep_id, int64_t trial_id, const std::vector<protocol::MetricRecord>& records) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end() || !it->second.population) return std::optional<PbtStopOrder>();
  PbtPopulation& pop = *it->second.population;
  const std::string& metric = it->second.spec.metric->name;
  for (const protocol::MetricRecord& r : records) {
    if (r.name != metric) continue;
    const int64_t round = pop.round();
    switch (pop.observe(trial_id, r.step, r.value)) {
      case PbtPopulation::Stop::kNone: continue;
      case PbtPopulation::Stop::kDone:
        return std::optional<PbtStopOrder>(PbtStopOrder{true, "reached pbt.max_steps at step " + std::to_string(r.step)});
      case PbtPopulation::Stop::kInterval:
        log::info(sweep_and_trial(sweep_id, trial_id) + " reached the interval of round " + std::to_string(round) +
                  " at step " + std::to_string(r.step));
        return std::optional<PbtStopOrder>(
            PbtStopOrder{false, "pbt round " + std::to_string(round) + ": at its interval (step " +
                                    std::to_string(r.step) + "), it saves and waits for the population"});
    }
  }
  return std::optional<PbtStopOrder>();
}

Result<bool> SweepRunner::pbt_requeued(const TrialRequeued& e) {
  auto it = sweeps_.find(e.sweep_id);
  if (it == sweeps_.end() || !it->second.population || !it->second.population->has(e.trial_id)) return false;
  Active& s = it->second;
  if (!e.at_interval) {
    // Lost (or its agent shut down) in mid-segment, or failed with a retry
    // left: the round does not wait; it reruns from its own newest complete
    // checkpoint, queued as any rerun.
    if (s.population->gone(e.trial_id, e.failed)) {
      // It was to start from a donor's checkpoint (which could not be had,
      // or its run failed): the round's lineage says it resumes from its own.
      store::Writer::LineageRow row;
      row.trial_id = e.trial_id;
      row.round = s.population->round() - 1;
      row.from_step = s.population->from_step(e.trial_id);
      row.params_json = s.population->params(e.trial_id).dump();
      row.changes_json = nlohmann::json::array({"its segment from the donor's checkpoint did not complete: it "
                                                "resumed from its own checkpoint instead"}).dump();
      row.decided_at = clock_.wall_seconds();
      SWEPT_RETURN_IF_ERROR(store_.record_lineage(row));
    }
    const protocol::CheckpointSegment from = s.population->next_checkpoint(e.trial_id);
    log::info(sweep_and_trial(s.id, e.trial_id) + ": its segment " + (e.failed ? "ended with an error" : "was lost") +
              "; the population goes on without it, and it reruns from " +
              (from.from_trial_id ? "trial " + std::to_string(*from.from_trial_id) + "'s segment " +
                                        std::to_string(from.from_attempt)
                                  : std::string("the start")));
    return false;
  }
  s.running = std::max(0, s.running - 1);
  if (s.population->reached(e.trial_id, e.attempt)) return true;
  // The round it stopped for ran while it was away: it goes on from this
  // segment. Its lineage says so for that round, so that the newest row
  // always names where its next segment starts (rebuild_population reads it).
  store::Writer::LineageRow row;
  row.trial_id = e.trial_id;
  row.round = s.population->late_round(e.trial_id);
  row.from_step = s.population->from_step(e.trial_id);
  row.params_json = s.population->params(e.trial_id).dump();
  row.changes_json = nlohmann::json::array({"it reached this round's interval after the round had run: it went on "
                                            "from its own checkpoint"}).dump();
  row.decided_at = clock_.wall_seconds();
  SWEPT_RETURN_IF_ERROR(store_.record_lineage(row));
  s.queued.push_front(e.trial_id);
  return true;
}

Status SweepRunner::pbt_ended(const TrialEnded& e) {
  auto it = sweeps_.find(e.sweep_id);
  if (it == sweeps_.end() || !it->second.population || !it->second.population->has(e.trial_id)) return Status::Ok();
  it->second.population->ended(e.trial_id);
  return pbt_maybe_round(e.sweep_id);
}

Status SweepRunner::pbt_maybe_round(int64_t sweep_id) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end() || !it->second.population || !it->second.population->ready()) return Status::Ok();
  Active& s = it->second;
  PbtPopulation& pop = *s.population;
  std::vector<int64_t> resumed;
  const sweeps::pbt::RoundPlan plan = pop.run_round(&resumed);
  const double now = clock_.wall_seconds();
  int exploited = 0;
  for (const sweeps::pbt::MemberPlan& p : plan.members) {
    if (std::find(resumed.begin(), resumed.end(), p.member) == resumed.end()) continue;
    auto argv = sweeps::build_command(s.spec, p.params, pbt_command_context());
    if (!argv.ok()) return argv.status().WithContext(sweep_and_trial(s.id, p.member) + ": the explored parameters");
    SWEPT_RETURN_IF_ERROR(store_.set_trial_params(p.member, p.params.dump(), nlohmann::json(*argv).dump()));
    store::Writer::LineageRow row;
    row.trial_id = p.member;
    row.round = plan.round;
    row.from_step = pop.from_step(p.member);
    const protocol::CheckpointSegment from = pop.next_checkpoint(p.member);
    if (p.donor) row.donor_trial_id = p.donor, row.donor_segment = from.from_attempt;
    row.params_json = p.params.dump();
    row.changes_json = nlohmann::json(p.changes).dump();
    row.decided_at = now;
    SWEPT_RETURN_IF_ERROR(store_.record_lineage(row));
    if (p.donor) {
      ++exploited;
      std::string changes;
      for (const std::string& c : p.changes) changes += (changes.empty() ? "" : "; ") + c;
      log::info(sweep_and_trial(s.id, p.member) + " round " + std::to_string(plan.round) + ": copies trial " +
                std::to_string(*p.donor) + "'s checkpoint (segment " + std::to_string(from.from_attempt) + ")" +
                (changes.empty() ? std::string(", parameters unchanged") : ", " + changes));
    }
    s.queued.push_back(p.member);
  }
  log::info("sweep " + std::to_string(s.id) + ": pbt round " + std::to_string(plan.round) + " ran: " +
            std::to_string(resumed.size()) + " members resume, " + std::to_string(exploited) + " from a better one's "
            "checkpoint");
  return Status::Ok();
}

}  // namespace swept::scheduler
