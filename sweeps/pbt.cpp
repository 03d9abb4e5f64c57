// Population-based training's exploit and explore steps (pbt.h), after
// Jaderberg et al. 2017 with Ray Tune's rules: truncation selection by
// quantile, a donor drawn from the top quantile, and explore by perturbation
// (a factor, a neighbouring categorical value) or resampling.
//
// swept's own choices, each for a reason:
//  - a perturbed number is clamped to its distribution's bounds and snapped
//    to its q: the program was promised values from that distribution;
//  - integers are rounded (half to even), not truncated, so a factor above 1
//    can raise a small integer as often as one below 1 lowers it;
//  - ties rank the lower slot higher, so a plan never depends on the order
//    the reports came in.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "sweeps/checks.h"
#include "sweeps/numeric.h"
#include "sweeps/pbt.h"

namespace swept::sweeps::pbt {

using json = nlohmann::json;

namespace {

// The streams of the draws (mixed with a leaf's own stream where one is per leaf).
constexpr uint64_t kPbtSeedSalt = 0x5042542d726f756eULL;  // keeps pbt's draws apart from the first members'
constexpr uint64_t kDonorDraw = 1, kDonorRedraw = 2, kResampleCoin = 3, kResampleValue = 4, kFactorDraw = 5,
                   kDirectionDraw = 6;
constexpr int64_t kSlotsPerRound = 10000;  // pbt.population's upper bound (pbt_parse.cpp)

double draw(const SweepSpec& spec, int64_t round, int slot, uint64_t what, uint64_t leaf_stream = 0) {
  return numeric::uniform_open01(spec.seed ^ kPbtSeedSalt, round * kSlotsPerRound + slot,
                                 numeric::mix64(leaf_stream ^ numeric::mix64(what)));
}

// An index in [0, n) from a uniform draw.
size_t pick(double u, size_t n) {
  return std::min(n - 1, static_cast<size_t>(std::floor(u * static_cast<double>(n))));
}

const json* value_at(const json& params, const std::vector<std::string>& names) {
  const json* v = &params;
  for (const std::string& n : names) {
    if (!v->is_object() || !v->contains(n)) return nullptr;
    v = &(*v)[n];
  }
  return v;
}

bool bounded(Distribution d) {
  switch (d) {
    case Distribution::kIntUniform:
    case Distribution::kUniform:
    case Distribution::kQUniform:
    case Distribution::kLogUniformValues:
    case Distribution::kInvLogUniformValues:
    case Distribution::kQLogUniformValues:
    case Distribution::kBeta:
    case Distribution::kQBeta: return true;
    default: return false;
  }
}

bool quantized(Distribution d) {
  return d == Distribution::kQUniform || d == Distribution::kQLogUniformValues || d == Distribution::kQNormal ||
         d == Distribution::kQLogNormal || d == Distribution::kQBeta;
}

bool categorical(Distribution d) {
  return d == Distribution::kCategorical || d == Distribution::kCategoricalWithProbabilities;
}

// A number times `factor`, kept inside what the leaf's distribution gives.
json perturbed(const Leaf& leaf, const json& current, double factor) {
  double v = current.get<double>() * factor;
  if (quantized(leaf.distribution)) v = numeric::round_half_even(v / leaf.q) * leaf.q;
  if (leaf.distribution == Distribution::kIntUniform) {
    v = std::clamp(v, static_cast<double>(leaf.int_min), static_cast<double>(leaf.int_max));
  } else if (leaf.distribution == Distribution::kBeta || leaf.distribution == Distribution::kQBeta) {
    v = std::clamp(v, 0.0, 1.0);
  } else if (bounded(leaf.distribution)) {
    v = std::clamp(v, leaf.min, leaf.max);
  }
  if (leaf.integer_output || current.is_number_integer()) return json(static_cast<int64_t>(numeric::round_half_even(v)));
  return json(v);
}

std::string factor_text(double f) {
  std::ostringstream out;
  out << "x" << f;
  return out.str();
}

// One mutation leaf's next value, and how it was chosen ("" when unchanged).
json explore_leaf(const SweepSpec& spec, const Leaf& leaf, const json* current, int64_t round, int slot,
                  std::string* how) {
  const PbtSettings& s = *spec.pbt;
  const bool coin = draw(spec, round, slot, kResampleCoin, leaf.stream) < s.resample_probability;
  const json resampled = value_at_quantile(leaf, draw(spec, round, slot, kResampleValue, leaf.stream));
  if (categorical(leaf.distribution)) {
    const auto at = current ? std::find(leaf.values.begin(), leaf.values.end(), *current) : leaf.values.end();
    if (coin || at == leaf.values.end()) {
      *how = "resampled";
      return resampled;
    }
    // Ray Tune's rule: one step to either side, held at the ends.
    const int64_t i = at - leaf.values.begin();
    const int64_t step = draw(spec, round, slot, kDirectionDraw, leaf.stream) < 0.5 ? -1 : 1;
    const int64_t next = std::clamp<int64_t>(i + step, 0, static_cast<int64_t>(leaf.values.size()) - 1);
    *how = "neighbour";
    return leaf.values[static_cast<size_t>(next)];
  }
  if (coin || !current || !current->is_number()) {
    *how = "resampled";
    return resampled;
  }
  const double factor = s.perturb[pick(draw(spec, round, slot, kFactorDraw, leaf.stream), s.perturb.size())];
  *how = factor_text(factor);
  return perturbed(leaf, *current, factor);
}

// Ranked members (reached the interval), best first.
std::vector<const MemberReport*> rank(const SweepSpec& spec, const std::vector<MemberReport>& members) {
  std::vector<const MemberReport*> ranked;
  for (const MemberReport& m : members)
    if (m.standing == Standing::kReached) ranked.push_back(&m);
  const bool maximize = spec.metric->goal == Goal::kMaximize;
  std::sort(ranked.begin(), ranked.end(), [maximize](const MemberReport* a, const MemberReport* b) {
    const bool fa = std::isfinite(a->value), fb = std::isfinite(b->value);
    if (fa != fb) return fa;  // a value that is not a number ranks last
    if (fa && a->value != b->value) return maximize ? a->value > b->value : a->value < b->value;
    return a->slot < b->slot;
  });
  return ranked;
}

const MemberReport* report_of(const std::vector<MemberReport>& members, int64_t id) {
  for (const MemberReport& m : members)
    if (m.member == id) return &m;
  return nullptr;
}

// `plan` copies `donor` from now on: its checkpoint, its parameters explored.
void take_donor(const SweepSpec& spec, int64_t round, MemberPlan& plan, const MemberReport& donor) {
  plan.donor = donor.member;
  plan.changes.clear();
  plan.params = explore(spec, donor.params, round, plan.slot, &plan.changes);
}

}  // namespace

bool round_ready(const std::vector<MemberReport>& members) {
  return std::none_of(members.begin(), members.end(),
                      [](const MemberReport& m) { return m.standing == Standing::kRunning; });
}

int quantile_size(int ranked, double quantile) {
  if (ranked < 2) return 0;
  const int k = static_cast<int>(std::ceil(static_cast<double>(ranked) * quantile));
  return std::clamp(k, 1, ranked / 2);
}

json explore(const SweepSpec& spec, const json& params, int64_t round, int slot, std::vector<std::string>* changes) {
  json out = params;
  for (const Leaf& leaf : spec.pbt->mutations) {
    const json* current = value_at(params, leaf.names);
    std::string how;
    json next = explore_leaf(spec, leaf, current, round, slot, &how);
    if (current && *current == next) continue;
    if (changes)
      changes->push_back(leaf.dotted + ": " + (current ? current->dump() : std::string("(unset)")) + " -> " +
                         next.dump() + " (" + how + ")");
    set_nested(out, leaf.names, std::move(next));
  }
  return out;
}

RoundPlan plan_round(const SweepSpec& spec, int64_t round, const std::vector<MemberReport>& members) {
  RoundPlan plan;
  plan.round = round;
  const std::vector<const MemberReport*> ranked = rank(spec, members);
  const size_t k = static_cast<size_t>(quantile_size(static_cast<int>(ranked.size()), spec.pbt->quantile));
  for (size_t i = 0; i < k; ++i) plan.top.push_back(ranked[i]->member);
  for (size_t i = ranked.size() - k; i < ranked.size(); ++i) plan.bottom.push_back(ranked[i]->member);
  for (const MemberReport& m : members) {
    MemberPlan p{m.member, m.slot, std::nullopt, m.params, {}};
    if (std::find(plan.bottom.begin(), plan.bottom.end(), m.member) != plan.bottom.end()) {
      const int64_t donor = plan.top[pick(draw(spec, round, m.slot, kDonorDraw), plan.top.size())];
      take_donor(spec, round, p, *report_of(members, donor));
    }
    plan.members.push_back(std::move(p));
  }
  return plan;
}

RoundPlan replan_without(const SweepSpec& spec, RoundPlan plan, const std::vector<MemberReport>& members,
                         int64_t lost) {
  plan.top.erase(std::remove(plan.top.begin(), plan.top.end(), lost), plan.top.end());
  for (MemberPlan& p : plan.members) {
    const MemberReport* own = report_of(members, p.member);
    if (p.member == lost || (p.donor == lost && plan.top.empty())) {
      // Nothing to copy from: its own checkpoint and parameters (a lost
      // member resumes so when it is retried).
      p.donor.reset();
      p.changes.clear();
      if (own) p.params = own->params;
    } else if (p.donor == lost) {
      const int64_t donor = plan.top[pick(draw(spec, plan.round, p.slot, kDonorRedraw), plan.top.size())];
      take_donor(spec, plan.round, p, *report_of(members, donor));
    }
  }
  return plan;
}

}  // namespace swept::sweeps::pbt
