// mo_search_bench: swept's multi-objective searchers (nsga2, tpe, bayes,
// random) on the peer's multi-objective functions, and their suggestion
// latency with 2 and 3 objectives. bench/mo_search_bench.sh runs it beside
// the peers (../shared/bench/search_peer.py for zdt1, zdt2, dtlz2;
// bench/mo_extra_peer.py for the functions nothing was tuned on) and prints
// the tables of docs/benchmarks.md, "Several objectives".
//
//   mo_search_bench quality PEER_SCRIPT [--functions zdt1,zdt2,dtlz2] [--trials 100] [--seeds 1-8] [--slots 1]
//       [--methods nsga2,tpe,bayes,random]
//       one JSON line per (function, method): {"function","method","slots","trials","hypervolume":[per seed]}
//   mo_search_bench latency PEER_SCRIPT [--sizes 1000]
//       one JSON line per (function, method, finished trials): {"objectives","ms":[...],"cpu_ms":[...]}
//
// The spaces come from the peer (`PEER space NAME`); the functions are
// evaluated here from their published definitions and checked against the
// peer's own evaluation of the first suggestions (`PEER trial ...`), and the
// hypervolume (sweeps/pareto.h) against the peer's (`PEER hv NAME`, Optuna's
// WFG) on every function's first seed, so neither can drift unnoticed.
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "sweeps/pareto.h"
#include "bench/run_command.h"
#include "sweeps/search/search.h"
#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace {

using nlohmann::json;
using namespace swept::sweeps;

using swept::bench::run_command;

// "x3", "f1": built by appending (GCC 12's -Wrestrict misfires on "x" + std::to_string(i)).
std::string key(const char* prefix, size_t i) {
  std::string k = prefix;
  k += std::to_string(i);
  return k;
}

// Each function's reference point: the peers' REF.
const std::map<std::string, std::vector<double>> kRef = {
    {"zdt1", {1.1, 6.0}}, {"zdt2", {1.1, 7.0}}, {"dtlz2", {2.0, 2.0, 2.0}},
    {"zdt3", {1.1, 7.0}}, {"fonseca3", {1.1, 1.1}}, {"dtlz2x4", {2.0, 2.0, 2.0}}};

// ZDT1-3 (Zitzler, Deb, Thiele 2000), DTLZ2 (Deb et al. 2002), Fonseca-Fleming (1995), on the peers' spaces.
std::vector<double> value(const std::string& name, const json& p) {
  std::vector<double> x;
  for (size_t i = 1; p.contains(key("x", i)); ++i) x.push_back(p[key("x", i)].get<double>());
  if (name == "zdt1" || name == "zdt2" || name == "zdt3") {
    double s = 0;
    for (size_t i = 1; i < x.size(); ++i) s += x[i];
    const double g = 1 + 9 * s / static_cast<double>(x.size() - 1), r = x[0] / g;
    const double h = name == "zdt1" ? 1 - std::sqrt(r) : name == "zdt2" ? 1 - r * r
                                                       : 1 - std::sqrt(r) - r * std::sin(10 * M_PI * x[0]);
    return {x[0], g * h};
  }
  if (name == "dtlz2" || name == "dtlz2x4") {
    // dtlz2x4: the same front, its distance variables shifted (optimum at 0.8, not 0.5).
    const double centre = name == "dtlz2" ? 0.5 : 0.8;
    double g = 0;
    for (size_t i = 2; i < x.size(); ++i) g += (x[i] - centre) * (x[i] - centre);
    const double c0 = std::cos(x[0] * M_PI / 2), c1 = std::cos(x[1] * M_PI / 2);
    const double s0 = std::sin(x[0] * M_PI / 2), s1 = std::sin(x[1] * M_PI / 2);
    return {(1 + g) * c0 * c1, (1 + g) * c0 * s1, (1 + g) * s0};
  }
  if (name == "fonseca3") {
    double a = 0, b = 0;
    const double k = 1 / std::sqrt(3.0);
    for (double v : x) a += (v - k) * (v - k), b += (v + k) * (v + k);
    return {1 - std::exp(-a), 1 - std::exp(-b)};
  }
  std::cerr << "mo_search_bench: unknown function " << name << "\n";
  std::exit(2);
}

SweepSpec spec_for(const std::string& peer, const std::string& name, const std::string& method, uint64_t seed) {
  const json params = json::parse(run_command("python3 " + peer + " space " + name));
  json metrics = json::array();
  for (size_t k = 0; k < kRef.at(name).size(); ++k) metrics.push_back({{"name", key("f", k + 1)}});
  const json file = {{"method", method}, {"metrics", metrics}, {"parameters", params}, {"seed", seed}};
  ParseOutcome out = parse_sweep(file.dump());
  if (!out.problems.empty()) {
    std::cerr << "mo_search_bench: " << name << ": " << out.problems[0].ToString() << "\n";
    std::exit(2);
  }
  return *out.spec;
}

// One sweep of `trials` trials with `slots` in flight (the oldest pending
// finishes first); every trial's objective values.
std::vector<std::vector<double>> run_sweep(const SweepSpec& spec, const std::string& name, int trials, int slots,
                                           int* fallbacks) {
  search::SearchHistory h;
  std::vector<std::vector<double>> seen;
  int issued = 0;
  while (static_cast<int>(h.finished.size()) < trials) {
    while (static_cast<int>(h.pending.size()) < slots && issued < trials) {
      json params;
      if (!spec.search) {
        params = trial_at(spec, issued).params;
      } else {
        auto s = search::suggest(*spec.search, spec, h, issued);
        if (!s.ok()) {
          std::cerr << "mo_search_bench: " << s.status().ToString() << "\n";
          std::exit(1);
        }
        *fallbacks += s->model.mode == "fallback";
        params = s->params;
      }
      h.pending.push_back(params);
      ++issued;
    }
    const json done = h.pending.front();
    h.pending.erase(h.pending.begin());
    std::vector<double> v = value(name, done);
    seen.push_back(v);
    h.finished.push_back({done, std::nullopt, std::move(v)});
  }
  return seen;
}

double hv_of(const std::string& name, const std::vector<std::vector<double>>& pts) {
  return hypervolume(pts, std::vector<Goal>(kRef.at(name).size(), Goal::kMinimize), kRef.at(name));
}

// Our formulas and hypervolume against the peer's on one sweep's points.
void check_against_peer(const std::string& peer, const std::string& name, const SweepSpec& spec,
                        const std::vector<std::vector<double>>& pts) {
  for (int i = 0; i < 3; ++i) {
    const json p = trial_at(spec, i).params;
    std::string cmd = "python3 " + peer + " trial " + name;
    for (const auto& [k, v] : p.items()) cmd.append(" --").append(k).append("=").append(v.dump());
    const std::string out = run_command(cmd);
    const json theirs = json::parse(out.substr(0, out.find('\n')));
    const std::vector<double> ours = value(name, p);
    for (size_t k = 0; k < ours.size(); ++k) {
      const double t = theirs[key("f", k + 1)].get<double>();
      if (std::fabs(t - ours[k]) > 1e-9 * std::max(1.0, std::fabs(t))) {
        std::cerr << "mo_search_bench: " << name << " differs from the peer at " << p.dump() << "\n";
        std::exit(1);
      }
    }
  }
  const std::string file = key("/tmp/mo_search_bench_points.", static_cast<size_t>(getpid()));
  {
    std::ofstream out(file);
    for (const auto& q : pts) out << json(q).dump() << "\n";
  }
  const double theirs = json::parse(run_command("/usr/bin/python3 " + peer + " hv " + name + " < " + file))["hypervolume"];
  std::remove(file.c_str());
  if (std::fabs(theirs - hv_of(name, pts)) > 1e-9 * std::max(1.0, theirs)) {
    std::cerr << "mo_search_bench: hypervolume of " << name << " differs from the peer's: " << hv_of(name, pts) << " vs "
              << theirs << "\n";
    std::exit(1);
  }
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  for (size_t a = 0; a < list.size();) {
    const size_t b = list.find(',', a);
    out.push_back(list.substr(a, b - a));
    a = b == std::string::npos ? list.size() : b + 1;
  }
  return out;
}

int quality(const std::string& peer, const std::vector<std::string>& functions, int trials, int lo, int hi, int slots,
            const std::vector<std::string>& methods) {
  for (const std::string& name : functions) {
    for (const std::string& method : methods) {
      json hv = json::array();
      int fallbacks = 0;
      for (int seed = lo; seed <= hi; ++seed) {
        const SweepSpec spec = spec_for(peer, name, method, static_cast<uint64_t>(seed));
        const auto pts = run_sweep(spec, name, trials, slots, &fallbacks);
        if (seed == lo) check_against_peer(peer, name, spec, pts);
        hv.push_back(hv_of(name, pts));
      }
      std::cout << json{{"function", name}, {"method", method}, {"slots", slots}, {"trials", trials},
                        {"hypervolume", hv}, {"fallbacks", fallbacks}}.dump()
                << std::endl;
    }
  }
  return 0;
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// One suggestion's time after `n` finished random trials, 2 objectives (zdt1) and 3 (dtlz2).
int latency(const std::string& peer, const std::vector<std::string>& sizes) {
  for (const char* name : {"zdt1", "dtlz2"}) {
    for (const std::string& size : sizes) {
      const int n = std::stoi(size);
      for (const char* method : {"nsga2", "tpe", "bayes"}) {
        const SweepSpec spec = spec_for(peer, name, method, 1);
        search::SearchHistory h;
        for (int i = 0; i < n; ++i) {
          const json p = trial_at(spec, i).params;
          h.finished.push_back({p, std::nullopt, value(name, p)});
        }
        json ms = json::array(), cpu = json::array();
        for (int r = 0; r < 7; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          const double c0 = thread_cpu_ms();
          auto s = search::suggest(*spec.search, spec, h, n + r);
          cpu.push_back(thread_cpu_ms() - c0);
          ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
          if (!s.ok() || s->model.mode != "model") {
            std::cerr << "mo_search_bench: the latency run of " << method << " did not use the model\n";
            return 1;
          }
        }
        std::cout << json{{"function", name}, {"objectives", kRef.at(name).size()}, {"method", method},
                          {"finished", n}, {"ms", ms}, {"cpu_ms", cpu}}.dump()
                  << std::endl;
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: mo_search_bench quality|latency PEER_SCRIPT [--functions a,b] [--trials N] [--seeds A-B] "
                 "[--slots K] [--methods nsga2,tpe,bayes,random] [--sizes 1000]\n";
    return 2;
  }
  const std::string mode = argv[1], peer = argv[2];
  int trials = 100, lo = 1, hi = 8, slots = 1;
  std::string functions = "zdt1,zdt2,dtlz2", methods = "nsga2,tpe,bayes,random", sizes = "1000";
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], v = argv[i + 1];
    if (flag == "--trials") trials = std::stoi(v);
    else if (flag == "--slots") slots = std::stoi(v);
    else if (flag == "--functions") functions = v;
    else if (flag == "--methods") methods = v;
    else if (flag == "--sizes") sizes = v;
    else if (flag == "--seeds") lo = std::stoi(v.substr(0, v.find('-'))), hi = std::stoi(v.substr(v.find('-') + 1));
    else {
      std::cerr << "mo_search_bench: unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (mode == "quality") return quality(peer, split(functions), trials, lo, hi, slots, split(methods));
  if (mode == "latency") return latency(peer, split(sizes));
  std::cerr << "mo_search_bench: unknown mode " << mode << " (quality or latency)\n";
  return 2;
}
