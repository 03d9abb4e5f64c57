// parse_sweep: sweep file text -> SweepSpec, or every problem found.
//
// A reader (read_json.cpp or read_yaml.cpp, chosen by Format) turns the text
// into a JSON-shaped tree behind its gates (size, UTF-8, nesting, syntax,
// duplicate keys, YAML aliases); then one set of checks below runs on that
// tree, whichever reader made it, in named steps, one per group of keys of
// docs/sweep-format.md. Every problem is recorded with its path and the
// checks go on, so the user sees all of them at once; what W&B accepts with
// a warning is a warning here (the spec is still made). Last, each problem
// and reading gets the line and column of its path when the reader knows it.
// Nothing here throws past parse_sweep.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "sweeps/checks.h"
#include "sweeps/document.h"
#include "sweeps/numeric.h"
#include "sweeps/objectives.h"
#include "sweeps/parameters.h"
#include "sweeps/pbt.h"
#include "sweeps/search/search.h"
#include "sweeps/space.h"
#include "sweeps/warm_start.h"
#include "sweeps/stopping/stopping.h"
#include "sweeps/sweep.h"

namespace swept::sweeps {

using json = nlohmann::json;

std::string Problem::ToString() const {
  std::string s = path.empty() ? message : path + ": " + message;
  if (line > 0) s += " (line " + std::to_string(line) + ", column " + std::to_string(column) + ")";
  return s;
}

namespace {

const std::vector<std::string> kTopLevelKeys = {
    "method", "metric", "parameters", "run_cap", "name", "description", "program", "command",
    "early_terminate", "resources", "max_parallel", "seed", "max_retries", "timeout_s", "order",
    "without_replacement", "trials", "bayes", "tpe", "pbt", "apiVersion", "kind", "controller", "entity", "project",
    "metrics", "constraints", "scheduler", "nsga2", "warm_start"};

// Checks the macros of one command element against what the sweep provides.
void check_command_element(Checker& ck, const std::string& element, const std::string& path, bool has_program) {
  static const std::set<std::string> kMacros = {"env", "interpreter", "program", "args", "args_no_equals",
                                                "args_no_hyphens", "args_no_boolean_flags", "args_json",
                                                "args_json_file", "args_append_hydra", "args_override_hydra"};
  if (element.size() > 3 && element.rfind("${", 0) == 0 && element.back() == '}' &&
      element.find("${", 2) == std::string::npos && element.rfind("${envvar:", 0) != 0) {
    const std::string name = element.substr(2, element.size() - 3);
    if (!kMacros.count(name)) {
      // W&B's agent replaces an unknown macro by nothing, without a word.
      ck.warn(path, "unknown macro " + found(json(element)) + ", dropped from the command as W&B's agent drops it; "
                    "known: ${env}, ${interpreter}, ${program}, ${args}, ${args_no_equals}, ${args_no_hyphens}, "
                    "${args_no_boolean_flags}, ${args_json}, ${args_json_file}, ${args_append_hydra}, "
                    "${args_override_hydra}, ${envvar:NAME}");
    } else if (name == "program" && !has_program) {
      ck.add(path, "${program} needs the sweep's program key, which is not set");
    }
  }
  size_t at = 0;
  while ((at = element.find("${envvar:", at)) != std::string::npos) {
    const size_t close = element.find('}', at);
    const std::string name = close == std::string::npos ? "" : element.substr(at + 9, close - at - 9);
    bool valid = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
    for (unsigned char c : name) valid = valid && (std::isalnum(c) || c == '_');
    if (!valid) {
      ck.add(path, "expected ${envvar:NAME} with NAME of letters, digits and '_', found " + found(json(element)));
      break;
    }
    at = close + 1;
  }
}

void parse_metric(Checker& ck, const json& m, SweepSpec& spec) {
  if (!m.is_object()) {
    ck.add("metric", "expected an object like {\"name\": \"val_loss\", \"goal\": \"minimize\"}, found " + found(m));
    return;
  }
  ck.only_keys(m, "metric", {"name", "goal", "target", "impute", "impute_while_running"});
  Metric metric;
  bool ok = true;
  if (!m.contains("name")) {
    ck.add("metric", "expected key name (the metric to optimize), found none");
    ok = false;
  } else if (auto n = ck.string(m["name"], "metric.name", true)) {
    metric.name = *n;
  } else {
    ok = false;
  }
  if (m.contains("goal")) {
    const json& g = m["goal"];
    if (g == "maximize") {
      metric.goal = Goal::kMaximize;
    } else if (g != "minimize") {
      // W&B warns and minimises; so does swept (--strict refuses it).
      ck.warn("metric.goal", "expected \"minimize\" or \"maximize\", found " + found(g) + "; minimizing, as W&B does");
    }
  }
  if (m.contains("target")) {
    metric.target = ck.number(m["target"], "metric.target");
    ok = metric.target.has_value() && ok;
  }
  // swept: with bayes/tpe, a number is the value of a failed trial (read, and
  // checked finite, by search::parse_search_settings).
  const bool impute_value = is_adaptive(spec.method) && m.contains("impute") && m["impute"].is_number();
  if (m.contains("impute") && !impute_value)
    ok = ck.choice(m["impute"], "metric.impute", {"latest", "best", "worst"}).has_value() && ok;
  if (m.contains("impute_while_running")) {
    ok = ck.choice(m["impute_while_running"], "metric.impute_while_running", {"latest", "best", "worst", "false"})
             .has_value() && ok;
  }
  if (ok) {
    spec.metric = metric;
    spec.objectives = {metric};
  }
}

// Splits stopping::parse_rule's refusal "path: message" into its two parts.
std::pair<std::string, std::string> split_refusal(const std::string& msg) {
  const size_t colon = msg.find(": ");
  if (colon == std::string::npos) return {"early_terminate", msg};
  return {msg.substr(0, colon), msg.substr(colon + 2)};
}

void parse_early_terminate(Checker& ck, const json& e, SweepSpec& spec) {
  const std::string p = "early_terminate";
  if (!e.is_object()) {
    ck.add(p, "expected an object like {\"type\": \"hyperband\", \"min_iter\": 3}, found " + found(e));
    return;
  }
  // The rule compares on the metric's goal (parse_metric ran first). The
  // metric is checked on its own: without a valid one the file is refused
  // anyway, so any goal will do then.
  const Metric metric = spec.metric.value_or(Metric{"metric", Goal::kMinimize, std::nullopt});
  // swept's own rules (asha, median): their keys and checks are
  // stopping/rule_parse.cpp's, the one place that reads them.
  if (e.contains("type") && (e["type"] == "asha" || e["type"] == "median")) {
    auto rule = stopping::parse_rule(e, metric);
    if (rule.ok()) {
      spec.early_terminate = std::move(rule).value();
      return;
    }
    const auto [path, message] = split_refusal(rule.status().message());
    ck.add(path, message);
    return;
  }
  ck.only_keys(e, p, {"type", "min_iter", "max_iter", "s", "eta", "strict"});
  json normalized = json::object();
  bool ok = true;
  if (!e.contains("type")) {
    ck.add(p, "expected key type (\"hyperband\"), found none");
    ok = false;
  } else if (ck.choice(e["type"], p + ".type", {"hyperband", "asha", "median"})) {
    normalized["type"] = "hyperband";
  } else {
    ok = false;
  }
  const int64_t big = int64_t{1} << 40;
  if (e.contains("min_iter")) {
    if (auto v = ck.integer(e["min_iter"], p + ".min_iter", 1, big, "an integer >= 1")) normalized["min_iter"] = *v;
    else ok = false;
  }
  if (e.contains("max_iter")) {
    if (auto v = ck.integer(e["max_iter"], p + ".max_iter", 1, big, "an integer >= 1")) normalized["max_iter"] = *v;
    else ok = false;
  }
  if (e.contains("s")) {
    auto v = ck.number(e["s"], p + ".s");
    if (v && (*v < 0 || *v != std::floor(*v) || *v > 64)) {
      ck.add(p + ".s", "expected a whole number of brackets between 0 and 64, found " + found(e["s"]));
      ok = false;
    } else if (v) {
      normalized["s"] = e["s"].is_number() ? e["s"] : json(*v);  // "3" as the number 3: stopping/ reads numbers
    } else {
      ok = false;
    }
  }
  normalized["eta"] = 3;
  if (e.contains("eta")) {
    auto v = ck.number(e["eta"], p + ".eta");
    if (v && *v <= 1) {
      ck.add(p + ".eta", "expected a number > 1, found " + found(e["eta"]));
      ok = false;
    } else if (v) {
      normalized["eta"] = e["eta"].is_number() ? e["eta"] : json(*v);
    } else {
      ok = false;
    }
  }
  normalized["strict"] = true;
  if (e.contains("strict")) {
    if (e["strict"].is_boolean()) normalized["strict"] = e["strict"];
    else ck.add(p + ".strict", "expected true or false, found " + found(e["strict"])), ok = false;
  }
  if (!e.contains("min_iter") && !(e.contains("max_iter") && e.contains("s"))) {
    ck.add(p, "expected min_iter, or both max_iter and s (hyperband needs its brackets), found neither");
    ok = false;
  }
  if (!ok) return;
  // W&B accepts bands that come out empty (max_iter / eta below 1, s 0) and
  // max_iter beside min_iter (max_iter wins); swept's rule refuses them. Said
  // here, as a warning since W&B goes on, rather than only in the scheduler's
  // log once the sweep runs: its trials run to the end either way.
  auto rule = stopping::parse_rule(normalized, metric);
  if (!rule.ok()) {
    const auto [path, message] = split_refusal(rule.status().message());
    ck.warn(path, message + "; swept cannot apply this rule, so the sweep's trials would run to the end");
    return;
  }
  spec.early_terminate = std::move(rule).value();
}

void parse_resources(Checker& ck, const json& r, SweepSpec& spec) {
  if (!r.is_object()) {
    ck.add("resources", "expected an object like {\"gpus\": 1, \"cpus\": 2}, found " + found(r));
    return;
  }
  ck.only_keys(r, "resources", {"gpus", "gpu_memory_fraction", "cpus", "nodes", "procs_per_node", "memory", "pids", "ps",
                            "ps_nodes"});
  if (r.contains("gpus")) {
    if (auto v = ck.integer(r["gpus"], "resources.gpus", 0, 1024, "a whole number of GPUs from 0 to 1024")) {
      spec.resources.gpus = static_cast<int>(*v);
    }
  }
  if (r.contains("gpu_memory_fraction")) {
    auto v = ck.number(r["gpu_memory_fraction"], "resources.gpu_memory_fraction");
    if (v && (*v <= 0 || *v > 1)) {
      ck.add("resources.gpu_memory_fraction", "expected a share of one GPU in (0, 1], found " + found(r["gpu_memory_fraction"]));
    } else if (v) {
      spec.resources.gpu_memory_fraction = *v;
    }
  }
  if (r.contains("cpus")) {
    if (auto v = ck.integer(r["cpus"], "resources.cpus", 1, 4096, "a whole number of CPUs from 1 to 4096")) {
      spec.resources.cpus = static_cast<int>(*v);
    }
  }
  if (r.contains("nodes")) {
    if (auto v = ck.integer(r["nodes"], "resources.nodes", 1, 1024,
                            "a whole number of nodes (agents the trial spans) from 1 to 1024")) {
      spec.resources.nodes = static_cast<int>(*v);
    }
  }
  if (r.contains("procs_per_node")) {
    if (auto v = ck.integer(r["procs_per_node"], "resources.procs_per_node", 1, 64,
                            "a whole number of processes per node from 1 to 64")) {
      spec.resources.procs_per_node = static_cast<int>(*v);
    }
  }
  parse_parameter_servers(ck, r, spec);
  if (r.contains("memory")) {
    if (auto v = parse_memory_bytes(r["memory"])) {
      spec.resources.memory_bytes = *v;
    } else {
      ck.add("resources.memory", "expected a size from 1MiB to 1PiB: a number with a unit (\"8GiB\", \"512MB\"; "
                                 "units B, kB, MB, GB, TB, KiB, MiB, GiB, TiB) or a plain integer of bytes, found " +
                                     found(r["memory"]));
    }
  }
  if (r.contains("pids")) {
    if (auto v = ck.integer(r["pids"], "resources.pids", 16, 4194304,
                            "a whole number of processes and threads per trial from 16 to 4194304")) {
      spec.resources.pids = *v;
    }
  }
  if (spec.resources.gpus > 0 && spec.resources.gpu_memory_fraction > 0) {
    ck.add("resources", "expected either gpus (whole GPUs) or gpu_memory_fraction (a share of one GPU), found both");
  }
  // Several processes would share one GPU's memory share with no say in how:
  // each would believe the whole share is its own.
  if (spec.resources.procs_per_node > 1 && spec.resources.gpu_memory_fraction > 0) {
    ck.add("resources.procs_per_node", "several processes per node cannot share one gpu_memory_fraction; use "
                                       "gpus: N (whole GPUs, one per process) or procs_per_node: 1");
  }
}

// Explicit trials: each an object of parameter values; constants from
// `parameters` are merged in. Returns the merged params.
std::vector<json> parse_trials(Checker& ck, const json& t, const std::vector<Leaf>& constants) {
  std::vector<json> trials;
  if (!t.is_array() || t.empty()) {
    ck.add("trials", "expected a non-empty array of trials ([{\"lr\": 0.1}, {\"lr\": 0.01}]), found " + found(t));
    return trials;
  }
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string here = index_path("trials", i);
    const json& trial = t[i];
    if (!trial.is_object()) {
      ck.add(here, "expected an object of parameter values, found " + found(trial));
      continue;
    }
    json params = json::object();
    bool ok = true;
    for (auto it = trial.begin(); it != trial.end(); ++it) {
      if (!check_parameter_name(ck, it.key(), join(here, it.key()))) {
        ok = false;
        continue;
      }
      params[it.key()] = it.value();
    }
    for (const Leaf& c : constants) {
      json* slot = &params;
      bool clash = false;
      for (size_t k = 0; k + 1 < c.names.size(); ++k) {
        json& next = (*slot)[c.names[k]];
        if (next.is_null()) next = json::object();
        if (!next.is_object()) {
          clash = true;
          break;
        }
        slot = &next;
      }
      if (clash || slot->contains(c.names.back())) {
        ck.add(join(here, c.names[0]), "expected each name set once, found it both in this trial and as a constant in "
                                       "parameters (" + c.dotted + ")");
        ok = false;
        continue;
      }
      (*slot)[c.names.back()] = c.value;
    }
    if (ok && params.empty()) ck.add(here, "expected at least one parameter value, found an empty object"), ok = false;
    if (ok) trials.push_back(std::move(params));
  }
  return trials;
}


// ---- parse_sweep's steps ------------------------------------------------------

// Unknown top-level keys: W&B warns and goes on, so swept warns (naming the
// nearest known key). The keys of features swept lacks are errors.
void check_top_level_keys(Checker& ck, const json& root) {
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& key = it.key();
    if (key == "job" || key == "image_uri") {
      ck.add(path_name(key), "W&B's " + key + " key (Launch) is not supported by swept; remove it");
    } else if (std::find(kTopLevelKeys.begin(), kTopLevelKeys.end(), key) == kTopLevelKeys.end()) {
      const std::string nearest = nearest_key(key, kTopLevelKeys);
      ck.warn(path_name(key), "unknown top-level key, ignored as W&B ignores it" +
                                  (nearest.empty() ? std::string() : "; did you mean '" + nearest + "'?"));
    }
  }
}

std::string method_word(Method m) {
  switch (m) {
    case Method::kGrid: return "grid";
    case Method::kRandom: return "random";
    case Method::kBayes: return "bayes";
    case Method::kTpe: return "tpe";
    case Method::kNsga2: return "nsga2";
    case Method::kPbt: return "pbt";
  }
  return "grid";
}

// Returns whether the method is one swept runs.
bool parse_method(Checker& ck, const json& root, SweepSpec& spec) {
  if (!root.contains("method")) {
    if (root.contains("trials")) {
      spec.method = Method::kGrid;
      return true;
    }
    ck.add("method", "expected \"grid\", \"random\", \"bayes\", \"tpe\", \"nsga2\" or \"pbt\", found nothing (the key is required)");
    return false;
  }
  const json& m = root["method"];
  if (m.is_string() && m.get<std::string>() == "custom") {
    // Read as the method its scheduler.engine runs; without one,
    // parse_objectives says what is missing.
    const std::optional<json> view = custom_method_view(root);
    return view && parse_method(ck, *view, spec);
  }
  if (m == "pbt") {  // swept's own method (pbt.h), beside W&B's; its block is read by parse_pbt
    spec.method = Method::kPbt;
    return true;
  }
  auto v = ck.choice(m, "method", {"grid", "random", "bayes", "tpe", "nsga2", "custom", "pbt"});
  if (!v) return false;
  if (*v == "bayes" || *v == "tpe" || *v == "nsga2") {
    // The searcher's own reader: metric (required), impute and the bayes/tpe blocks, each problem named.
    // W&B's metric.impute is a word ("latest", "best", "worst", checked by
    // parse_metric); the searcher reads a number (the value of a failed
    // trial). A word is left to parse_metric: failed trials then count as the
    // worst value seen, which is what "worst" means; the others are said.
    json search_view = root;
    if (search_view.contains("metric") && search_view["metric"].is_object() &&
        search_view["metric"].contains("impute") && search_view["metric"]["impute"].is_string()) {
      if (search_view["metric"]["impute"] != "worst")
        ck.warn("metric.impute", *v + " counts failed trials as the worst value seen; impute " +
                                     search_view["metric"]["impute"].dump() + " is not used");
      search_view["metric"].erase("impute");
    }
    auto settings = search::parse_search_settings(search_view);
    if (!settings.ok()) {
      const std::string& msg = settings.status().message();
      const size_t colon = msg.find(": ");
      if (colon != std::string::npos && msg.find(' ') > colon) ck.add(msg.substr(0, colon), msg.substr(colon + 2));
      else ck.add("method", msg);
      return false;
    }
    spec.search = std::make_shared<const search::SearchSettings>(std::move(*settings));
    spec.method = *v == "bayes" ? Method::kBayes : *v == "tpe" ? Method::kTpe : Method::kNsga2;
    return true;
  }
  spec.method = *v == "random" ? Method::kRandom : Method::kGrid;
  return true;
}

// name, description and the W&B bookkeeping keys swept reads but does not use.
void parse_descriptive_keys(Checker& ck, const json& root, SweepSpec& spec) {
  if (root.contains("name")) {
    if (auto v = ck.string(root["name"], "name", false)) spec.name = *v;
  }
  if (root.contains("description")) {
    if (auto v = ck.string(root["description"], "description", false)) spec.description = *v;
  }
  for (const char* key : {"apiVersion", "entity", "project"}) {
    if (root.contains(key)) ck.string(root[key], key, false);
  }
  if (root.contains("kind")) ck.choice(root["kind"], "kind", {"sweep"});
  if (root.contains("controller")) {
    const json& c = root["controller"];
    if (!c.is_object()) {
      ck.add("controller", "expected an object like {\"type\": \"local\"}, found " + found(c));
    } else {
      ck.only_keys(c, "controller", {"type"});
      if (!c.contains("type")) ck.add("controller", "expected key type (\"local\" or \"cloud\"), found none");
      else ck.choice(c["type"], "controller.type", {"local", "cloud"});
    }
  }
}

// program and command. W&B's agent runs str() on each command item, so a
// number or a boolean there is converted (with a warning).
void parse_program_and_command(Checker& ck, const json& root, SweepSpec& spec) {
  if (root.contains("program")) {
    if (auto v = ck.string(root["program"], "program", true)) spec.program = *v;
  }
  if (!root.contains("command")) return;  // the default command needs nothing more
  const json& c = root["command"];
  if (!c.is_array() || c.empty()) {
    ck.add("command", "expected a non-empty array of strings (the argv, with macros), found " + found(c));
    return;
  }
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string here = index_path("command", i);
    std::string item;
    if (c[i].is_string()) {
      item = c[i].get<std::string>();
    } else if (c[i].is_primitive()) {
      item = python_text(c[i]);
      ck.warn(here, "expected a string, found " + found(c[i]) + "; converted to \"" + item + "\" as W&B's agent does");
      ck.note(here, found(c[i]), json(item).dump(), "a command item that is not a string is its Python str()");
    } else {
      ck.add(here, "expected a string (an argv word, with macros), found " + found(c[i]));
      continue;
    }
    check_command_element(ck, item, here, root.contains("program"));
    spec.command.push_back(item);
  }
}

// run_cap, max_parallel, seed, max_retries, timeout_s, resources, early_terminate.
void parse_run_limits(Checker& ck, const json& root, SweepSpec& spec) {
  if (root.contains("run_cap")) {
    if (auto v = ck.integer(root["run_cap"], "run_cap", 1, std::numeric_limits<int64_t>::max(), "a positive integer")) {
      spec.run_cap = *v;
    }
  }
  if (root.contains("early_terminate")) {
    parse_early_terminate(ck, root["early_terminate"], spec);
    if (!root.contains("metric") && !root.contains("metrics"))
      ck.add("metric", "expected a metric (early_terminate compares runs on it), found none");
  }
  if (root.contains("resources")) parse_resources(ck, root["resources"], spec);
  if (root.contains("max_parallel")) {
    if (auto v = ck.integer(root["max_parallel"], "max_parallel", 1, 1000000, "a positive integer (omit it for no limit)")) {
      spec.max_parallel = static_cast<int>(*v);
    }
  }
  if (root.contains("seed")) {
    const json s = ck.numeric(root["seed"], "seed").value_or(root["seed"]);
    if (s.is_number_unsigned() || (s.is_number_integer() && s.get<int64_t>() >= 0)) {
      spec.seed = s.get<uint64_t>();
    } else {
      ck.add("seed", "expected an integer from 0 to 18446744073709551615, found " + found(root["seed"]));
    }
  }
  if (root.contains("max_retries")) {
    if (auto v = ck.integer(root["max_retries"], "max_retries", 0, 1000, "an integer from 0 to 1000")) {
      spec.max_retries = static_cast<int>(*v);
    }
  }
  if (root.contains("timeout_s")) {
    auto v = ck.number(root["timeout_s"], "timeout_s");
    if (v && *v <= 0) ck.add("timeout_s", "expected a number of seconds > 0 (omit it for no limit), found " + found(root["timeout_s"]));
    else if (v) spec.timeout_s = *v;
  }
}

// order and without_replacement: how a grid (or a sampled grid) is walked.
void parse_walk_order(Checker& ck, const json& root, const SweepSpec& spec, bool method_ok, ParameterSpace& space) {
  if (root.contains("order")) {
    if (auto v = ck.choice(root["order"], "order", {"sequential", "random"})) {
      space.random_order = *v == "random";
      if (method_ok && spec.method != Method::kGrid) {
        ck.add("order", "expected order only with method grid or explicit trials (random search has no order to "
                        "shuffle; see without_replacement), found it with method " + method_word(spec.method));
      }
    }
  }
  if (root.contains("without_replacement")) {
    const json& w = root["without_replacement"];
    if (!w.is_boolean()) {
      ck.add("without_replacement", "expected true or false, found " + found(w));
    } else {
      space.without_replacement = w.get<bool>();
      if (space.without_replacement && method_ok && spec.method != Method::kRandom) {
        ck.add("without_replacement", "expected it only with method random (a grid never repeats), found it with method " +
                                          method_word(spec.method));
      }
    }
  }
}

// A grid (or sampling without replacement) enumerates the space: every leaf
// must be enumerable and the product within kMaxGridTrials.
void check_enumerable(Checker& ck, const SweepSpec& spec, ParameterSpace& space) {
  bool all_gridable = true;
  const bool grid = spec.method == Method::kGrid;
  for (const Leaf& leaf : space.leaves) {
    const std::string here = join("parameters", leaf.dotted);
    if (leaf.distribution == Distribution::kCategoricalWithProbabilities) {
      ck.add(here + ".probabilities", std::string("expected no probabilities in ") +
                                          (grid ? "a grid (every value is tried once)" : "sampling without replacement") +
                                          ", found them; remove probabilities or use method random");
      all_gridable = false;
    } else if (!is_gridable(leaf.distribution)) {
      ck.add(here, std::string("expected a distribution that can be enumerated (constant, categorical, int_uniform, "
                               "q_uniform) for ") +
                       (grid ? "method grid" : "sampling without replacement") + ", found " +
                       distribution_name(leaf.distribution) + " (continuous); use method random or list values");
      all_gridable = false;
    }
  }
  if (!all_gridable) return;
  if (auto radix = grid_radix_checked(ck, space.leaves, grid ? "grid" : "space sampled without replacement")) {
    space.radix = *radix;
    space.grid_size = 1;
    for (int64_t r : *radix) space.grid_size *= r;
  }
}

// parameters, or an explicit trials list (with constants beside it).
void parse_space(Checker& ck, const json& root, const SweepSpec& spec, bool method_ok, ParameterSpace& space) {
  const bool has_trials = root.contains("trials");
  const size_t before = ck.count();
  if (root.contains("parameters")) {
    parse_block(ck, root["parameters"], "parameters", {}, 1, space.leaves);
  } else if (!has_trials) {
    ck.add("parameters", "expected an object of parameters to sweep (or a trials list), found nothing");
  }
  const bool parameters_ok = ck.count() == before;
  if (has_trials) {
    if (method_ok && spec.method != Method::kGrid) {
      ck.add("trials", "expected trials with method grid or no method (trials are listed, not drawn), found method " +
                           method_word(spec.method));
    }
    for (const Leaf& leaf : space.leaves) {
      if (leaf.distribution != Distribution::kConstant) {
        ck.add(join("parameters", leaf.dotted), "expected only constants ({\"value\": ...}) beside a trials list, found "
                                                "distribution " + std::string(distribution_name(leaf.distribution)));
      }
    }
    space.explicit_trials = parse_trials(ck, root["trials"], space.leaves);
    space.explicit_list = true;
  } else if (parameters_ok && method_ok && (spec.method == Method::kGrid || space.without_replacement)) {
    check_enumerable(ck, spec, space);
  }
}

// The position of `path` or of its nearest ancestor the reader recorded
// (not the whole file's, for a key that is missing: line 1 would mislead).
Position position_of(const std::map<std::string, Position>& positions, std::string path) {
  const bool whole_file = path.empty();
  while (true) {
    if (auto it = positions.find(path); it != positions.end()) return it->second;
    if (path.empty()) return {};
    const size_t cut = path.find_last_of(".[");
    if (cut == std::string::npos && !whole_file) return {};
    path = cut == std::string::npos ? "" : path.substr(0, cut);
  }
}

void locate(std::vector<Problem>& problems, const std::map<std::string, Position>& positions) {
  if (positions.empty()) return;
  for (Problem& p : problems) {
    if (p.line > 0) continue;
    const Position at = position_of(positions, p.path);
    p.line = at.line, p.column = at.column;
  }
}

ParseOutcome check_document(Document doc, Format format) {
  ParseOutcome outcome;
  outcome.format = format;
  Checker ck;
  const json& root = doc.root;
  if (doc.problems.empty() && !root.is_object()) {
    ck.add("", std::string(format == Format::kYaml ? "expected a YAML mapping at the top level (method: ..., parameters: ...)"
                                                   : "expected a JSON object at the top level ({\"method\": ..., \"parameters\": ...})") +
                   ", found " + (root.is_string() ? "the text " : "") + found(root));
  }
  for (Problem& p : doc.problems) ck.problems.push_back(std::move(p));
  for (Problem& w : doc.warnings) ck.warnings.push_back(std::move(w));
  SweepSpec spec;
  auto space = std::make_shared<ParameterSpace>();
  if (ck.problems.empty()) {
    check_top_level_keys(ck, root);
    const bool method_ok = parse_method(ck, root, spec);
    parse_descriptive_keys(ck, root, spec);
    if (root.contains("metric")) parse_metric(ck, root["metric"], spec);
    parse_objectives(ck, root, spec);
    parse_program_and_command(ck, root, spec);
    parse_run_limits(ck, root, spec);
    parse_walk_order(ck, root, spec, method_ok, *space);
    parse_space(ck, root, spec, method_ok, *space);
    if (root.contains("warm_start")) parse_warm_start(ck, root, spec);  // warm_start.h
    pbt::parse_pbt(ck, root, spec, *space);
  }
  outcome.problems = std::move(ck.problems);
  if (ck.dropped > 0) outcome.problems.push_back({"", "... and " + std::to_string(ck.dropped) + " more problems; fix these first"});
  outcome.warnings = std::move(ck.warnings);
  outcome.readings = std::move(doc.readings);
  for (Reading& r : ck.readings) outcome.readings.push_back(std::move(r));
  locate(outcome.problems, doc.positions);
  locate(outcome.warnings, doc.positions);
  for (Reading& r : outcome.readings) {
    if (r.line > 0) continue;
    const Position at = position_of(doc.positions, r.path);
    r.line = at.line, r.column = at.column;
  }
  // Readings and warnings in file order (problems stay in check order).
  std::stable_sort(outcome.readings.begin(), outcome.readings.end(), [](const Reading& a, const Reading& b) {
    return std::make_pair(a.line, a.column) < std::make_pair(b.line, b.column);
  });
  std::stable_sort(outcome.warnings.begin(), outcome.warnings.end(), [](const Problem& a, const Problem& b) {
    return std::make_pair(a.line, a.column) < std::make_pair(b.line, b.column);
  });
  if (outcome.problems.empty()) {
    spec.space = std::move(space);
    outcome.spec = std::move(spec);
  }
  return outcome;
}

}  // namespace

Format detect_format(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) return Format::kJson;
  return Format::kYaml;
}

ParseOutcome parse_sweep(std::string_view text, Format format) {
  if (format == Format::kAuto) {
    format = detect_format(text);
    if (format == Format::kJson) {
      // JSON-looking text that is not JSON may still be YAML's flow style
      // ({method: grid, ...}) when it reads as a valid sweep that way.
      // Only a valid sweep counts, so broken JSON is reported as JSON.
      Document json_doc = read_json(text);
      if (json_doc.syntax_error) {
        ParseOutcome as_yaml = check_document(read_yaml(text), Format::kYaml);
        if (as_yaml.spec) return as_yaml;
      }
      return check_document(std::move(json_doc), Format::kJson);
    }
  }
  return check_document(format == Format::kJson ? read_json(text) : read_yaml(text), format);
}

ParseOutcome parse_sweep(std::string_view text) { return parse_sweep(text, Format::kAuto); }

}  // namespace swept::sweeps
