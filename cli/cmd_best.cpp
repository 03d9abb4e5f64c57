// `swept best SWEEP [--json]`: the completed trial with the best value of the
// sweep's metric, its parameters and latest metrics; for a sweep with several
// objectives, its Pareto front; for a pbt member, its parameter schedule (the
// parameters in force from each step on, and whose checkpoint it took). Exit 2
// when the sweep names no metric, 1 when no completed (feasible) trial
// reported it (every objective) yet.
#include <unordered_map>

#include "cli/client_common.h"
#include "cli/command.h"

namespace swept::cli {
namespace {

// A sweep with several objectives: its Pareto front (store/reader.h, "Several
// objectives"), each trial with every objective; --json: a list of the
// trials as `swept trials --json` gives them, each with "objectives".
int print_front(const SweepRow& s, const std::vector<TrialRow>& rows, bool json) {
  const ParetoFront& f = *s.front;
  std::unordered_map<int64_t, const TrialRow*> by_id;
  for (const auto& t : rows) by_id[t.id] = &t;
  std::vector<const TrialRow*> front;
  for (int64_t id : f.trial_ids)
    if (auto it = by_id.find(id); it != by_id.end()) front.push_back(it->second);
  if (front.empty()) {
    std::cerr << "swept best: no completed" << (s.constraints.empty() ? "" : ", feasible") << " trial of sweep " << s.id
              << " has reported every objective (" << terminal_safe(objective_names(f)) << ") yet\n";
    return kExitFailure;
  }
  if (json) {
    nlohmann::json a = nlohmann::json::array();
    for (const TrialRow* t : front) {
      nlohmann::json j = protocol::to_json(*t);
      nlohmann::json objectives = nlohmann::json::object();
      for (const auto& o : f.objectives) {
        auto it = t->latest.find(o.name);
        objectives[o.name] = it == t->latest.end() ? nlohmann::json(nullptr) : nlohmann::json(it->second);
      }
      j["objectives"] = std::move(objectives);
      a.push_back(std::move(j));
    }
    std::cout << a.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "Pareto front of sweep " << s.id << ": " << front.size() << " trial" << (front.size() == 1 ? "" : "s")
            << " (objectives:";
  for (const auto& o : f.objectives) std::cout << " " << terminal_safe(o.name) << " (" << o.goal << ")";
  std::cout << ")\n";
  for (const TrialRow* t : front)
    std::cout << "trial " << t->id << " (index " << t->index << "): " << terminal_safe(objective_values_text(f, *t))
              << "\n  params: " << terminal_safe(params_text(t->params)) << "\n";
  return kExitOk;
}

int run_best(const std::vector<std::string>& args) {
  ClientFlags flags;
  std::string sweep;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()("sweep", po::value(&sweep), "a sweep id")("json", po::bool_switch(&json), "print JSON");
  add_client_flags(desc, flags, true);
  po::positional_options_description pos;
  pos.add("sweep", 1);
  if (auto rc = parse_flags("best", "swept best SWEEP [--json] [--scheduler ADDR | --db FILE]", args, desc, pos))
    return *rc;
  auto id = parse_id("SWEEP", sweep);
  if (!id.ok()) return report("best", id.status());
  auto src = ResultSource::open(flags);
  if (!src.ok()) return report("best", src.status());
  auto sums = src->sweeps(*id);
  if (!sums.ok()) return report("best", sums.status());
  const auto& s = sums->front();
  if (s.front) {
    auto rows = src->trials(*id);
    if (!rows.ok()) return report("best", rows.status());
    return print_front(s, *rows, json);
  }
  if (!s.metric_name) {
    std::cerr << "swept best: sweep " << s.id << " names no metric (add \"metric\": {\"name\": ..., \"goal\": ...})\n";
    return kExitUsage;
  }
  auto rows = src->trials(*id);
  if (!rows.ok()) return report("best", rows.status());
  auto best = best_trial(s, *rows);
  if (!best) {
    std::cerr << "swept best: no completed" << (s.constraints.empty() ? "" : ", feasible") << " trial of sweep " << s.id
              << " has reported " << terminal_safe(*s.metric_name) << " yet";
    if (!s.constraints.empty()) std::cerr << " (constraints: " << terminal_safe(constraints_text(s.constraints)) << ")";
    std::cerr << "\n";
    return kExitFailure;
  }
  if (json) {
    std::cout << protocol::to_json(*best).dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "trial " << best->id << " (index " << best->index << "): " << terminal_safe(*s.metric_name) << " = "
            << fmt_num(*best->metric_value) << "\n  params: " << terminal_safe(params_text(best->params))
            << "\n  metrics:";
  for (const auto& [k, v] : best->latest) std::cout << " " << terminal_safe(k) << "=" << fmt_num(v);
  std::cout << "\n";
  if (!best->nodes.empty())  // a multi-node trial: where its nodes ran (node 0 reported the metrics)
    std::cout << "  nodes: " << terminal_safe(agents_text(*best)) << ", GPUs " << gpus_text(*best) << "\n";
  if (!best->schedule.empty()) {  // a pbt member (issue 29): its parameter schedule
    std::cout << "  schedule:\n";
    for (const PbtStep& s : best->schedule) {
      std::cout << "    from step " << s.from_step << ": " << terminal_safe(params_text(s.params));
      if (s.donor_trial_id)
        std::cout << " (round " << s.round << ": from trial " << *s.donor_trial_id << "'s checkpoint, segment "
                  << s.donor_segment.value_or(0) << ")";
      std::cout << "\n";
    }
  }
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("best", "show a sweep's best trial by its metric, or its Pareto front", run_best);
}  // namespace swept::cli
