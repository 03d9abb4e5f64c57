// method: nsga2, after Optuna's NSGAIISampler (optuna/samplers/nsgaii/ in
// Debian's python3-optuna 3.1; Deb et al. 2002), stateless:
//
// Optuna stores each trial's generation in the study and caches each
// generation's elite. swept keeps no state between suggestions (a restarted
// scheduler must suggest the same trials), so the generations are rebuilt
// from the history every time: the finished trials with every objective, in
// completion order, taken population_size at a time. Generation 0's elite is
// itself; generation g's is the best population_size of its own trials and the
// elite of g - 1. A suggestion is bred from the elite of the last complete
// generation; before the first one is complete, trials are random (as
// Optuna's first generation is). Failed trials are left out, as Optuna leaves
// out every trial that is not COMPLETE. Pending trials play no part.
//
// Breeding follows Optuna's defaults step by step: with crossover_prob, two
// parents by binary tournament (the first of two random members if it
// dominates the second, else the second; the second parent drawn from the
// rest), uniform crossover (each parameter from the second parent with
// swapping_prob, categorical ones too); otherwise a copy of a random member.
// Then each parameter is redrawn from its prior with mutation_prob (default
// 1 / number of parameters). In swept's coordinates a numeric parameter's
// prior draw is a uniform u in (0, 1) (encoding.h), a categorical's a uniform
// choice, as Optuna's RandomSampler draws both.
//
// Ranking: non-dominated sorting, constrained domination when the sweep has
// constraints (feasible before infeasible, infeasible by total violation,
// Optuna's _constrained_dominates), and for the front that does not fit,
// Optuna's crowding distance (boundary points infinite, each objective's gap
// over its finite range), largest first.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sweeps/search/multi.h"

namespace swept::sweeps::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Optuna's _dominates / _constrained_dominates on trials a and b of `in`.
bool beats(const MultiInput& in, size_t a, size_t b) {
  if (!in.violation.empty()) {
    const bool fa = in.violation[a] <= 0, fb = in.violation[b] <= 0;
    if (fa != fb) return fa;
    if (!fa) return in.violation[a] < in.violation[b];
  }
  // Pareto dominance on the loss vectors (minimisation form), without
  // pareto.h's allocation: this runs for every pair of every generation.
  bool strictly = false;
  for (size_t k = 0; k < in.loss[a].size(); ++k) {
    if (in.loss[a][k] > in.loss[b][k]) return false;
    strictly = strictly || in.loss[a][k] < in.loss[b][k];
  }
  return strictly;
}

// Optuna's _calc_crowding_distance over `members` (indices into in.loss).
std::vector<double> crowding(const MultiInput& in, const std::vector<size_t>& members) {
  std::vector<double> dist(members.size(), 0.0);
  if (members.empty()) return dist;
  const size_t m = in.loss[members[0]].size();
  std::vector<size_t> order(members.size());
  for (size_t k = 0; k < m; ++k) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return in.loss[members[a]][k] < in.loss[members[b]][k]; });
    const double lo = in.loss[members[order.front()]][k], hi = in.loss[members[order.back()]][k];
    if (lo == hi) continue;
    double width = hi - lo;
    if (!(width > 0) || !std::isfinite(width)) width = 1.0;
    for (size_t j = 0; j < order.size(); ++j) {
      const double below = j == 0 ? -kInf : in.loss[members[order[j - 1]]][k];
      const double above = j + 1 == order.size() ? kInf : in.loss[members[order[j + 1]]][k];
      dist[order[j]] += below == above ? 0.0 : (above - below) / width;
    }
  }
  return dist;
}

// The best `size` of `candidates`: whole fronts while they fit, then the
// front that does not fit by crowding distance, largest first.
std::vector<size_t> elite(const MultiInput& in, std::vector<size_t> candidates, size_t size) {
  std::vector<size_t> chosen;
  while (!candidates.empty() && chosen.size() < size) {
    std::vector<size_t> front, rest;
    for (size_t c : candidates) {
      bool dominated = false;
      for (size_t d : candidates) dominated = dominated || (d != c && beats(in, d, c));
      (dominated ? rest : front).push_back(c);
    }
    if (chosen.size() + front.size() <= size) {
      chosen.insert(chosen.end(), front.begin(), front.end());
    } else {
      const std::vector<double> dist = crowding(in, front);
      std::vector<size_t> order(front.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dist[a] > dist[b]; });
      for (size_t j = 0; chosen.size() < size; ++j) chosen.push_back(front[order[j]]);
    }
    candidates = std::move(rest);
  }
  return chosen;
}

size_t pick(Stream& rng, size_t n) { return std::min(n - 1, static_cast<size_t>(rng.next() * static_cast<double>(n))); }

// Optuna's _select_parent: the first of two random members if it wins, else the second.
size_t tournament(const MultiInput& in, const std::vector<size_t>& pool, Stream& rng) {
  const size_t a = pool[pick(rng, pool.size())], b = pool[pick(rng, pool.size())];
  return beats(in, a, b) ? a : b;
}

}  // namespace

Result<std::vector<double>> nsga2_suggest(const Nsga2Settings& s, const MultiInput& in, ModelState* state) {
  const size_t n = in.loss.size(), size = static_cast<size_t>(s.population_size);
  const size_t generations = n / size;
  state->population = s.population_size;
  if (generations == 0)
    return Status::FailedPrecondition("the first generation is random until " + std::to_string(size) + " trials have finished");
  std::vector<size_t> population;
  for (size_t g = 0; g < generations; ++g) {
    std::vector<size_t> candidates(size);
    std::iota(candidates.begin(), candidates.end(), g * size);
    candidates.insert(candidates.end(), population.begin(), population.end());
    population = elite(in, std::move(candidates), size);
  }
  state->generation = static_cast<int>(generations) - 1;
  state->n_model = static_cast<int>(population.size());

  const Encoding& enc = *in.base.encoding;
  Stream rng(in.base, 0x6e736761322d6368ULL);  // "nsga2-ch"
  std::vector<double> child;
  if (rng.next() < s.crossover_prob) {
    const size_t first = tournament(in, population, rng);
    std::vector<size_t> rest;
    for (size_t p : population)
      if (p != first) rest.push_back(p);
    const size_t second = rest.empty() ? first : tournament(in, rest, rng);
    child = in.base.x[first];
    for (size_t k = 0; k < child.size(); ++k)
      if (rng.next() >= s.swapping_prob) child[k] = in.base.x[second][k];
  } else {
    child = in.base.x[population[pick(rng, population.size())]];
  }
  const double mutation = s.mutation_prob ? *s.mutation_prob : 1.0 / std::max<double>(1.0, static_cast<double>(enc.dims.size()));
  for (size_t k = 0; k < child.size(); ++k) {
    if (rng.next() >= mutation) continue;
    const double u = rng.next();
    child[k] = enc.dims[k].categorical ? std::min(std::floor(u * static_cast<double>(enc.dims[k].n_choices)), static_cast<double>(enc.dims[k].n_choices - 1)) : u;
  }
  return snap(enc, child);
}

}  // namespace swept::sweeps::search
