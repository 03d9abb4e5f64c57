// Pareto dominance, fronts, non-dominated sorting and hypervolume: what a
// multi-objective sweep's "best" means (issue 28), shared by the searchers
// (nsga2's ranks, multi-objective TPE's split, bayes' hypervolume
// improvement), the scheduler, the store's readers and the CLI.
//
// Points are given as values[i][k]: point i's objective k in that objective's
// own sign (a maximised accuracy stays positive); goals[k] says which way is
// better. A row whose size is not goals.size() is treated as a point with a
// NaN. A NaN value means "no value" (a failed or never-reported trial): such a
// point is never on a front.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <vector>

#include "sweeps/metric.h"

namespace swept::sweeps {

// Whether `a` Pareto-dominates `b`: no worse in every objective and strictly
// better in at least one. False when either has a NaN, or sizes differ.
bool dominates(const std::vector<double>& a, const std::vector<double>& b, const std::vector<Goal>& goals);

// Indices (ascending) of the non-dominated points among the feasible ones
// without a NaN. Equal points are all on the front (neither dominates the
// other). `feasible` (empty = every point) excludes the points marked false;
// if not empty it has values.size() entries.
std::vector<size_t> pareto_front(const std::vector<std::vector<double>>& values, const std::vector<Goal>& goals,
                                 const std::vector<bool>& feasible = {});

// Non-dominated sorting (NSGA-II): rank 0 = the front, 1 = the front of the
// rest, and so on. Points with a NaN come after every finite point, all in
// one rank (the last).
std::vector<int> nondominated_ranks(const std::vector<std::vector<double>>& values, const std::vector<Goal>& goals);

// The hypervolume dominated by `points` and bounded by `ref` (each
// objective's worst value that still counts), exact, in any dimension (a sweep
// in 2-D, slicing along the last objective above). Points not strictly better
// than `ref` in every objective, or with a NaN, add nothing; so does a NaN in
// `ref`. 0 for no points.
double hypervolume(const std::vector<std::vector<double>>& points, const std::vector<Goal>& goals,
                   const std::vector<double>& ref);

// The default reference point: per objective, the metric's `ref` when it
// gives one, else the worst finite value seen among `values` (NaN when there
// is none: then hypervolume is 0).
std::vector<double> reference_point(const std::vector<Metric>& objectives,
                                    const std::vector<std::vector<double>>& values);

}  // namespace swept::sweeps
