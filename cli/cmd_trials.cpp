// `swept trials SWEEP [--json] [--state STATE]`: one line per trial (state,
// infeasible marked, attempts, agent, GPUs, metric or every objective,
// parameters, reason), or a JSON array of the protocol's TrialRow objects.
#include <algorithm>

#include "cli/client_common.h"
#include "cli/command.h"

namespace swept::cli {
namespace {

int run_trials(const std::vector<std::string>& args) {
  ClientFlags flags;
  std::string sweep, state;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()("sweep", po::value(&sweep), "a sweep id")("json", po::bool_switch(&json), "print JSON")(
      "state", po::value(&state), "only trials in this state");
  add_client_flags(desc, flags, true);
  po::positional_options_description pos;
  pos.add("sweep", 1);
  if (auto rc = parse_flags("trials", "swept trials SWEEP [--json] [--state S] [--scheduler ADDR | --db FILE]", args,
                            desc, pos))
    return *rc;
  auto id = parse_id("SWEEP", sweep);
  if (!id.ok()) return report("trials", id.status());
  std::optional<TrialState> only;
  if (!state.empty()) {
    // Either spelling: the display name ("early-stopped") or the wire name.
    std::string wire = state;
    std::replace(wire.begin(), wire.end(), '-', '_');
    only = trial_state_named(wire);
    if (!only) {
      std::string names;
      for (const auto& st : kTrialStates) names += (names.empty() ? "" : ", ") + display_name(st.state);
      return report("trials", Status::InvalidArgument("--state " + state + " is not a trial state; use one of " + names));
    }
  }
  auto src = ResultSource::open(flags);
  if (!src.ok()) return report("trials", src.status());
  // The summary first: a sweep with several objectives shows each trial's
  // objectives where a sweep with one shows its metric.
  auto sums = src->sweeps(*id);
  if (!sums.ok()) return report("trials", sums.status());
  const std::optional<ParetoFront>& front = sums->front().front;
  auto rows = src->trials(*id);
  if (!rows.ok()) return report("trials", rows.status());
  if (json) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& t : *rows)
      if (!only || t.state == *only) a.push_back(protocol::to_json(t));
    std::cout << a.dump(2) << "\n";
    return kExitOk;
  }
  Table table({"TRIAL", "INDEX", "STATE", "ATTEMPTS", "AGENT", "GPUS", "METRIC", "PARAMS", "REASON"});
  for (const auto& t : *rows) {
    if (only && t.state != *only) continue;
    table.add({std::to_string(t.id), std::to_string(t.index), trial_state_text(t), std::to_string(t.attempts),
               agents_text(t), gpus_text(t), front ? objective_values_text(*front, t) : fmt_opt(t.metric_value),
               params_text(t.params), t.reason.value_or("")});
  }
  table.print(std::cout);
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("trials", "list a sweep's trials (--json for machines)", run_trials);
}  // namespace swept::cli
