// `swept status [SWEEP]`: without a sweep, one line per sweep; with one, its
// trials by state and the best trial so far with its parameters (several
// objectives: the size of the Pareto front and its hypervolume). From the
// scheduler, or from a database file with --db.
#include "cli/client_common.h"
#include "cli/command.h"

namespace swept::cli {
namespace {

// The names a sweep's completed trials reported instead of its metric.
std::string reported_text(const MetricMissing& m) {
  if (m.reported.empty()) return "they reported no metrics at all (a metric line is one JSON object per line)";
  std::string out = "they reported: ";
  for (size_t i = 0; i < m.reported.size(); ++i) out += (i ? ", " : "") + m.reported[i];
  return out;
}

std::string progress(const SweepRow& s) {
  int64_t done = done_of_total(s);
  const int64_t imported = s.counts[TrialState::kImported];
  return std::to_string(done) + "/" + (s.total_trials ? std::to_string(*s.total_trials) : std::string("inf")) +
         (imported ? " (" + std::to_string(imported) + " imported)" : "");
}

// A sweep with several objectives: how many trials are on its Pareto front
// and the hypervolume the front dominates (store/reader.h, "Several objectives").
void print_front_summary(const ParetoFront& f) {
  std::cout << "  objectives:";
  for (const auto& o : f.objectives) std::cout << " " << terminal_safe(o.name) << " (" << o.goal << ")";
  if (f.evaluated == 0) {  // no reference point yet either
    std::cout << "\n  Pareto front: no completed trial has reported every objective yet\n";
    return;
  }
  std::cout << "\n  Pareto front: " << f.trial_ids.size() << " trial" << (f.trial_ids.size() == 1 ? "" : "s") << " of "
            << f.evaluated << " completed with every objective";
  if (f.infeasible) std::cout << " (" << f.infeasible << " infeasible)";
  std::cout << "; hypervolume " << fmt_num(f.hypervolume) << " against the reference point (";
  for (size_t i = 0; i < f.reference.size(); ++i) std::cout << (i ? ", " : "") << fmt_num(f.reference[i]);
  std::cout << ")\n";
}

int run_status(const std::vector<std::string>& args) {
  ClientFlags flags;
  std::string sweep;
  po::options_description desc("options");
  desc.add_options()("sweep", po::value(&sweep), "a sweep id");
  add_client_flags(desc, flags, true);
  po::positional_options_description pos;
  pos.add("sweep", 1);
  if (auto rc = parse_flags("status", "swept status [SWEEP] [--scheduler ADDR | --db FILE]", args, desc, pos))
    return *rc;
  std::optional<int64_t> id;
  if (!sweep.empty()) {
    auto p = parse_id("SWEEP", sweep);
    if (!p.ok()) return report("status", p.status());
    id = *p;
  }
  auto src = ResultSource::open(flags);
  if (!src.ok()) return report("status", src.status());
  auto sums = src->sweeps(id);
  if (!sums.ok()) return report("status", sums.status());
  if (!id) {
    if (sums->empty()) {
      std::cout << "no sweeps yet (swept submit FILE)\n";
      return kExitOk;
    }
    Table t({"SWEEP", "NAME", "METHOD", "STATE", "DONE", "RUNNING", "QUEUED", "FAILED", "METRIC", "BEST"});
    for (const auto& s : *sums)
      t.add({std::to_string(s.id), s.name.empty() ? "-" : s.name, s.method, std::string(name(s.state)), progress(s),
             std::to_string(s.counts[TrialState::kRunning]), std::to_string(s.counts[TrialState::kQueued]),
             std::to_string(s.counts[TrialState::kFailed]),
             s.front          ? objective_names(*s.front)
             : s.metric_name  ? *s.metric_name + " (" + s.metric_goal.value_or("minimize") + ")"
                              : "-",
             s.front            ? "front of " + std::to_string(s.front->trial_ids.size())
             : s.metric_missing ? std::string("never reported")
                                : fmt_opt(s.best ? std::optional<double>(s.best->value) : std::nullopt)});
    t.print(std::cout);
    return kExitOk;
  }
  const auto& s = sums->front();
  std::cout << "sweep " << s.id << (s.name.empty() ? "" : " (" + terminal_safe(s.name) + ")") << ": " << s.method << ", "
            << name(s.state) << ", " << progress(s) << " trials done\n";
  std::cout << " ";
  for (const auto& st : kTrialStates)
    std::cout << (st.state == kTrialStates.front().state ? " " : ", ") << display_name(st.state) << " "
              << s.counts[st.state];
  std::cout << "\n";
  if (!s.constraints.empty())
    std::cout << "  constraints: " << terminal_safe(constraints_text(s.constraints)) << " (an infeasible trial is never best)\n";
  if (s.front) print_front_summary(*s.front);
  if (s.metric_name) {
    if (s.best)
      std::cout << "  best " << terminal_safe(*s.metric_name) << " = " << fmt_num(s.best->value) << " (trial "
                << s.best->trial_id << "): " << terminal_safe(params_text(s.best->params)) << "\n";
    else if (s.metric_missing)
      std::cout << "  warning: " << s.metric_missing->completed << " trial"
                << (s.metric_missing->completed == 1 ? " has" : "s have") << " completed and none reported the metric '"
                << terminal_safe(*s.metric_name) << "'; " << terminal_safe(reported_text(*s.metric_missing))
                << ". Check the sweep's metric.name against the trials' metric lines (docs/metrics.md)\n";
    else if (s.counts[TrialState::kCompleted] > 0)
      std::cout << "  best " << terminal_safe(*s.metric_name) << ": no completed trial has reported it yet"
                << " (a trial that did not complete has)\n";
    else
      std::cout << "  best " << terminal_safe(*s.metric_name) << ": no completed trial has reported it yet\n";
  }
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("status", "show sweeps, or one sweep's trials by state and its best trial", run_status);
}  // namespace swept::cli
