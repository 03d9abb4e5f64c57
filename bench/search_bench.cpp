// search_bench: swept's searchers (bayes, tpe, random) on the peer's test
// functions, and their suggestion latency. bench/search_bench.sh runs it beside
// the peer (../shared/bench/search_peer.py: Optuna's TPE and random sampler)
// and prints the tables of docs/benchmarks.md, "Search".
//
//   search_bench quality PEER_SCRIPT [--trials 40] [--seeds 1-8] [--slots 1] [--function NAME] [--methods LIST]
//       [--settings '{"bayes": {...}, "tpe": {...}}'] [--extra]
//       (--extra: bench/search_extra_peer.py's functions, with that script as PEER_SCRIPT)
//       [--functions a,b,c]: these names instead, evaluated by the peer itself (`PEER serve NAME`: one
//       JSON object of params a line in, one value a line out), so any peer with a serve mode
//       (bench/search_shapes_peer.py) can bring functions that this file does not know
//       one JSON line per (function, method): {"function","method","slots","best":[per seed]}
//   search_bench latency PEER_SCRIPT [--sizes 100,1000,10000]
//       one JSON line per (method, finished trials): {"method","finished","ms":[...],"cpu_ms":[...]}
//
// The spaces come from the peer (`search_peer.py space NAME`), so both sides
// search the same parameters; the functions are evaluated here, from their
// published definitions, and the first suggestions of every function are
// checked against the peer's own evaluation (`search_peer.py trial ...`) so a
// difference in the formulas cannot go unnoticed.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench/run_command.h"
#include "sweeps/search/search.h"
#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace {

using nlohmann::json;
using namespace swept::sweeps;

using swept::bench::run_command;

const char* kFunctions[] = {"branin", "hartmann6", "rosenbrock4", "ackley5", "nnlike"};
// bench/search_extra_peer.py's functions (--extra): not used to choose any default.
const char* kExtraFunctions[] = {"styblinski4", "levy5", "hartmann3"};

// The five functions, from their textbook definitions (Branin; Hartmann 6-D
// with the usual A, P, alpha; Rosenbrock; Ackley with a=20, b=0.2, c=2 pi) and
// the peer's documented nnlike surface.
double value(const std::string& name, const json& p) {
  auto x = [&](int i) {
    std::string key = "x";
    key += std::to_string(i);
    return p[key].get<double>();
  };
  if (name == "branin") {
    const double x1 = x(1), x2 = x(2), b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, t = 1 / (8 * M_PI);
    return std::pow(x2 - b * x1 * x1 + c * x1 - 6, 2) + 10 * (1 - t) * std::cos(x1) + 10;
  }
  if (name == "hartmann6") {
    static const double a[4][6] = {{10, 3, 17, 3.5, 1.7, 8}, {0.05, 10, 17, 0.1, 8, 14}, {3, 3.5, 1.7, 10, 17, 8}, {17, 8, 0.05, 10, 0.1, 14}};
    static const double pp[4][6] = {{1312, 1696, 5569, 124, 8283, 5886}, {2329, 4135, 8307, 3736, 1004, 9991},
                                    {2348, 1451, 3522, 2883, 3047, 6650}, {4047, 8828, 8732, 5743, 1091, 381}};
    static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
    double total = 0;
    for (int i = 0; i < 4; ++i) {
      double inner = 0;
      for (int j = 0; j < 6; ++j) inner += a[i][j] * std::pow(x(j + 1) - 1e-4 * pp[i][j], 2);
      total += alpha[i] * std::exp(-inner);
    }
    return -total;
  }
  if (name == "rosenbrock4") {
    double s = 0;
    for (int i = 1; i < 4; ++i) s += 100 * std::pow(x(i + 1) - x(i) * x(i), 2) + std::pow(1 - x(i), 2);
    return s;
  }
  if (name == "styblinski4") {
    double t = 0;
    for (int i = 1; i <= 4; ++i) t += std::pow(x(i), 4) - 16 * x(i) * x(i) + 5 * x(i);
    return 0.5 * t;
  }
  if (name == "levy5") {
    auto w = [&](int i) { return 1 + (x(i) - 1) / 4; };
    double t = std::pow(std::sin(M_PI * w(1)), 2);
    for (int i = 1; i < 5; ++i) t += std::pow(w(i) - 1, 2) * (1 + 10 * std::pow(std::sin(M_PI * w(i) + 1), 2));
    return t + std::pow(w(5) - 1, 2) * (1 + std::pow(std::sin(2 * M_PI * w(5)), 2));
  }
  if (name == "hartmann3") {
    static const double a[4][3] = {{3.0, 10, 30}, {0.1, 10, 35}, {3.0, 10, 30}, {0.1, 10, 35}};
    static const double pp[4][3] = {{3689, 1170, 2673}, {4699, 4387, 7470}, {1091, 8732, 5547}, {381, 5743, 8828}};
    static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
    double total = 0;
    for (int i = 0; i < 4; ++i) {
      double inner = 0;
      for (int j = 0; j < 3; ++j) inner += a[i][j] * std::pow(x(j + 1) - 1e-4 * pp[i][j], 2);
      total += alpha[i] * std::exp(-inner);
    }
    return -total;
  }
  if (name == "ackley5") {
    double sq = 0, cs = 0;
    for (int i = 1; i <= 5; ++i) sq += x(i) * x(i), cs += std::cos(2 * M_PI * x(i));
    return -20 * std::exp(-0.2 * std::sqrt(sq / 5)) - std::exp(cs / 5) + 20 + M_E;
  }
  // nnlike: a validation-loss-shaped surface over lr, batch size, width, activation, weight decay.
  const std::string act = p["activation"].get<std::string>();
  const double best_lr = act == "relu" ? -2.0 : act == "tanh" ? -2.5 : -1.0;
  const double u = std::log10(p["lr"].get<double>()) - best_lr + 0.3 * (std::log2(p["batch_size"].get<double>()) - 7);
  const double h = std::log2(p["hidden"].get<double>()) - 9;
  const double wd = std::log10(p["weight_decay"].get<double>()) + 4;
  const double base = act == "relu" ? 0.02 : act == "tanh" ? 0.03 : 0.05;
  return base + 0.08 * u * u + 0.004 * h * h + 0.01 * wd * wd + (u > 2 ? 0.5 : 0.0);
}

// The peer's `serve NAME` process: params written as one JSON line, the value
// read back as one line. One process per function, so a 40-trial sweep does
// not start Python 40 times.
class PeerFunction {
 public:
  PeerFunction(const std::string& peer, const std::string& name) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) std::exit(1);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0), dup2(out[1], 1);
      close(in[0]), close(in[1]), close(out[0]), close(out[1]);
      execlp("python3", "python3", peer.c_str(), "serve", name.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in[0]), close(out[1]);
    to_ = fdopen(in[1], "w"), from_ = fdopen(out[0], "r");
  }
  ~PeerFunction() {
    fclose(to_), fclose(from_);
    waitpid(pid_, nullptr, 0);
  }
  PeerFunction(const PeerFunction&) = delete;
  PeerFunction& operator=(const PeerFunction&) = delete;

  double operator()(const json& params) {
    std::fputs((params.dump() + "\n").c_str(), to_);
    std::fflush(to_);
    char line[256];
    if (!std::fgets(line, sizeof line, from_)) {
      std::cerr << "search_bench: the peer's serve process gave no value for " << params.dump() << "\n";
      std::exit(1);
    }
    return std::strtod(line, nullptr);
  }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

PeerFunction* g_peer_function = nullptr;  // set while a --functions function is being searched

double evaluate(const std::string& name, const json& params) {
  return g_peer_function ? (*g_peer_function)(params) : value(name, params);
}

SweepSpec spec_for(const std::string& peer, const std::string& name, uint64_t seed) {
  const json params = json::parse(run_command("python3 " + peer + " space " + name));
  const json file = {{"method", "random"}, {"metric", {{"name", "value"}}}, {"parameters", params}, {"seed", seed}};
  ParseOutcome out = parse_sweep(file.dump());
  if (!out.problems.empty()) {
    std::cerr << "search_bench: the peer's space for " << name << " does not parse: " << out.problems[0].ToString() << "\n";
    std::exit(2);
  }
  return *out.spec;
}

json g_extra = json::object();  // --settings: a `bayes` or `tpe` block to try

search::SearchSettings settings_for(const std::string& method) {
  json file = {{"method", method}, {"metric", {{"name", "value"}, {"goal", "minimize"}}}};
  if (g_extra.contains(method)) file[method] = g_extra[method];
  auto s = search::parse_search_settings(file);
  if (!s.ok()) {
    std::cerr << "search_bench: " << s.status().ToString() << "\n";
    std::exit(2);
  }
  return *s;
}

// Checks our evaluation against the peer's on a few points.
void check_against_peer(const std::string& peer, const std::string& name, const std::vector<json>& points) {
  for (const json& p : points) {
    std::string cmd = "python3 " + peer + " trial " + name;
    for (const auto& [k, v] : p.items()) {
      cmd.append(" --").append(k).append("=");
      cmd.append(v.is_string() ? v.get<std::string>() : v.dump());
    }
    const std::string out = run_command(cmd);
    const double theirs = json::parse(out.substr(0, out.find('\n')))["value"].get<double>();
    const double ours = value(name, p);
    if (std::fabs(theirs - ours) > 1e-9 * std::max(1.0, std::fabs(theirs))) {
      std::cerr << "search_bench: " << name << " differs from the peer at " << p.dump() << ": " << ours << " vs " << theirs << "\n";
      std::exit(1);
    }
  }
}

// One sweep of `trials` trials with `slots` in flight; the oldest pending trial finishes first.
double run_sweep(const std::string& method, const SweepSpec& spec, const std::string& name, int trials, int slots,
                 std::vector<json>* first_points, int* fallbacks) {
  search::SearchHistory h;
  const auto settings = settings_for(method == "random" ? "tpe" : method);
  double best = HUGE_VAL;
  int issued = 0;
  while (static_cast<int>(h.finished.size()) < trials) {
    while (static_cast<int>(h.pending.size()) < slots && issued < trials) {
      json params;
      if (method == "random") {
        params = trial_at(spec, issued).params;
      } else {
        auto s = search::suggest(settings, spec, h, issued);
        if (!s.ok()) {
          std::cerr << "search_bench: " << s.status().ToString() << "\n";
          std::exit(1);
        }
        if (s->model.mode == "fallback") ++*fallbacks;
        if (std::getenv("SEARCH_BENCH_TRACE"))
          std::cerr << issued << " " << s->params.dump() << " " << s->model.to_json().dump() << "\n";
        params = s->params;
      }
      if (first_points && first_points->size() < 3) first_points->push_back(params);
      h.pending.push_back(params);
      ++issued;
    }
    const json done = h.pending.front();
    h.pending.erase(h.pending.begin());
    const double v = evaluate(name, done);
    best = std::min(best, v);
    h.finished.push_back({done, v});
  }
  return best;
}

int quality(const std::string& peer, int trials, int seed_lo, int seed_hi, int slots, const std::string& only,
            const std::string& methods, bool extra, const std::vector<std::string>& peer_functions) {
  std::vector<std::string> names(std::begin(kFunctions), std::end(kFunctions));
  if (extra) names.assign(std::begin(kExtraFunctions), std::end(kExtraFunctions));
  if (!peer_functions.empty()) names = peer_functions;
  for (const std::string& name : names) {
    if (!only.empty() && only != name) continue;
    std::unique_ptr<PeerFunction> served;
    if (!peer_functions.empty()) served = std::make_unique<PeerFunction>(peer, name);
    g_peer_function = served.get();
    std::vector<json> points;
    for (const char* method : {"bayes", "tpe", "random"}) {
      if (methods.find(method) == std::string::npos) continue;
      json best = json::array();
      int fallbacks = 0;
      for (int seed = seed_lo; seed <= seed_hi; ++seed) {
        const SweepSpec spec = spec_for(peer, name, static_cast<uint64_t>(seed));
        best.push_back(run_sweep(method, spec, name, trials, slots, points.size() < 3 ? &points : nullptr, &fallbacks));
      }
      std::cout << json{{"function", name}, {"method", method}, {"slots", slots}, {"trials", trials}, {"best", best},
                        {"fallbacks", fallbacks}}.dump()
                << std::endl;
    }
    if (!served) check_against_peer(peer, name, points);
    g_peer_function = nullptr;
  }
  return 0;
}

// CPU time of this thread: on a shared, loaded machine it is inflated far less than wall time.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

int latency(const std::string& peer, const std::vector<int>& sizes) {
  using Clock = std::chrono::steady_clock;
  for (const char* name : {"hartmann6", "nnlike"}) {
    const SweepSpec spec = spec_for(peer, name, 1);
    for (int n : sizes) {
      search::SearchHistory h;
      for (int i = 0; i < n; ++i) {
        const json p = trial_at(spec, i).params;
        h.finished.push_back({p, value(name, p)});
      }
      for (const char* method : {"bayes", "tpe"}) {
        json ms = json::array(), cpu_ms = json::array();
        const int reps = n >= 10000 ? 3 : 7;
        for (int r = 0; r < reps; ++r) {
          const auto t0 = Clock::now();
          const double c0 = thread_cpu_ms();
          auto s = search::suggest(settings_for(method), spec, h, n + r);
          cpu_ms.push_back(thread_cpu_ms() - c0);
          const double dt = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          if (!s.ok() || s->model.mode != "model") {
            std::cerr << "search_bench: latency run did not use the model\n";
            return 1;
          }
          ms.push_back(dt);
        }
        std::cout << json{{"function", name}, {"method", method}, {"finished", n}, {"ms", ms}, {"cpu_ms", cpu_ms}}.dump()
                  << std::endl;
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: search_bench quality|latency PEER_SCRIPT [--trials N] [--seeds A-B] [--slots K] [--function NAME] [--methods bayes,tpe,random] [--sizes a,b,c] [--extra] [--functions a,b,c]\n";
    return 2;
  }
  const std::string mode = argv[1], peer = argv[2];
  int trials = 40, lo = 1, hi = 8, slots = 1;
  std::string only, methods = "bayes,tpe,random";
  std::vector<int> sizes{100, 1000, 10000};
  std::vector<std::string> peer_functions;
  bool extra = false;
  for (int i = 3; i < argc; i += 2) {
    if (std::string(argv[i]) == "--extra") {
      extra = true, --i;
      continue;
    }
    if (i + 1 >= argc) break;
    const std::string flag = argv[i], v = argv[i + 1];
    if (flag == "--trials") trials = std::stoi(v);
    else if (flag == "--slots") slots = std::stoi(v);
    else if (flag == "--function") only = v;
    else if (flag == "--methods") methods = v;
    else if (flag == "--settings") g_extra = json::parse(v);
    else if (flag == "--functions") {
      for (size_t a = 0; a < v.size();) {
        const size_t b = v.find(',', a);
        peer_functions.push_back(v.substr(a, b - a));
        a = b == std::string::npos ? v.size() : b + 1;
      }
    }
    else if (flag == "--seeds") lo = std::stoi(v.substr(0, v.find('-'))), hi = std::stoi(v.substr(v.find('-') + 1));
    else if (flag == "--sizes") {
      sizes.clear();
      for (size_t a = 0; a < v.size();) {
        const size_t b = v.find(',', a);
        sizes.push_back(std::stoi(v.substr(a, b - a)));
        a = b == std::string::npos ? v.size() : b + 1;
      }
    } else {
      std::cerr << "search_bench: unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (mode == "quality") return quality(peer, trials, lo, hi, slots, only, methods, extra, peer_functions);
  if (mode == "latency") return latency(peer, sizes);
  std::cerr << "search_bench: unknown mode " << mode << " (quality or latency)\n";
  return 2;
}
