// method: pbt: the block's refusals (each naming its field), its typed
// values, and the exploit/explore step against hand-computed cases:
// quantiles, ties, members that have not reached the interval, a donor lost
// while its checkpoint was to be copied, and Ray Tune's explore rules. The
// step is pure in (spec, round, reports), so no clock is needed: a "later"
// poll is just another call with the reports changed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sweeps/pbt.h"
#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace swept::sweeps::pbt {
namespace {

using json = nlohmann::json;

// A pbt sweep: `block` is the pbt block's JSON, `extra` more top-level keys.
std::string pbt_file(const std::string& block, const std::string& extra = "") {
  return R"({"method": "pbt", "metric": {"name": "q", "goal": "maximize"}, "seed": 7,
             "parameters": {"lr": {"min": 0.001, "max": 0.1}, "width": {"values": [16, 32, 64, 128]},
                            "layers": {"min": 1, "max": 8}},
             "pbt": )" + block + extra + "}";
}

SweepSpec parsed(const std::string& text) {
  ParseOutcome out = parse_sweep(text);
  std::string problems;
  for (const Problem& p : out.problems) problems += p.ToString() + "\n";
  INFO(problems);
  REQUIRE(out.spec);
  return *out.spec;
}

std::vector<std::string> problems_of(const std::string& text) {
  std::vector<std::string> out;
  for (const Problem& p : parse_sweep(text).problems) out.push_back(p.ToString());
  return out;
}

const std::string kMutations = R"("hyperparam_mutations": {"lr": {"min": 0.001, "max": 0.1}, "width": {"values": [16, 32, 64, 128]}})";

TEST_CASE("a pbt block is read into typed settings, with Ray Tune's defaults") {
  const SweepSpec spec = parsed(pbt_file(R"({"interval": 50, )" + kMutations + "}"));
  REQUIRE(spec.pbt);
  CHECK(spec.method == Method::kPbt);
  CHECK(spec.pbt->population == 8);
  CHECK(spec.pbt->interval == 50);
  CHECK(spec.pbt->quantile == 0.25);
  CHECK(spec.pbt->perturb == std::vector<double>{0.8, 1.2});
  CHECK(spec.pbt->resample_probability == 0.25);
  CHECK(!spec.pbt->max_steps);
  REQUIRE(spec.pbt->mutations.size() == 2);
  CHECK(spec.pbt->mutations[0].dotted == "lr");
  CHECK(trial_count(spec) == 8);
  CHECK(describe(spec) == "pbt (population 8, exploit every 50 steps, 2 mutations), 3 parameters, 8 trials");

  const SweepSpec set = parsed(pbt_file(R"({"population": 4, "interval": 10, "quantile": 0.5, "perturb": [0.5, 2],
      "resample_probability": 0, "max_steps": 100, )" + kMutations + "}"));
  CHECK(set.pbt->population == 4);
  CHECK(set.pbt->quantile == 0.5);
  CHECK(set.pbt->perturb == std::vector<double>{0.5, 2});
  CHECK(set.pbt->resample_probability == 0);
  CHECK(set.pbt->max_steps == 100);
  // The first members are drawn as random search draws them.
  const json first = trial_at(set, 0).params;
  CHECK(first["lr"].get<double>() >= 0.001);
  CHECK(first["lr"].get<double>() <= 0.1);
}

TEST_CASE("a bad pbt block is refused, one problem per field, each naming it") {
  CHECK(problems_of(pbt_file(R"({"population": 1, "interval": 0, "quantile": 0.7, "perturb": [1.2, -1],
      "resample_probability": 2, "hyperparam_mutations": {"momentum": {"min": 0, "max": 1}, "lr": {"value": 0.1}},
      "exploit": 3})")) ==
        std::vector<std::string>{
            "pbt.exploit: unknown key; expected one of: population, interval, quantile, perturb, resample_probability, "
            "hyperparam_mutations, max_steps",
            "pbt.population: expected a whole number of members from 2 to 10000, found 1",
            "pbt.interval: expected a whole number of steps >= 1, found 0",
            "pbt.quantile: expected a share in (0, 0.5], found 0.7",
            "pbt.perturb[1]: expected a factor > 0, found -1",
            "pbt.resample_probability: expected a probability in [0, 1], found 2",
            "pbt.hyperparam_mutations.lr: expected a distribution a value can move in (values: [...], min/max, ...), "
            "found a constant; remove it from hyperparam_mutations or give its range",
            "pbt.hyperparam_mutations.momentum: expected a parameter of the parameters block (the members' first "
            "values are drawn there), found none named momentum; add it to parameters"});
  CHECK(problems_of(pbt_file("{}")) ==
        std::vector<std::string>{"pbt: expected key interval (metric steps between exploit rounds), found none",
                                 "pbt: expected key hyperparam_mutations (which parameters may change, and how), found "
                                 "none"});
  CHECK(problems_of(pbt_file(R"({"interval": 10, "max_steps": 5, )" + kMutations + "}")) ==
        std::vector<std::string>{"pbt.max_steps: expected at least interval (10) steps, found 5; no member would "
                                 "reach an interval"});
  CHECK(problems_of(pbt_file(R"({"interval": 10, )" + kMutations + "}", R"(, "run_cap": 3,
      "early_terminate": {"type": "hyperband", "min_iter": 3})")) ==
        std::vector<std::string>{"early_terminate: expected no early_terminate with method pbt (its bottom quantile is "
                                 "replaced, not stopped), found one; remove it",
                                 "run_cap: expected no run_cap with method pbt (pbt.population sets the number of "
                                 "members), found one"});
  CHECK(problems_of(pbt_file(R"({"interval": 10, )" + kMutations + "}", R"(, "resources": {"ps": 1})")) ==
        std::vector<std::string>{"resources.ps: expected no parameter servers with method pbt (a member's checkpoint "
                                 "is one node's directory; the servers' state is not in it), found 1"});
  CHECK(problems_of(R"({"method": "pbt", "metric": {"name": "q"}, "parameters": {"x": {"values": [1, 2]}}})") ==
        std::vector<std::string>{"pbt: expected a pbt block ({\"interval\": 100, \"hyperparam_mutations\": {\"lr\": "
                                 "{...}}}) with method pbt, found none"});
  CHECK(problems_of(R"({"method": "random", "parameters": {"x": {"values": [1, 2]}}, "pbt": {"interval": 3}})") ==
        std::vector<std::string>{"pbt: expected a pbt block only with method pbt, found it with another method; set "
                                 "method: pbt or remove the block"});
  CHECK(problems_of(R"({"method": "pbt", "parameters": {"x": {"values": [1, 2]}},
      "pbt": {"interval": 3, "hyperparam_mutations": {"x": {"values": [1, 2]}}}})") ==
        std::vector<std::string>{"metric: expected a metric (pbt ranks the members on it at each interval), found none"});
}

TEST_CASE("YAML pbt blocks read as JSON ones, problems with their line") {
  const std::string yaml =
      "method: pbt\nmetric: {name: acc, goal: maximize}\nparameters:\n  lr: {min: 0.01, max: 0.1}\n"
      "pbt:\n  population: 4\n  interval: abc\n  hyperparam_mutations:\n    lr: {min: 0.01, max: 0.1}\n";
  CHECK(problems_of(yaml) ==
        std::vector<std::string>{"pbt.interval: expected a whole number of steps >= 1, found \"abc\" (line 7, column 13)"});
}

// Reports of `values.size()` members in slots 0.., all at the interval, with
// lr = 0.01 * (slot + 1) as their parameters.
std::vector<MemberReport> reached(const std::vector<double>& values) {
  std::vector<MemberReport> out;
  for (size_t i = 0; i < values.size(); ++i) {
    MemberReport r;
    r.member = 100 + static_cast<int64_t>(i);
    r.slot = static_cast<int>(i);
    r.standing = Standing::kReached;
    r.value = values[i];
    r.params = {{"lr", 0.01 * static_cast<double>(i + 1)}, {"width", 32}, {"layers", 2}};
    out.push_back(r);
  }
  return out;
}

const MemberPlan& plan_of(const RoundPlan& plan, int64_t member) {
  auto it = std::find_if(plan.members.begin(), plan.members.end(), [&](const MemberPlan& p) { return p.member == member; });
  REQUIRE(it != plan.members.end());
  return *it;
}

TEST_CASE("quantiles: ceil(n * quantile), at most half, none below two members") {
  CHECK(quantile_size(8, 0.25) == 2);
  CHECK(quantile_size(2, 0.25) == 1);  // the paper's toy problem: the worse of two copies the better
  CHECK(quantile_size(3, 0.5) == 1);   // ceil(1.5) = 2 would put a member in both
  CHECK(quantile_size(9, 0.25) == 3);
  CHECK(quantile_size(1, 0.5) == 0);
  CHECK(quantile_size(0, 0.25) == 0);
}

TEST_CASE("the bottom quantile copies a top member and explores its parameters, the rest keep their own") {
  const SweepSpec spec = parsed(pbt_file(R"({"population": 8, "interval": 10, "resample_probability": 0,
      "perturb": [2], "hyperparam_mutations": {"lr": {"min": 0.001, "max": 1}}})"));
  const auto members = reached({0.5, 0.9, 0.1, 0.7, 0.3, 0.8, 0.2, 0.6});
  const RoundPlan plan = plan_round(spec, 1, members);
  CHECK(plan.top == std::vector<int64_t>{101, 105});     // 0.9, 0.8
  CHECK(plan.bottom == std::vector<int64_t>{106, 102});  // 0.2, 0.1
  for (int64_t id : {100, 101, 103, 104, 105, 107}) {
    const MemberPlan& p = plan_of(plan, id);
    CHECK(!p.donor);
    CHECK(p.params == members[static_cast<size_t>(id - 100)].params);
    CHECK(p.changes.empty());
  }
  for (int64_t id : {102, 106}) {
    const MemberPlan& p = plan_of(plan, id);
    REQUIRE(p.donor);
    CHECK((*p.donor == 101 || *p.donor == 105));
    // The donor's lr, times the one factor; its other parameters as the donor's.
    const json& donor = members[static_cast<size_t>(*p.donor - 100)].params;
    CHECK(p.params["lr"].get<double>() == doctest::Approx(donor["lr"].get<double>() * 2));
    CHECK(p.params["width"] == donor["width"]);
    REQUIRE(p.changes.size() == 1);
    CHECK(p.changes[0].rfind("lr: ", 0) == 0);
    CHECK(p.changes[0].find("(x2)") != std::string::npos);
  }
  // The same reports give the same plan (a restarted scheduler recomputes it).
  const RoundPlan again = plan_round(spec, 1, members);
  for (size_t i = 0; i < plan.members.size(); ++i) {
    CHECK(again.members[i].donor == plan.members[i].donor);
    CHECK(again.members[i].params == plan.members[i].params);
  }
}

TEST_CASE("minimize ranks the lowest first, ties rank the lower slot higher, NaN ranks last") {
  SweepSpec spec = parsed(pbt_file(R"({"population": 4, "interval": 10, "quantile": 0.5, )" + kMutations + "}"));
  spec.metric->goal = Goal::kMinimize;
  RoundPlan plan = plan_round(spec, 1, reached({0.3, 0.1, 0.2, 0.4}));
  CHECK(plan.top == std::vector<int64_t>{101, 102});
  CHECK(plan.bottom == std::vector<int64_t>{100, 103});
  // All tied: slot order decides, whatever order the reports come in.
  auto tied = reached({0.5, 0.5, 0.5, 0.5});
  std::reverse(tied.begin(), tied.end());
  plan = plan_round(spec, 1, tied);
  CHECK(plan.top == std::vector<int64_t>{100, 101});
  CHECK(plan.bottom == std::vector<int64_t>{102, 103});
  plan = plan_round(spec, 1, reached({0.5, std::nan(""), 0.1, 0.2}));
  CHECK(plan.bottom == std::vector<int64_t>{100, 101});
}

TEST_CASE("a round waits for members still running, never for a gone one, and only those at the interval are ranked") {
  const SweepSpec spec = parsed(pbt_file(R"({"population": 4, "interval": 10, "quantile": 0.5, )" + kMutations + "}"));
  auto members = reached({0.9, 0.1, 0.5, 0.7});
  members[2].standing = Standing::kRunning;
  CHECK(!round_ready(members));
  members[2].standing = Standing::kGone;  // lost in mid-segment: retried from its own checkpoint
  CHECK(round_ready(members));
  const RoundPlan plan = plan_round(spec, 1, members);
  // Three ranked: a quantile of one each.
  CHECK(plan.top == std::vector<int64_t>{100});
  CHECK(plan.bottom == std::vector<int64_t>{101});
  CHECK(plan_of(plan, 101).donor == 100);
  CHECK(!plan_of(plan, 102).donor);
  CHECK(plan_of(plan, 102).params == members[2].params);
  // A lone member at the interval has no one to learn from.
  members = reached({0.4});
  CHECK(plan_round(spec, 1, members).bottom.empty());
}

TEST_CASE("a donor lost while its checkpoint is copied: another top member, or the recipient's own") {
  const SweepSpec spec = parsed(pbt_file(R"({"population": 8, "interval": 10, "resample_probability": 0,
      "perturb": [2], "hyperparam_mutations": {"lr": {"min": 0.001, "max": 1}}})"));
  const auto members = reached({0.5, 0.9, 0.1, 0.7, 0.3, 0.8, 0.2, 0.6});
  const RoundPlan plan = plan_round(spec, 1, members);
  const int64_t lost = *plan_of(plan, 102).donor;
  const int64_t other = lost == 101 ? 105 : 101;
  RoundPlan replanned = replan_without(spec, plan, members, lost);
  CHECK(replanned.top == std::vector<int64_t>{other});
  for (int64_t id : {102, 106}) {
    CHECK(plan_of(replanned, id).donor == other);
    CHECK(plan_of(replanned, id).params["lr"].get<double>() ==
          doctest::Approx(members[static_cast<size_t>(other - 100)].params["lr"].get<double>() * 2));
  }
  CHECK(!plan_of(replanned, lost).donor);
  // The other top member lost as well: the bottom resumes from its own.
  replanned = replan_without(spec, replanned, members, other);
  CHECK(replanned.top.empty());
  for (int64_t id : {102, 106}) {
    CHECK(!plan_of(replanned, id).donor);
    CHECK(plan_of(replanned, id).params == members[static_cast<size_t>(id - 100)].params);
    CHECK(plan_of(replanned, id).changes.empty());
  }
}

TEST_CASE("explore: integers rounded, bounds kept, categoricals to a neighbour, resampling within the distribution") {
  const SweepSpec spec = parsed(pbt_file(R"({"interval": 10, "resample_probability": 0, "perturb": [1.6],
      "hyperparam_mutations": {"layers": {"min": 1, "max": 8}, "lr": {"min": 0.001, "max": 0.1},
                               "width": {"values": [16, 32, 64, 128]}}})"));
  std::vector<std::string> changes;
  json out = explore(spec, {{"layers", 3}, {"lr", 0.08}, {"width", 32}}, 1, 0, &changes);
  CHECK(out["layers"] == 5);    // 3 * 1.6 = 4.8, rounded, still an integer
  CHECK(out["layers"].is_number_integer());
  CHECK(out["lr"] == 0.1);      // 0.128 clamped to max
  CHECK((out["width"] == 16 || out["width"] == 64));  // one step either way
  CHECK(changes.size() == 3);
  // Held at the ends: from the last value a step is back or nowhere.
  for (int slot = 0; slot < 20; ++slot) {
    json w = explore(spec, {{"layers", 8}, {"lr", 0.05}, {"width", 128}}, 2, slot, nullptr)["width"];
    CHECK((w == 128 || w == 64));
    CHECK(explore(spec, {{"layers", 8}, {"lr", 0.05}, {"width", 128}}, 2, slot, nullptr)["layers"] == 8);
  }
  // A value the categorical cannot give is resampled from it.
  json odd = explore(spec, {{"layers", 2}, {"lr", 0.05}, {"width", 48}}, 1, 0, nullptr)["width"];
  CHECK((odd == 16 || odd == 32 || odd == 64 || odd == 128));

  const SweepSpec always = parsed(pbt_file(R"({"interval": 10, "resample_probability": 1,
      "hyperparam_mutations": {"lr": {"min": 0.001, "max": 0.002}}})"));
  changes.clear();
  out = explore(always, {{"layers", 2}, {"lr", 0.05}, {"width", 32}}, 1, 3, &changes);
  CHECK(out["lr"].get<double>() >= 0.001);
  CHECK(out["lr"].get<double>() <= 0.002);
  CHECK(out["width"] == 32);  // not a mutation: never changed
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].find("(resampled)") != std::string::npos);
}

TEST_CASE("explore's draws depend on (seed, round, slot): another round or slot draws again") {
  const SweepSpec spec = parsed(pbt_file(R"({"interval": 10, "perturb": [0.5, 0.8, 1.2, 2.0],
      "hyperparam_mutations": {"lr": {"min": 0.0001, "max": 10}}})"));
  const json params = {{"lr", 1.0}, {"width", 32}, {"layers", 2}};
  std::vector<double> seen;
  for (int64_t round = 1; round <= 8; ++round)
    for (int slot = 0; slot < 8; ++slot) seen.push_back(explore(spec, params, round, slot, nullptr)["lr"].get<double>());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  CHECK(seen.size() > 4);  // the four factors and some resamples
  CHECK(explore(spec, params, 3, 2, nullptr) == explore(spec, params, 3, 2, nullptr));
}

}  // namespace
}  // namespace swept::sweeps::pbt
