// The searchers against hand-checked properties: types kept, reproducible from
// the seed, pending slots get different suggestions, failures imputed, a model
// that cannot fit falls back out loud, both beat random on a simple bowl, and
// bayes keeps to the good region of a surface with many local minima.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "sweeps/search/encoding.h"
#include "sweeps/search/search.h"
#include "sweeps/space.h"
#include "sweeps/trial.h"

namespace swept::sweeps::search {
namespace {

using nlohmann::json;

SweepSpec spec_of(const json& parameters, uint64_t seed = 7) {
  json file = {{"method", "random"}, {"metric", {{"name", "loss"}}}, {"parameters", parameters}, {"seed", seed}};
  ParseOutcome out = parse_sweep(file.dump());
  REQUIRE_MESSAGE(out.problems.empty(), (out.problems.empty() ? "" : out.problems[0].ToString()));
  return *out.spec;
}

SearchSettings settings_of(const char* method, json extra = json::object()) {
  json file = {{"method", method}, {"metric", {{"name", "loss"}, {"goal", "minimize"}}}};
  file.update(extra);
  auto s = parse_search_settings(file);
  REQUIRE_MESSAGE(s.ok(), s.status().ToString());
  return *s;
}

const json kMixed = {
    {"lr", {{"distribution", "log_uniform_values"}, {"min", 1e-5}, {"max", 1.0}}},
    {"layers", {{"distribution", "int_uniform"}, {"min", 1}, {"max", 8}}},
    {"dropout", {{"distribution", "q_uniform"}, {"min", 0.0}, {"max", 0.5}, {"q", 0.1}}},
    {"act", {{"values", {"relu", "tanh", "gelu"}}}},
    {"optimizer", {{"parameters", {{"name", {{"value", "adam"}}}, {"beta1", {{"min", 0.8}, {"max", 0.99}}}}}}},
};

double mixed_loss(const json& p) {
  const double u = std::log10(p["lr"].get<double>()) + 2.5;
  return u * u + 0.1 * std::abs(p["layers"].get<int64_t>() - 4) + p["dropout"].get<double>() +
         (p["act"] == "gelu" ? 0.0 : 0.5) + std::abs(p["optimizer"]["beta1"].get<double>() - 0.9);
}

// Runs `n` trials one at a time and returns the history.
SearchHistory run(const SearchSettings& s, const SweepSpec& spec, int n, double (*loss)(const json&)) {
  SearchHistory h;
  for (int i = 0; i < n; ++i) {
    auto sug = suggest(s, spec, h, i);
    REQUIRE_MESSAGE(sug.ok(), sug.status().ToString());
    REQUIRE(sug->model.mode != "fallback");
    h.finished.push_back({sug->params, loss(sug->params)});
  }
  return h;
}

TEST_CASE("sweeps.search: suggestions keep every parameter's type, nesting and constants") {
  const SweepSpec spec = spec_of(kMixed);
  for (const char* method : {"bayes", "tpe"}) {
    CAPTURE(method);
    const SearchHistory h = run(settings_of(method), spec, 16, mixed_loss);
    auto sug = suggest(settings_of(method), spec, h, 16);
    REQUIRE(sug.ok());
    CHECK(sug->model.mode == "model");
    const json& p = sug->params;
    CHECK(p["lr"].is_number_float());
    CHECK(p["lr"].get<double>() >= 1e-5);
    CHECK(p["lr"].get<double>() <= 1.0);
    CHECK(p["layers"].is_number_integer());
    CHECK(p["layers"].get<int64_t>() >= 1);
    CHECK(p["layers"].get<int64_t>() <= 8);
    const double dropout = p["dropout"].get<double>();
    CHECK(std::fabs(dropout * 10 - std::round(dropout * 10)) < 1e-9);
    CHECK((p["act"] == "relu" || p["act"] == "tanh" || p["act"] == "gelu"));
    CHECK(p["optimizer"]["name"] == "adam");
    CHECK(p["optimizer"]["beta1"].is_number_float());
    CHECK(!sug->model.to_json().dump().empty());
  }
}

TEST_CASE("sweeps.search: the startup trials are random search's trials for the same seed") {
  const SweepSpec spec = spec_of(kMixed, 11);
  for (const char* method : {"bayes", "tpe"}) {
    SearchHistory h;
    for (int i = 0; i < 3; ++i) {
      auto sug = suggest(settings_of(method), spec, h, i);
      REQUIRE(sug.ok());
      CHECK(sug->model.mode == "startup");
      CHECK(sug->params == trial_at(spec, i).params);
      h.finished.push_back({sug->params, mixed_loss(sug->params)});
    }
  }
}

TEST_CASE("sweeps.search: the same history and seed give the same suggestion, another seed another") {
  for (const char* method : {"bayes", "tpe"}) {
    CAPTURE(method);
    const SweepSpec a = spec_of(kMixed, 3);
    const SearchHistory h = run(settings_of(method), a, 14, mixed_loss);
    auto s1 = suggest(settings_of(method), a, h, 14);
    auto s2 = suggest(settings_of(method), a, h, 14);
    auto s3 = suggest(settings_of(method), spec_of(kMixed, 4), h, 14);
    REQUIRE((s1.ok() && s2.ok() && s3.ok()));
    CHECK(s1->params == s2->params);
    CHECK(s1->model.to_json() == s2->model.to_json());
    CHECK(s1->params != s3->params);
  }
}

TEST_CASE("sweeps.search: four free slots get four different suggestions (fantasies / constant liar)") {
  const SweepSpec spec = spec_of({{"x", {{"min", -2.0}, {"max", 2.0}}}, {"y", {{"min", -2.0}, {"max", 2.0}}}});
  auto bowl = [](const json& p) { return std::pow(p["x"].get<double>() - 0.5, 2) + std::pow(p["y"].get<double>(), 2); };
  for (const char* method : {"bayes", "tpe"}) {
    CAPTURE(method);
    SearchHistory h;
    for (int i = 0; i < 12; ++i) h.finished.push_back({trial_at(spec, i).params, bowl(trial_at(spec, i).params)});
    std::set<std::string> seen;
    for (int slot = 0; slot < 4; ++slot) {
      auto sug = suggest(settings_of(method), spec, h, 12 + slot);
      REQUIRE(sug.ok());
      CHECK(sug->model.mode == "model");
      CHECK(sug->model.n_pending == slot);
      seen.insert(sug->params.dump());
      h.pending.push_back(sug->params);
    }
    CHECK(seen.size() == 4);
  }
}

TEST_CASE("sweeps.search: failed, lost and diverged trials count as the worst value, or as metric.impute") {
  const SweepSpec spec = spec_of({{"x", {{"min", 0.0}, {"max", 1.0}}}});
  SearchHistory h;
  for (int i = 0; i < 12; ++i) {
    const json p = trial_at(spec, i).params;
    std::optional<double> v = p["x"].get<double>();
    if (i % 4 == 1) v = std::nullopt;  // lost
    if (i % 4 == 2) v = NAN;           // diverged
    h.finished.push_back({p, v});
  }
  for (const char* method : {"bayes", "tpe"}) {
    auto sug = suggest(settings_of(method), spec, h, 12);
    REQUIRE(sug.ok());
    CHECK(sug->model.mode == "model");
    CHECK(sug->model.n_failed == 6);
    auto imputed = suggest(settings_of(method, {{"metric", {{"name", "loss"}, {"impute", 100.0}}}}), spec, h, 12);
    REQUIRE(imputed.ok());
    CHECK(imputed->model.mode == "model");
  }
}

TEST_CASE("sweeps.search: a model that cannot be used falls back to random, and says so") {
  const SweepSpec spec = spec_of({{"x", {{"min", 0.0}, {"max", 1.0}}}});
  SearchHistory flat, failed;
  for (int i = 0; i < 12; ++i) {
    flat.finished.push_back({trial_at(spec, i).params, 1.0});
    failed.finished.push_back({trial_at(spec, i).params, std::nullopt});
  }
  auto s = suggest(settings_of("bayes"), spec, flat, 12);
  REQUIRE(s.ok());
  CHECK(s->model.mode == "fallback");
  CHECK(s->model.note.find("all 12 values are equal") != std::string::npos);
  CHECK(s->params == trial_at(spec, 12).params);
  for (const char* method : {"bayes", "tpe"}) {
    auto f = suggest(settings_of(method), spec, failed, 12);
    REQUIRE(f.ok());
    CHECK(f->model.mode == "fallback");
    CHECK(f->model.note.find("no finished trial reported a finite value") != std::string::npos);
  }
}

TEST_CASE("sweeps.search: categoricals are one-hot in the GP (the order of the values in the file does not matter)") {
  // The same problem with the choices listed in two orders: with one-hot
  // encoding the fitted model (and so the suggestion, mapped back) is the same.
  auto loss = [](const json& p) { return (p["c"] == "b" ? 0.0 : 1.0) + std::pow(p["x"].get<double>() - 0.3, 2); };
  const SweepSpec s1 = spec_of({{"c", {{"values", {"a", "b", "c"}}}}, {"x", {{"min", 0.0}, {"max", 1.0}}}});
  const SweepSpec s2 = spec_of({{"c", {{"values", {"c", "a", "b"}}}}, {"x", {{"min", 0.0}, {"max", 1.0}}}});
  SearchHistory h;
  for (double x : {0.1, 0.5, 0.9}) {
    for (const char* c : {"a", "b", "c"}) {
      json p = {{"c", c}, {"x", x}};
      h.finished.push_back({p, loss(p)});
    }
  }
  auto a = suggest(settings_of("bayes"), s1, h, 9);
  auto b = suggest(settings_of("bayes"), s2, h, 9);
  REQUIRE((a.ok() && b.ok()));
  CHECK(a->model.log_marginal_likelihood == doctest::Approx(b->model.log_marginal_likelihood).epsilon(1e-6));
  CHECK(a->params["c"] == "b");
}

TEST_CASE("sweeps.search: both searchers beat random search on a smooth bowl (same seed, same budget)") {
  const SweepSpec spec = spec_of({{"x", {{"min", -5.0}, {"max", 5.0}}}, {"y", {{"min", -5.0}, {"max", 5.0}}},
                                  {"z", {{"min", -5.0}, {"max", 5.0}}}});
  auto bowl = [](const json& p) {
    return std::pow(p["x"].get<double>() - 1, 2) + std::pow(p["y"].get<double>() + 2, 2) + std::pow(p["z"].get<double>(), 2);
  };
  double random_best = HUGE_VAL;
  for (int i = 0; i < 30; ++i) random_best = std::min(random_best, bowl(trial_at(spec, i).params));
  for (const char* method : {"bayes", "tpe"}) {
    CAPTURE(method);
    const SearchHistory h = run(settings_of(method), spec, 30, +[](const json& p) {
      return std::pow(p["x"].get<double>() - 1, 2) + std::pow(p["y"].get<double>() + 2, 2) + std::pow(p["z"].get<double>(), 2);
    });
    double best = HUGE_VAL;
    for (const Observation& o : h.finished) best = std::min(best, *o.value);
    CHECK(best < random_best);
  }
}

TEST_CASE("sweeps.search: tpe searches a small integer range as integers and settles on the best one") {
  // Four integers: each a discrete kernel (a draw rounded to its integer, scored by the kernel's mass on it).
  const SweepSpec spec = spec_of({{"k", {{"distribution", "int_uniform"}, {"min", 1}, {"max", 4}}},
                                  {"x", {{"min", 0.0}, {"max", 1.0}}}});
  const SearchHistory h = run(settings_of("tpe"), spec, 40, +[](const json& p) {
    return std::abs(static_cast<double>(p["k"].get<int64_t>() - 3)) + 0.1 * p["x"].get<double>();
  });
  int counts[5] = {0, 0, 0, 0, 0};
  for (size_t i = 0; i < h.finished.size(); ++i) {
    const json& k = h.finished[i].params["k"];
    REQUIRE(k.is_number_integer());
    REQUIRE(k.get<int64_t>() >= 1);
    REQUIRE(k.get<int64_t>() <= 4);
    if (i >= 10) ++counts[k.get<int64_t>()];  // the model's suggestions
  }
  INFO("suggested k = 1, 2, 3, 4: ", counts[1], ", ", counts[2], ", ", counts[3], ", ", counts[4]);
  CHECK(counts[3] > counts[1] + counts[2] + counts[4]);
}

TEST_CASE("sweeps.search: settings refused with the field named") {
  auto err = [](json file) {
    auto s = parse_search_settings(file);
    return s.ok() ? std::string("accepted") : s.status().message();
  };
  CHECK(err({{"method", "bayes"}}).rfind("metric:", 0) == 0);
  CHECK(err({{"method", "tpe"}, {"metric", {{"name", "l"}, {"goal", "lower"}}}}).rfind("metric.goal:", 0) == 0);
  CHECK(err({{"method", "grid"}, {"metric", {{"name", "l"}}}}).rfind("method:", 0) == 0);
  CHECK(err({{"method", "tpe"}, {"metric", {{"name", "l"}}}, {"tpe", {{"n_startup_trials", 0}}}}).rfind("tpe.n_startup_trials:", 0) == 0);
  CHECK(err({{"method", "tpe"}, {"metric", {{"name", "l"}}}, {"tpe", {{"gamma", 0.1}}}}).rfind("tpe.gamma:", 0) == 0);
  CHECK(err({{"method", "bayes"}, {"metric", {{"name", "l"}}}, {"tpe", json::object()}}).rfind("tpe:", 0) == 0);
  CHECK(err({{"method", "tpe"}, {"metric", {{"name", "l"}}}, {"tpe", {{"bandwidth", "silverman"}}}}).rfind("tpe.bandwidth:", 0) == 0);
  CHECK(err({{"method", "tpe"}, {"metric", {{"name", "l"}}}, {"tpe", {{"below_weights", 1}}}}).rfind("tpe.below_weights:", 0) == 0);
  CHECK(err({{"method", "bayes"}, {"metric", {{"name", "l"}, {"impute", "worst"}}}}).rfind("metric.impute:", 0) == 0);
  CHECK(err({{"method", "bayes"}, {"metric", {{"name", "l"}}}, {"bayes", {{"max_model_trials", 4}}}}).rfind("bayes.max_model_trials:", 0) == 0);
  CHECK(err({{"method", "bayes"}, {"metric", {{"name", "l"}}}, {"bayes", {{"additive", 1}}}}).rfind("bayes.additive:", 0) == 0);
  CHECK(err({{"method", "bayes"}, {"metric", {{"name", "l"}, {"goal", "maximize"}, {"impute", -1}}}}) == "accepted");
}

TEST_CASE("sweeps.search: tpe's bandwidth and below_weights: swept's defaults, Optuna's on request, the same guarantees") {
  const SearchSettings defaults = settings_of("tpe");
  CHECK(defaults.tpe.bandwidth == TpeBandwidth::kScott);
  CHECK(defaults.tpe.below_weights == TpeBelowWeights::kImprovement);
  const SearchSettings optuna = settings_of("tpe", {{"tpe", {{"bandwidth", "optuna"}, {"below_weights", "optuna"}}}});
  CHECK(optuna.tpe.bandwidth == TpeBandwidth::kOptuna);
  CHECK(optuna.tpe.below_weights == TpeBelowWeights::kOptuna);
  const SearchSettings scott_only = settings_of("tpe", {{"tpe", {{"below_weights", "optuna"}}}});
  const SearchSettings weights_only = settings_of("tpe", {{"tpe", {{"bandwidth", "optuna"}}}});
  CHECK(scott_only.tpe.bandwidth == TpeBandwidth::kScott);
  CHECK(weights_only.tpe.below_weights == TpeBelowWeights::kImprovement);

  const SweepSpec spec = spec_of(kMixed, 5);
  const SearchHistory h = run(optuna, spec, 16, mixed_loss);
  std::set<double> acquisitions;
  for (const SearchSettings* s : {&defaults, &optuna, &scott_only, &weights_only}) {
    auto a = suggest(*s, spec, h, 16);
    auto b = suggest(*s, spec, h, 16);
    REQUIRE((a.ok() && b.ok()));
    CHECK(a->model.mode == "model");
    CHECK(a->params == b->params);  // reproducible
    acquisitions.insert(a->model.acquisition);
    // Constant liar still spreads four slots.
    SearchHistory busy = h;
    std::set<std::string> slots;
    for (int slot = 0; slot < 4; ++slot) {
      auto sug = suggest(*s, spec, busy, 16 + slot);
      REQUIRE(sug.ok());
      slots.insert(sug->params.dump());
      busy.pending.push_back(sug->params);
    }
    CHECK(slots.size() == 4);
  }
  CHECK(acquisitions.size() == 4);  // each setting changes l(x) or g(x), so log l/g at the suggestion
}

// Levy's function in 4-D on [-10, 10]^4 (minimum 0 at x = 1): a bowl under
// many local minima, which a GP with few trials partly explains as noise.
double levy4(const json& p) {
  static const char* names[4] = {"x1", "x2", "x3", "x4"};
  double w[4];
  for (int i = 0; i < 4; ++i) w[i] = 1 + (p[names[i]].get<double>() - 1) / 4;
  double total = std::pow(std::sin(M_PI * w[0]), 2) + std::pow(w[3] - 1, 2) * (1 + std::pow(std::sin(2 * M_PI * w[3]), 2));
  for (int i = 0; i < 3; ++i) total += std::pow(w[i] - 1, 2) * (1 + 10 * std::pow(std::sin(M_PI * w[i] + 1), 2));
  return total;
}

TEST_CASE("sweeps.search: bayes does not spend a noisy surface's trials on the corners of the box") {
  // Where the GP fits a noise term, EI measured against the best observed
  // value (itself a lucky draw of that noise) is beaten almost nowhere near
  // the trials, so it goes where the model knows least: the corners. Measured
  // against the model's best posterior mean at a trial, it looks near the
  // good trials and only rarely at the corners.
  const json box = {{"x1", {{"min", -10.0}, {"max", 10.0}}}, {"x2", {{"min", -10.0}, {"max", 10.0}}},
                    {"x3", {{"min", -10.0}, {"max", 10.0}}}, {"x4", {{"min", -10.0}, {"max", 10.0}}}};
  int model_trials = 0, at_corners = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const SearchHistory h = run(settings_of("bayes"), spec_of(box, seed), 40, levy4);
    for (size_t i = 10; i < h.finished.size(); ++i) {
      int at_bound = 0;
      for (const char* x : {"x1", "x2", "x3", "x4"}) at_bound += std::fabs(h.finished[i].params[x].get<double>()) > 9.9;
      ++model_trials;
      at_corners += at_bound >= 2;
    }
  }
  INFO(at_corners, " of ", model_trials, " model trials at a corner (two or more parameters at a bound)");
  CHECK(at_corners * 10 < model_trials);
}

TEST_CASE("sweeps.search: an explicit trials list has nothing to search") {
  ParseOutcome out = parse_sweep(R"({"method": "grid", "trials": [{"a": 1}, {"a": 2}]})");
  REQUIRE(out.problems.empty());
  auto s = suggest(settings_of("tpe"), *out.spec, {}, 0);
  CHECK_FALSE(s.ok());
}

double separable4(const json& p) {  // parameters that act one at a time, each with several local minima
  double s = 0;
  for (const char* x : {"x1", "x2", "x3", "x4"}) {
    const double v = p[x].get<double>();
    s += std::sin(1.5 * v) + std::fabs(v) / 5;
  }
  return s;
}

double product4(const json& p) {  // parameters that only act together: no one of them alone says anything
  return p["x1"].get<double>() * p["x2"].get<double>() * p["x3"].get<double>() * p["x4"].get<double>();
}

TEST_CASE("sweeps.search: bayes' kernel is mostly additive where parameters act one at a time, joint where they act together") {
  // The marginal likelihood weighs the kernel's additive part against the
  // joint one. On the same 30 random trials of each function, it should lean
  // on the additive part for a sum of one-parameter terms and leave it for a
  // product, which no sum of one-parameter terms can follow.
  const json box = {{"x1", {{"min", -5.0}, {"max", 5.0}}}, {"x2", {{"min", -5.0}, {"max", 5.0}}},
                    {"x3", {{"min", -5.0}, {"max", 5.0}}}, {"x4", {{"min", -5.0}, {"max", 5.0}}}};
  const SearchSettings random30 = settings_of("bayes", {{"bayes", {{"n_startup_trials", 30}}}});
  auto weight = [&](double (*loss)(const json&), const SearchSettings& s) {
    const SweepSpec spec = spec_of(box, 3);
    const SearchHistory h = run(random30, spec, 30, loss);
    auto sug = suggest(s, spec, h, 30);
    REQUIRE_MESSAGE(sug.ok(), sug.status().ToString());
    REQUIRE(sug->model.mode == "model");
    CHECK(sug->model.to_json().contains("additive_weight"));
    return sug->model.additive_weight;
  };
  const double w_sum = weight(separable4, settings_of("bayes")), w_product = weight(product4, settings_of("bayes"));
  INFO("additive weight: sum ", w_sum, ", product ", w_product);
  CHECK(w_sum > 0.7);  // measured 0.85
  CHECK(w_product < 0.4);  // measured 0.23
  // `additive: false`: the joint kernel alone, as before the additive part.
  CHECK(weight(separable4, settings_of("bayes", {{"bayes", {{"additive", false}}}})) == 0.0);
}

}  // namespace
}  // namespace swept::sweeps::search
