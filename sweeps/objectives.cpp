// The keys of several objectives (objectives.h): `metrics:`, `constraints:`
// and `scheduler:`. W&B's rules (wandb/sweeps at b1dfc5f: config/cfg.py's
// schema_violations_from_proposed_config and the `metric` and `scheduler`
// definitions of config/schema.json) are kept with swept's messages; where
// swept goes further than W&B (metrics with a method W&B has not opened to
// them, the engines W&B's validator still refuses) it says so in a warning,
// which `--strict` turns into W&B's refusal.
#include "sweeps/objectives.h"

#include <set>

namespace swept::sweeps {
namespace {

using json = nlohmann::json;

// What to write instead of the Python hooks of W&B's custom scheduler.
const char* const kInsteadOfPython =
    "swept does not run Python optimizer code; choose the searcher with scheduler.engine (optuna runs tpe, ax "
    "runs bayes) or with method: tpe | bayes | nsga2 and their settings blocks, and give the space under parameters";

std::string method_of(const json& root) {
  return root.contains("method") && root["method"].is_string() ? root["method"].get<std::string>() : "";
}

// One item of `metrics:`, read as parse_metric reads `metric` (W&B's
// defaults: goal minimize, impute worst), plus swept's `ref`.
std::optional<Metric> parse_metrics_item(Checker& ck, const json& m, const std::string& path) {
  if (!m.is_object()) {
    ck.add(path, "expected an object like {\"name\": \"val_loss\", \"goal\": \"minimize\"}, found " + found(m));
    return std::nullopt;
  }
  ck.only_keys(m, path, {"name", "goal", "target", "impute", "impute_while_running", "ref"});
  Metric metric;
  bool ok = true;
  if (!m.contains("name")) {
    ck.add(path, "expected key name (the metric to optimize), found none");
    ok = false;
  } else if (auto n = ck.string(m["name"], join(path, "name"), true)) {
    metric.name = *n;
  } else {
    ok = false;
  }
  if (m.contains("goal")) {
    if (m["goal"] == "maximize") {
      metric.goal = Goal::kMaximize;
    } else if (m["goal"] != "minimize") {
      // As for metric.goal: W&B fills in its default, minimize.
      ck.warn(join(path, "goal"), "expected \"minimize\" or \"maximize\", found " + found(m["goal"]) +
                                      "; minimizing, as W&B does");
    }
  }
  if (m.contains("target")) {
    metric.target = ck.number(m["target"], join(path, "target"));
    ok = metric.target.has_value() && ok;
  }
  if (m.contains("ref")) {
    metric.ref = ck.number(m["ref"], join(path, "ref"));
    ok = metric.ref.has_value() && ok;
  }
  // W&B's words; with several objectives a failed trial is left out of the
  // searchers' ranking (as Optuna leaves it out), so the word only documents.
  if (m.contains("impute")) ok = ck.choice(m["impute"], join(path, "impute"), {"latest", "best", "worst"}).has_value() && ok;
  if (m.contains("impute_while_running")) {
    ok = ck.choice(m["impute_while_running"], join(path, "impute_while_running"), {"latest", "best", "worst", "false"})
             .has_value() && ok;
  }
  return ok ? std::optional<Metric>(metric) : std::nullopt;
}

void parse_metrics(Checker& ck, const json& root, SweepSpec& spec) {
  const json& list = root["metrics"];
  if (root.contains("metric")) {
    ck.add("metrics", "metric and metrics cannot both be set: use metric for a single objective, or metrics (a list "
                      "of two or more) for several");
    return;
  }
  if (!list.is_array()) {
    ck.add("metrics", "expected a list of two or more metrics like [{\"name\": \"loss\"}, {\"name\": \"acc\", \"goal\": "
                      "\"maximize\"}], found " + found(list));
    return;
  }
  if (list.size() < 2) {
    ck.add("metrics", "expected at least two metrics, found " + std::to_string(list.size()) +
                          "; for one objective write metric: {name: ..., goal: ...}");
    return;
  }
  std::vector<Metric> objectives;
  std::set<std::string> names;
  bool ok = true;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string here = index_path("metrics", i);
    std::optional<Metric> m = parse_metrics_item(ck, list[i], here);
    if (m && !names.insert(m->name).second) {
      ck.add(join(here, "name"), "metric " + found(json(m->name)) + " is listed twice; list each objective once");
      m.reset();
    }
    if (m) objectives.push_back(*m);
    else ok = false;
  }
  const std::string method = method_of(root);
  if (method == "grid" || method == "random" || method == "bayes") {
    ck.warn("metrics", "W&B accepts metrics only with method: custom (its validator refuses this file); swept runs "
                       "method " + method + " on all " + std::to_string(list.size()) + " objectives");
  }
  if (ok) spec.objectives = std::move(objectives);
}

void parse_constraints(Checker& ck, const json& root, SweepSpec& spec) {
  const json& list = root["constraints"];
  if (!list.is_array()) {
    ck.add("constraints", "expected a list like [{\"name\": \"gpu_mem_gb\", \"max\": 16}], found " + found(list));
    return;
  }
  if (!root.contains("metric") && !root.contains("metrics")) {
    ck.add("constraints", "expected a metric or metrics beside constraints (they choose among trials ranked by an "
                          "objective), found neither");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string here = index_path("constraints", i);
    const json& c = list[i];
    if (!c.is_object()) {
      ck.add(here, "expected an object like {\"name\": \"gpu_mem_gb\", \"max\": 16}, found " + found(c));
      continue;
    }
    ck.only_keys(c, here, {"name", "min", "max"});
    Constraint constraint;
    bool ok = true;
    if (!c.contains("name")) {
      ck.add(here, "expected key name (the metric whose final value is bounded), found none");
      ok = false;
    } else if (auto n = ck.string(c["name"], join(here, "name"), true)) {
      constraint.name = *n;
    } else {
      ok = false;
    }
    if (c.contains("min")) ok = (constraint.min = ck.number(c["min"], join(here, "min"))).has_value() && ok;
    if (c.contains("max")) ok = (constraint.max = ck.number(c["max"], join(here, "max"))).has_value() && ok;
    if (!c.contains("min") && !c.contains("max")) {
      ck.add(here, "expected min, max or both (the bounds a feasible trial's final value keeps), found neither");
      ok = false;
    } else if (constraint.min && constraint.max && *constraint.min > *constraint.max) {
      ck.add(join(here, "min"), "expected min <= max, found min " + found(c["min"]) + " > max " + found(c["max"]));
      ok = false;
    }
    if (ok) spec.constraints.push_back(std::move(constraint));
  }
}

// The `scheduler` block and `method: custom`, W&B's rules first.
void parse_scheduler(Checker& ck, const json& root, SweepSpec& spec) {
  const std::string method = method_of(root);
  if (!root.contains("scheduler")) {
    if (method == "custom") {
      ck.add("scheduler", "expected scheduler: {engine: optuna} (or ax) with method custom, found nothing: the engine "
                          "says which searcher chooses the trials");
    }
    return;
  }
  const json& s = root["scheduler"];
  if (!s.is_object()) {
    ck.add("scheduler", "expected an object like {\"engine\": \"optuna\"}, found " + found(s));
    return;
  }
  ck.only_keys(s, "scheduler", {"engine", "source", "optimizer", "search_space"});
  if (root.contains("controller") && root["controller"].is_object() && root["controller"].value("type", json()) == "local")
    ck.add("controller", "controller: {type: local} cannot be used together with scheduler (W&B's rule): remove controller");
  if (s.contains("source")) ck.add("scheduler.source", std::string("a Python file W&B's custom scheduler loads: ") + kInsteadOfPython);
  for (const char* hook : {"optimizer", "search_space"}) {
    if (!s.contains(hook)) continue;
    ck.add(std::string("scheduler.") + hook,
           std::string("a function of scheduler.source") + (s.contains("source") ? "" : " (which W&B requires beside it, and which is missing)") +
               ": " + kInsteadOfPython);
  }
  if (!s.contains("engine")) {
    ck.add("scheduler", "expected key engine (optuna, ax or wandb), found none");
    return;
  }
  const std::optional<std::string> engine = ck.choice(s["engine"], "scheduler.engine", {"optuna", "ax", "wandb"});
  if (!engine) return;
  if (*engine == "wandb") {
    if (method == "custom") {
      ck.add("scheduler.engine", "engine wandb runs W&B's own methods, not method: custom; write method: grid, random "
                                 "or bayes with it, or engine: optuna or ax with method custom");
      return;
    }
    if (method == "tpe" || method == "nsga2") {
      ck.add("method", "engine wandb runs the methods grid, random and bayes (W&B's), found " + method +
                           "; remove scheduler to run " + method);
      return;
    }
  } else if (method != "custom") {
    ck.add("method", "expected method: custom with scheduler.engine " + *engine + " (the engine chooses the trials: " +
                         (*engine == "optuna" ? "optuna runs tpe" : "ax runs bayes") + "), found " +
                         (method.empty() ? std::string("no method") : "method " + method) + "; or remove scheduler");
    return;
  } else {
    ck.warn("scheduler.engine", "W&B's validator does not run engine " + *engine + " yet; swept runs it as method " +
                                    (*engine == "optuna" ? "tpe" : "bayes"));
  }
  spec.engine = *engine;
}

}  // namespace

std::optional<json> custom_method_view(const json& root) {
  if (!root.contains("scheduler") || !root["scheduler"].is_object()) return std::nullopt;
  const json engine = root["scheduler"].value("engine", json());
  if (engine != "optuna" && engine != "ax") return std::nullopt;
  json view = root;
  view["method"] = engine == "optuna" ? "tpe" : "bayes";
  return view;
}

void parse_objectives(Checker& ck, const json& root, SweepSpec& spec) {
  if (root.contains("metrics")) parse_metrics(ck, root, spec);
  if (root.contains("constraints")) parse_constraints(ck, root, spec);
  parse_scheduler(ck, root, spec);
  if (root.contains("early_terminate") && (root.contains("metrics") || root.contains("scheduler"))) {
    ck.add("early_terminate", root.contains("metrics")
                                  ? "expected no early_terminate with several objectives (metrics): no stopping rule "
                                    "compares trials on several metrics; remove early_terminate or optimize one metric"
                                  : "early_terminate cannot be used together with scheduler (W&B's rule: the custom "
                                    "scheduler stops trials itself); remove one of them");
  }
}

}  // namespace swept::sweeps
