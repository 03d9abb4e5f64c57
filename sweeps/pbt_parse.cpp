// The `pbt:` block of a sweep file -> PbtSettings (pbt.h), every problem
// named by its path. Runs after the parameter space is parsed, since each
// mutation must name one of its parameters: the first members are drawn from
// `parameters` as random search draws them, and a mutation only says how a
// value already there may change.
#include <cmath>

#include "sweeps/checks.h"
#include "sweeps/parameters.h"
#include "sweeps/pbt.h"

namespace swept::sweeps::pbt {

using json = nlohmann::json;

namespace {

constexpr int64_t kMaxPopulation = 10000;
constexpr int64_t kMaxSteps = int64_t{1} << 40;

void parse_factors(Checker& ck, const json& v, PbtSettings& s) {
  const std::string p = "pbt.perturb";
  if (!v.is_array() || v.empty()) {
    ck.add(p, "expected a non-empty list of factors like [0.8, 1.2], found " + found(v));
    return;
  }
  std::vector<double> factors;
  for (size_t i = 0; i < v.size(); ++i) {
    auto f = ck.number(v[i], index_path(p, i));
    if (f && !(*f > 0)) ck.add(index_path(p, i), "expected a factor > 0, found " + found(v[i]));
    else if (f) factors.push_back(*f);
  }
  if (factors.size() == v.size()) s.perturb = std::move(factors);
}

// Each mutation: a distribution like those of `parameters`, naming a
// parameter that is there, and one that can change (not a constant).
void parse_mutations(Checker& ck, const json& m, const ParameterSpace& space, PbtSettings& s) {
  const std::string p = "pbt.hyperparam_mutations";
  const size_t before = ck.count();
  std::vector<Leaf> leaves;
  parse_block(ck, m, p, {}, 1, leaves);
  if (ck.count() != before) return;
  for (const Leaf& leaf : leaves) {
    const std::string here = join(p, leaf.dotted);
    bool named = false;
    for (const Leaf& param : space.leaves) named = named || param.dotted == leaf.dotted;
    if (!named) {
      ck.add(here, "expected a parameter of the parameters block (the members' first values are drawn there), "
                   "found none named " + leaf.dotted + "; add it to parameters");
    } else if (leaf.distribution == Distribution::kConstant) {
      ck.add(here, "expected a distribution a value can move in (values: [...], min/max, ...), found a constant; "
                   "remove it from hyperparam_mutations or give its range");
    }
  }
  s.mutations = std::move(leaves);
}

// The keys of the block itself (hyperparam_mutations apart).
void parse_numbers(Checker& ck, const json& b, PbtSettings& s) {
  if (b.contains("population")) {
    if (auto v = ck.integer(b["population"], "pbt.population", 2, kMaxPopulation,
                            "a whole number of members from 2 to " + std::to_string(kMaxPopulation)))
      s.population = static_cast<int>(*v);
  }
  if (!b.contains("interval")) {
    ck.add("pbt", "expected key interval (metric steps between exploit rounds), found none");
  } else if (auto v = ck.integer(b["interval"], "pbt.interval", 1, kMaxSteps, "a whole number of steps >= 1")) {
    s.interval = *v;
  }
  if (b.contains("quantile")) {
    auto v = ck.number(b["quantile"], "pbt.quantile");
    if (v && !(*v > 0 && *v <= 0.5)) ck.add("pbt.quantile", "expected a share in (0, 0.5], found " + found(b["quantile"]));
    else if (v) s.quantile = *v;
  }
  if (b.contains("perturb")) parse_factors(ck, b["perturb"], s);
  if (b.contains("resample_probability")) {
    auto v = ck.number(b["resample_probability"], "pbt.resample_probability");
    if (v && !(*v >= 0 && *v <= 1))
      ck.add("pbt.resample_probability", "expected a probability in [0, 1], found " + found(b["resample_probability"]));
    else if (v) s.resample_probability = *v;
  }
  if (b.contains("max_steps")) {
    if (auto v = ck.integer(b["max_steps"], "pbt.max_steps", 1, kMaxSteps, "a whole number of steps >= 1")) {
      if (s.interval > 0 && *v < s.interval)
        ck.add("pbt.max_steps", "expected at least interval (" + std::to_string(s.interval) + ") steps, found " +
                                    found(b["max_steps"]) + "; no member would reach an interval");
      else s.max_steps = *v;
    }
  }
}

// Keys that cannot go with a population: said here, so that one file names all.
void check_companions(Checker& ck, const json& root) {
  if (!root.contains("metric"))
    ck.add("metric", "expected a metric (pbt ranks the members on it at each interval), found none");
  if (root.contains("early_terminate"))
    ck.add("early_terminate", "expected no early_terminate with method pbt (its bottom quantile is replaced, not "
                              "stopped), found one; remove it");
  if (root.contains("run_cap"))
    ck.add("run_cap", "expected no run_cap with method pbt (pbt.population sets the number of members), found one");
  // A member's checkpoint is one node's directory (START_TRIAL `checkpoint`).
  if (root.contains("resources") && root["resources"].is_object() && root["resources"].contains("nodes") &&
      root["resources"]["nodes"] != 1)
    ck.add("resources.nodes", "expected one node per member with method pbt (a member's checkpoint is copied as "
                              "one node's directory), found " + found(root["resources"]["nodes"]));
  // Nor can it carry what parameter servers hold (issue 30): their state is
  // in their processes, not in the member's directory.
  if (root.contains("resources") && root["resources"].is_object() && root["resources"].contains("ps") &&
      root["resources"]["ps"] != 0)
    ck.add("resources.ps", "expected no parameter servers with method pbt (a member's checkpoint is one node's "
                           "directory; the servers' state is not in it), found " + found(root["resources"]["ps"]));
}

}  // namespace

void parse_pbt(Checker& ck, const json& root, SweepSpec& spec, const ParameterSpace& space) {
  const bool is_pbt = spec.method == Method::kPbt;
  if (!root.contains("pbt")) {
    if (is_pbt)
      ck.add("pbt", "expected a pbt block ({\"interval\": 100, \"hyperparam_mutations\": {\"lr\": {...}}}) with "
                    "method pbt, found none");
    return;
  }
  if (!is_pbt) {
    ck.add("pbt", "expected a pbt block only with method pbt, found it with another method; set method: pbt or "
                  "remove the block");
    return;
  }
  const size_t before = ck.count();
  check_companions(ck, root);
  const json& b = root["pbt"];
  if (!b.is_object()) {
    ck.add("pbt", "expected an object like {\"interval\": 100, \"hyperparam_mutations\": {...}}, found " + found(b));
    return;
  }
  ck.only_keys(b, "pbt", {"population", "interval", "quantile", "perturb", "resample_probability",
                          "hyperparam_mutations", "max_steps"});
  PbtSettings s;
  parse_numbers(ck, b, s);
  if (!b.contains("hyperparam_mutations"))
    ck.add("pbt", "expected key hyperparam_mutations (which parameters may change, and how), found none");
  else parse_mutations(ck, b["hyperparam_mutations"], space, s);
  if (ck.count() == before) spec.pbt = std::make_shared<const PbtSettings>(std::move(s));
}

std::string describe(const PbtSettings& s) {
  std::string out = "population " + std::to_string(s.population) + ", exploit every " + std::to_string(s.interval) +
                    (s.interval == 1 ? " step, " : " steps, ") + std::to_string(s.mutations.size()) +
                    (s.mutations.size() == 1 ? " mutation" : " mutations");
  if (s.max_steps) out += ", until step " + std::to_string(*s.max_steps);
  return out;
}

}  // namespace swept::sweeps::pbt
