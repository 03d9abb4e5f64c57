// The validator: malformed sweep files, each with the exact problems expected
// (every problem, in order), and the typed values of well-formed ones.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "sweeps/search/search.h"
#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace swept::sweeps {
namespace {

using json = nlohmann::json;

struct Malformed {
  const char* what;
  std::string text;
  std::vector<std::string> problems;  // Problem::ToString(), in order
};

// A valid prefix so each case shows only its own problem.
std::string with(const std::string& extra) {
  return R"({"method": "grid", "parameters": {"x": {"values": [1, 2]}})" + extra + "}";
}
std::string param(const std::string& config, const std::string& method = "random") {
  return R"({"method": ")" + method + R"(", "parameters": {"p": )" + config + "}}";
}

const std::vector<Malformed>& malformed_files() {
  static const std::vector<Malformed> cases = {
      {"empty file", "", {"expected a sweep (method: ..., parameters: ...), found an empty file"}},
      {"only whitespace", " \n\t ", {"expected a sweep (method: ..., parameters: ...), found an empty file"}},
      {"invalid JSON with line and column", "{\n  \"method\": \"grid\",\n  \"parameters\": {,}\n}",
       {"expected valid JSON, found a syntax error while parsing object key - unexpected ','; expected string literal "
        "(line 3, column 18)"}},
      {"truncated JSON", R"({"method": "grid")",
       {"expected valid JSON, found a syntax error while parsing object - unexpected end of input; expected '}' "
        "(line 1, column 18)"}},
      {"not UTF-8 (Latin-1 byte)", "{\"name\": \"caf\xe9\"}",
       {"expected UTF-8 text, found the byte 0xE9; save the file as UTF-8 (is it a sweep file?) (line 1, column 14)"}},
      {"UTF-8 surrogate encoded", "{\"name\": \"\xed\xa0\x80\"}",
       {"expected UTF-8 text, found the byte 0xED; save the file as UTF-8 (is it a sweep file?) (line 1, column 11)"}},
      {"a file of many megabytes", std::string(3 << 20, ' '),
       {"expected a sweep file of at most 1048576 bytes (1 MiB), found a larger one; is this really a sweep file?"}},
      {"JSON nested too deep", std::string(100, '[') + std::string(100, ']'),
       {"expected JSON nested at most 64 levels deep, found deeper nesting (line 1, column 65)"}},
      {"top level is an array", "[1, 2]",
       {"expected a JSON object at the top level ({\"method\": ..., \"parameters\": ...}), found an array of 2 items"}},
      {"duplicate key", R"({"method": "grid", "parameters": {"x": {"values": [1]}, "x": {"values": [2]}}})",
       {"parameters.x: expected each key once in an object, found a duplicate (JSON keeps only the last)"}},
      {"W&B Launch key", with(R"(, "job": "x")"),
       {"job: W&B's job key (Launch) is not supported by swept; remove it"}},
      {"method missing", R"({"parameters": {"x": {"values": [1]}}})",
       {"method: expected \"grid\", \"random\", \"bayes\", \"tpe\", \"nsga2\" or \"pbt\", found nothing (the key is required)"}},
      {"method unknown", R"({"method": "hyperopt", "parameters": {"x": {"values": [1]}}})",
       {"method: expected \"grid\", \"random\", \"bayes\", \"tpe\", \"nsga2\", \"custom\" or \"pbt\", found \"hyperopt\""}},
      {"method custom without a scheduler", R"({"method": "custom", "parameters": {"x": {"values": [1]}}})",
       {"scheduler: expected scheduler: {engine: optuna} (or ax) with method custom, found nothing: the engine says "
        "which searcher chooses the trials"}},
      {"method bayes without a metric", R"({"method": "bayes", "parameters": {"x": {"min": 0.0, "max": 1.0}}})",
       {"metric: bayes learns from a metric; add metric: {name: ..., goal: minimize|maximize}"}},
      {"method tpe without a metric", R"({"method": "tpe", "parameters": {"x": {"min": 0.0, "max": 1.0}}})",
       {"metric: tpe learns from a metric; add metric: {name: ..., goal: minimize|maximize}"}},
      {"tpe settings out of range", R"({"method": "tpe", "metric": {"name": "l"}, "tpe": {"n_startup_trials": 0}, "parameters": {"x": {"min": 0.0, "max": 1.0}}})",
       {"tpe.n_startup_trials: expected a whole number in [1, 100000], found 0"}},
      {"bayes settings with method tpe", R"({"method": "tpe", "metric": {"name": "l"}, "bayes": {"xi": 0.1}, "parameters": {"x": {"min": 0.0, "max": 1.0}}})",
       {"bayes: settings for method: bayes, but the method is tpe"}},
      {"bayes with an explicit trials list", R"({"method": "bayes", "metric": {"name": "l"}, "trials": [{"x": 1}]})",
       {"trials: expected trials with method grid or no method (trials are listed, not drawn), found method bayes"}},
      {"parameters missing", R"({"method": "grid"})",
       {"parameters: expected an object of parameters to sweep (or a trials list), found nothing"}},
      {"parameters empty", R"({"method": "grid", "parameters": {}})",
       {"parameters: expected at least one parameter, found an empty object"}},
      {"parameters not an object", R"({"method": "grid", "parameters": [1]})",
       {"parameters: expected an object of parameters ({\"name\": {...}}), found an array of 1 items"}},
      {"bad parameter name", R"({"method": "grid", "parameters": {"-lr": {"values": [1]}}})",
       {"parameters.-lr: expected a parameter name of letters, digits, '_', '.' or '-' that starts with a letter or "
        "'_', found \"-lr\""}},
      {"parameter name with a space", R"({"method": "grid", "parameters": {"l r": {"values": [1]}}})",
       {"parameters.\"l r\": expected a parameter name of letters, digits, '_', '.' or '-' that starts with a letter "
        "or '_', found \"l r\""}},
      {"parameter not an object", param("0.1"),
       {"parameters.p: expected an object describing the parameter (e.g. {\"values\": [1, 2]}), found 0.1"}},
      {"parameter with nothing known", param(R"({"foo": 1})"),
       {"parameters.p: expected a parameter: one of value, values, min and max, distribution, or a nested parameters "
        "block; found an object"}},
      {"unknown distribution", param(R"({"distribution": "gaussian"})"),
       {"parameters.p.distribution: expected a distribution name (beta, categorical, categorical_w_probabilities, "
        "constant, int_uniform, inv_log_uniform_values, log_normal, log_uniform_values, normal, q_beta, q_log_normal, "
        "q_log_uniform_values, q_normal, q_uniform, uniform), found \"gaussian\""}},
      {"unknown key for a distribution", param(R"({"distribution": "normal", "mu": 0, "min": 1})"),
       {"parameters.p.min: unknown key for distribution normal; expected one of: distribution, mu, sigma"}},
      {"value and values together", param(R"({"value": 1, "values": [1, 2]})"),
       {"parameters.p.values: unknown key for distribution constant; expected one of: distribution, value"}},
      {"min >= max", param(R"({"min": 5, "max": 3})"),
       {"parameters.p.max: expected max > min (5), found 3"}},
      {"min == max for uniform", param(R"({"min": 1.5, "max": 1.5})"),
       {"parameters.p.max: expected max > min (1.5), found 1.5"}},
      {"only min", param(R"({"min": 1})"), {"parameters.p: expected both min and max, found only min"}},
      {"min of the wrong type", param(R"({"min": "zero", "max": 1.0})"),
       {"parameters.p.min: expected a number, found \"zero\""}},
      {"infinite bound", param(R"({"min": 0, "max": 1e999})"),
       {"parameters.p.max: expected a finite number, found 1e999, a number beyond the range of a double (about "
        "1.8e308) (line 1, column 60)"}},
      {"int_uniform with float bounds", param(R"({"distribution": "int_uniform", "min": 0.0, "max": 1.0})"),
       {"parameters.p.min: expected an integer (int_uniform), found 0.0",
        "parameters.p.max: expected an integer (int_uniform), found 1.0"}},
      {"negative sigma", param(R"({"distribution": "normal", "sigma": -1})"),
       {"parameters.p.sigma: expected a standard deviation > 0, found -1"}},
      {"q <= 0", param(R"({"distribution": "q_uniform", "min": 0, "max": 1, "q": 0})"),
       {"parameters.p.q: expected a quantum q > 0, found 0"}},
      {"log_uniform_values with min 0", param(R"({"distribution": "log_uniform_values", "min": 0, "max": 1})"),
       {"parameters.p.min: expected a number > 0 (log_uniform_values takes logarithms), found 0"}},
      {"log_normal that overflows", param(R"({"distribution": "log_normal", "mu": 700, "sigma": 10})"),
       {"parameters.p: expected mu + 9 sigma <= 709 so that exp() of a draw stays finite, found 790.000000"}},
      {"beta shape 0", param(R"({"distribution": "beta", "a": 0})"),
       {"parameters.p.a: expected a shape parameter in (0, 1e6], found 0"}},
      {"beta shape too large", param(R"({"distribution": "q_beta", "b": 1e7, "q": 0.1})"),
       {"parameters.p.b: expected a shape parameter in (0, 1e6], found 10000000.0"}},
      {"q-only without distribution", param(R"({"q": 1})"),
       {"parameters.p: expected a \"distribution\" key: mu, sigma, q, a, b and probabilities only mean something with "
        "one (e.g. normal, q_uniform, beta)"}},
      {"empty values", param(R"({"values": []})"),
       {"parameters.p.values: expected a non-empty array of values, found an empty array"}},
      {"values not an array", param(R"({"values": "abc"})"),
       {"parameters.p.values: expected a non-empty array of values, found \"abc\""}},
      {"probabilities of the wrong length", param(R"({"values": [1, 2], "probabilities": [1.0]})"),
       {"parameters.p.probabilities: expected 2 probabilities (one per value), found 1"}},
      {"probabilities that do not sum to 1", param(R"({"values": [1, 2], "probabilities": [0.5, 0.4]})"),
       {"parameters.p.probabilities: expected probabilities that sum to 1, found a sum of 0.9"}},
      {"negative probability", param(R"({"values": [1, 2], "probabilities": [1.5, -0.5]})"),
       {"parameters.p.probabilities[1]: expected a probability >= 0, found -0.5"}},
      {"grid over a continuous distribution", param(R"({"distribution": "normal"})", "grid"),
       {"parameters.p: expected a distribution that can be enumerated (constant, categorical, int_uniform, q_uniform) "
        "for method grid, found normal (continuous); use method random or list values"}},
      {"grid with probabilities", param(R"({"values": [1, 2], "probabilities": [0.5, 0.5]})", "grid"),
       {"parameters.p.probabilities: expected no probabilities in a grid (every value is tried once), found them; "
        "remove probabilities or use method random"}},
      {"grid too large", R"({"method": "grid", "parameters": {"a": {"min": 0, "max": 999}, "b": {"min": 0, "max": 999},
          "c": {"min": 1, "max": 2}}})",
       {"parameters: expected at most 1000000 trials in the grid, found a product of 2e+06; use fewer values or method "
        "random with run_cap"}},
      {"grid astronomically large", R"({"method": "grid", "parameters": {"a": {"min": -4000000000000000000,
          "max": 4000000000000000000}, "b": {"min": -4000000000000000000, "max": 4000000000000000000}}})",
       {"parameters: expected at most 1000000 trials in the grid, found a product of 6.4e+37; use fewer values or "
        "method random with run_cap"}},
      {"nesting deeper than the limit",
       R"({"method": "grid", "parameters": {"a": {"parameters": {"a": {"parameters": {"a": {"parameters": {"a": {"parameters":
          {"a": {"parameters": {"a": {"parameters": {"a": {"parameters": {"a": {"parameters": {"a": {"value": 1}}}}}}}}}}}}}}}}}}})",
       {"parameters.a.parameters.a.parameters.a.parameters.a.parameters.a.parameters.a.parameters.a.parameters.a."
        "parameters: expected at most 8 levels of nested parameters blocks, found more; flatten the deepest ones"}},
      {"extra key beside nested parameters", param(R"({"parameters": {"a": {"value": 1}}, "values": [1]})"),
       {"parameters.p.values: unknown key beside a nested parameters block; a nested parameter holds only "
        "\"parameters\""}},
      {"run_cap zero", with(R"(, "run_cap": 0)"), {"run_cap: expected a positive integer, found 0"}},
      {"run_cap float", with(R"(, "run_cap": 5.0)"), {"run_cap: expected a positive integer, found 5.0"}},
      {"metric without name", with(R"(, "metric": {"goal": "maximize"})"),
       {"metric: expected key name (the metric to optimize), found none"}},
      {"metric not an object", with(R"(, "metric": "loss")"),
       {"metric: expected an object like {\"name\": \"val_loss\", \"goal\": \"minimize\"}, found \"loss\""}},
      {"early_terminate as a string", with(R"(, "metric": {"name": "l"}, "early_terminate": "hyperband")"),
       {"early_terminate: expected an object like {\"type\": \"hyperband\", \"min_iter\": 3}, found \"hyperband\""}},
      {"hyperband without brackets", with(R"(, "metric": {"name": "l"}, "early_terminate": {"type": "hyperband", "max_iter": 27})"),
       {"early_terminate: expected min_iter, or both max_iter and s (hyperband needs its brackets), found neither"}},
      {"hyperband eta 1", with(R"(, "metric": {"name": "l"}, "early_terminate": {"type": "hyperband", "min_iter": 3, "eta": 1})"),
       {"early_terminate.eta: expected a number > 1, found 1"}},
      {"asha reduction_factor 1", with(R"(, "metric": {"name": "l"}, "early_terminate": {"type": "asha", "reduction_factor": 1})"),
       {"early_terminate.reduction_factor: expected a whole number >= 2, found 1 (a factor below 2 never halves anything)"}},
      {"median unknown key", with(R"(, "metric": {"name": "l"}, "early_terminate": {"type": "median", "min_iter": 3})"),
       {"early_terminate.min_iter: unknown key; expected one of type, n_startup_trials, n_warmup_steps, interval_steps, n_min_trials"}},
      {"asha without metric", with(R"(, "early_terminate": {"type": "asha"})"),
       {"metric: expected a metric (early_terminate compares runs on it), found none"}},
      {"early_terminate without metric", with(R"(, "early_terminate": {"type": "hyperband", "min_iter": 3})"),
       {"metric: expected a metric (early_terminate compares runs on it), found none"}},
      {"command not a list", with(R"(, "command": "python train.py")"),
       {"command: expected a non-empty array of strings (the argv, with macros), found \"python train.py\""}},
      {"${program} without program", with(R"(, "command": ["${program}"])"),
       {"command[0]: ${program} needs the sweep's program key, which is not set"}},
      {"malformed envvar", with(R"(, "command": ["--out=${envvar:OUT DIR}"])"),
       {"command[0]: expected ${envvar:NAME} with NAME of letters, digits and '_', found \"--out=${envvar:OUT DIR}\""}},
      {"program empty", with(R"(, "program": "")"), {"program: expected a non-empty string, found \"\""}},
      {"resources with both gpus and a fraction", with(R"(, "resources": {"gpus": 1, "gpu_memory_fraction": 0.5})"),
       {"resources: expected either gpus (whole GPUs) or gpu_memory_fraction (a share of one GPU), found both"}},
      {"gpu_memory_fraction above 1", with(R"(, "resources": {"gpu_memory_fraction": 1.5})"),
       {"resources.gpu_memory_fraction: expected a share of one GPU in (0, 1], found 1.5"}},
      {"negative gpus", with(R"(, "resources": {"gpus": -1})"),
       {"resources.gpus: expected a whole number of GPUs from 0 to 1024, found -1"}},
      {"unknown resource", with(R"(, "resources": {"disk": 4})"),
       {"resources.disk: unknown key; expected one of: gpus, gpu_memory_fraction, cpus, nodes, procs_per_node, "
        "memory, pids, ps, ps_nodes"}},
      {"memory without a unit it knows", with(R"(, "resources": {"memory": "8 GiGs"})"),
       {"resources.memory: expected a size from 1MiB to 1PiB: a number with a unit (\"8GiB\", \"512MB\"; units B, "
        "kB, MB, GB, TB, KiB, MiB, GiB, TiB) or a plain integer of bytes, found \"8 GiGs\""}},
      {"memory below 1 MiB", with(R"(, "resources": {"memory": 4096})"),
       {"resources.memory: expected a size from 1MiB to 1PiB: a number with a unit (\"8GiB\", \"512MB\"; units B, "
        "kB, MB, GB, TB, KiB, MiB, GiB, TiB) or a plain integer of bytes, found 4096"}},
      {"pids below 16", with(R"(, "resources": {"pids": 2})"),
       {"resources.pids: expected a whole number of processes and threads per trial from 16 to 4194304, found 2"}},
      {"nodes above the limit", with(R"(, "resources": {"nodes": 1025})"),
       {"resources.nodes: expected a whole number of nodes (agents the trial spans) from 1 to 1024, found 1025"}},
      {"zero nodes", with(R"(, "resources": {"nodes": 0})"),
       {"resources.nodes: expected a whole number of nodes (agents the trial spans) from 1 to 1024, found 0"}},
      {"procs_per_node above the limit", with(R"(, "resources": {"procs_per_node": 65})"),
       {"resources.procs_per_node: expected a whole number of processes per node from 1 to 64, found 65"}},
      {"procs_per_node with a gpu share", with(R"(, "resources": {"procs_per_node": 2, "gpu_memory_fraction": 0.5})"),
       {"resources.procs_per_node: several processes per node cannot share one gpu_memory_fraction; use gpus: N "
        "(whole GPUs, one per process) or procs_per_node: 1"}},
      {"ps above the limit", with(R"(, "resources": {"nodes": 2, "ps": 65})"),
       {"resources.ps: expected a whole number of parameter servers from 0 to 64, found 65"}},
      {"ps_nodes not a boolean", with(R"(, "resources": {"nodes": 2, "ps": 1, "ps_nodes": "yes"})"),
       {"resources.ps_nodes: expected true (each parameter server on an extra node) or false (on the trial's "
        "nodes), found \"yes\""}},
      {"ps_nodes without servers", with(R"(, "resources": {"nodes": 2, "ps_nodes": true})"),
       {"resources.ps_nodes: ps_nodes: true places parameter servers, but resources.ps is 0; set resources.ps: K "
        "(1 to 64) or drop ps_nodes"}},
      {"ps_nodes beyond the agents a trial may span", with(R"(, "resources": {"nodes": 1000, "ps": 40, "ps_nodes": true})"),
       {"resources.ps_nodes: nodes + ps is 1040 agents, above the 1024 a trial may span; lower resources.ps or "
        "resources.nodes, or drop ps_nodes"}},
      {"seed negative", with(R"(, "seed": -1)"), {"seed: expected an integer from 0 to 18446744073709551615, found -1"}},
      {"max_parallel zero", with(R"(, "max_parallel": 0)"),
       {"max_parallel: expected a positive integer (omit it for no limit), found 0"}},
      {"timeout_s negative", with(R"(, "timeout_s": -5)"),
       {"timeout_s: expected a number of seconds > 0 (omit it for no limit), found -5"}},
      {"max_retries as a string", with(R"(, "max_retries": "three")"),
       {"max_retries: expected an integer from 0 to 1000, found \"three\""}},
      {"order unknown", with(R"(, "order": "shuffled")"),
       {"order: expected \"sequential\" or \"random\", found \"shuffled\""}},
      {"order with method random", R"({"method": "random", "order": "random", "parameters": {"x": {"values": [1]}}})",
       {"order: expected order only with method grid or explicit trials (random search has no order to shuffle; see "
        "without_replacement), found it with method random"}},
      {"without_replacement over a continuous space",
       R"({"method": "random", "without_replacement": true, "parameters": {"x": {"min": 0.0, "max": 1.0}}})",
       {"parameters.x: expected a distribution that can be enumerated (constant, categorical, int_uniform, q_uniform) "
        "for sampling without replacement, found uniform (continuous); use method random or list values"}},
      {"trials not a list", R"({"trials": {"lr": 0.1}})",
       {"trials: expected a non-empty array of trials ([{\"lr\": 0.1}, {\"lr\": 0.01}]), found an object"}},
      {"trial not an object", R"({"trials": [{"lr": 0.1}, 0.01]})",
       {"trials[1]: expected an object of parameter values, found 0.01"}},
      {"trials with a distribution beside", R"({"trials": [{"lr": 0.1}], "parameters": {"bs": {"values": [1, 2]}}})",
       {"parameters.bs: expected only constants ({\"value\": ...}) beside a trials list, found distribution categorical"}},
      {"trial repeating a constant", R"({"trials": [{"lr": 0.1, "bs": 2}], "parameters": {"bs": {"value": 4}}})",
       {"trials[0].bs: expected each name set once, found it both in this trial and as a constant in parameters (bs)"}},
      {"several problems at once", R"({"method": "grid", "run_cap": -2, "parameters": {"a": {"min": 3, "max": 1},
          "b": {"values": []}}, "colour": "red"})",
       {"run_cap: expected a positive integer, found -2", "parameters.a.max: expected max > min (3), found 1",
        "parameters.b.values: expected a non-empty array of values, found an empty array"}},
  };
  return cases;
}

TEST_CASE("sweeps.parse: at least 40 malformed files each with exactly the problems expected") {
  const auto& cases = malformed_files();
  CHECK(cases.size() >= 40);
  for (const Malformed& c : cases) {
    const ParseOutcome outcome = parse_sweep(c.text);
    CHECK_FALSE(outcome.spec.has_value());
    std::vector<std::string> got;
    std::string shown;
    for (const auto& p : outcome.problems) got.push_back(p.ToString()), shown += "\n  " + p.ToString();
    CHECK_MESSAGE(got == c.problems, "case: " << std::string(c.what) << "; got:" << shown);
  }
}

// What W&B accepts with a warning: the spec is made, each warning says what
// was read and how to silence it (`swept validate --strict` refuses them).
struct Lenient {
  const char* what;
  std::string text;
  std::vector<std::string> warnings;  // Problem::ToString(), in order
};

// The same field in both formats, on line 4: {"value": LIT} or {"values": [1, LIT]}.
std::string json_with(const std::string& literal, bool list) {
  return "{\"method\": \"grid\",\n \"parameters\": {\n  \"x\": {\n   " +
         (list ? "\"values\": [1, " + literal + "]" : "\"value\": " + literal) + "}}}";
}
std::string yaml_with(const std::string& literal, bool list) {
  return "method: grid\nparameters:\n  x:\n    " + (list ? "values: [1, " + literal + "]" : "value: " + literal) + "\n";
}

TEST_CASE("sweeps.parse: numbers beyond a double or a 64-bit integer are refused alike in JSON and YAML, naming the field") {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"1e400", "expected a finite number, found 1e400, a number beyond the range of a double"},
      {"-2.5e999", "expected a finite number, found -2.5e999, a number beyond the range of a double"},
      {"99999999999999999999", "expected an integer from -9223372036854775808 to 18446744073709551615, found "
                               "99999999999999999999, an integer too large for 64 bits"},
      {"18446744073709551616", "found 18446744073709551616, an integer too large for 64 bits"},
      {"-9223372036854775809", "found -9223372036854775809, an integer too small for 64 bits"},
  };
  for (const auto& [literal, says] : refused) {
    for (const bool list : {false, true}) {
      INFO(literal << std::string(list ? " in a list" : " as a value"));
      const ParseOutcome from_json = parse_sweep(json_with(literal, list), Format::kJson);
      const ParseOutcome from_yaml = parse_sweep(yaml_with(literal, list), Format::kYaml);
      CHECK_FALSE(from_json.spec.has_value());
      CHECK_FALSE(from_yaml.spec.has_value());
      CHECK(from_json.problems.size() == 1);
      CHECK(from_yaml.problems.size() == 1);
      if (from_json.problems.size() != 1 || from_yaml.problems.size() != 1) continue;
      const std::string path = list ? "parameters.x.values[1]" : "parameters.x.value";
      CHECK(from_json.problems[0].path == path);
      CHECK(from_yaml.problems[0].path == path);
      CHECK_MESSAGE(from_yaml.problems[0].message.find(says) != std::string::npos, from_yaml.problems[0].message);
      CHECK(from_json.problems[0].message == from_yaml.problems[0].message);  // both formats say the same
      CHECK(from_yaml.problems[0].line == 4);
    }
  }
  // YAML's other integer spellings have the same limit.
  const ParseOutcome hex = parse_sweep(yaml_with("0x1_0000_0000_0000_0000", false), Format::kYaml);
  CHECK(hex.problems.size() == 1);
  if (!hex.problems.empty()) CHECK(hex.problems[0].message.find("found 0x1_0000_0000_0000_0000, an integer too large") != std::string::npos);
  // At the limits, and below a double's smallest: read, and read alike.
  for (const std::string literal : {"18446744073709551615", "-9223372036854775808", "1e308", "1e-400", "-1e-400"}) {
    INFO(literal);
    const ParseOutcome from_json = parse_sweep(json_with(literal, false), Format::kJson);
    const ParseOutcome from_yaml = parse_sweep(yaml_with(literal, false), Format::kYaml);
    CHECK(from_json.spec);
    CHECK(from_yaml.spec);
    if (!from_json.spec || !from_yaml.spec) continue;
    const json a = trial_at(*from_json.spec, 0).params["x"], b = trial_at(*from_yaml.spec, 0).params["x"];
    CHECK(a.is_number());
    CHECK(a.dump() == b.dump());
  }
}

TEST_CASE("sweeps.parse: W&B's leniency - warnings and a spec, never a silent change") {
  const std::vector<Lenient> cases = {
      {"unknown top-level key with a suggestion", with(R"(, "paramters": {})"),
       {"paramters: unknown top-level key, ignored as W&B ignores it; did you mean 'parameters'?"}},
      {"unknown top-level key without a near one", with(R"(, "colour": "red")"),
       {"colour: unknown top-level key, ignored as W&B ignores it"}},
      {"deprecated log_uniform", param(R"({"distribution": "log_uniform", "min": 0, "max": 1})"),
       {"parameters.p.distribution: W&B's deprecated log_uniform (min and max are natural-log exponents): read as "
        "log_uniform_values with min 1.0 and max 2.718281828459045; write that instead"}},
      {"metric goal misspelt", with(R"(, "metric": {"name": "loss", "goal": "minimise"})"),
       {"metric.goal: expected \"minimize\" or \"maximize\", found \"minimise\"; minimizing, as W&B does"}},
      {"command element not a string", with(R"(, "command": ["run", 3, true, 0.5])"),
       {"command[1]: expected a string, found 3; converted to \"3\" as W&B's agent does",
        "command[2]: expected a string, found true; converted to \"True\" as W&B's agent does",
        "command[3]: expected a string, found 0.5; converted to \"0.5\" as W&B's agent does"}},
      {"unknown macro", with(R"(, "command": ["run", "${argz}"])"),
       {"command[1]: unknown macro \"${argz}\", dropped from the command as W&B's agent drops it; known: ${env}, "
        "${interpreter}, ${program}, ${args}, ${args_no_equals}, ${args_no_hyphens}, ${args_no_boolean_flags}, "
        "${args_json}, ${args_json_file}, ${args_append_hydra}, ${args_override_hydra}, ${envvar:NAME}"}},
      {"integer in a string", with(R"(, "max_retries": "3")"),
       {"max_retries: expected a number, found the string \"3\"; read as 3 (W&B's server reads it so; write it "
        "without quotes)"}},
      {"parameter name outside W&B's rule", R"({"method": "grid", "parameters": {"model/lr": {"values": [1]},
          "1st": {"value": 2}}})",
       {"parameters.1st: a parameter name outside W&B's rule (letters, digits, '_', '.', '-', starting with a letter "
        "or '_'); W&B's agent passes it on as written, and so does swept",
        "parameters.\"model/lr\": a parameter name outside W&B's rule (letters, digits, '_', '.', '-', starting with "
        "a letter or '_'); W&B's agent passes it on as written, and so does swept"}},
      {"number in a string", param(R"({"min": "1e-5", "max": 0.1})"),
       {"parameters.p.min: expected a number, found the string \"1e-5\"; read as 1e-05 (W&B's server reads it so; "
        "write it without quotes)"}},
  };
  for (const Lenient& c : cases) {
    INFO("case: " << std::string(c.what));
    const ParseOutcome outcome = parse_sweep(c.text);
    std::vector<std::string> got;
    std::string shown;
    for (const auto& p : outcome.problems) shown += "\n  problem: " + p.ToString();
    for (const auto& p : outcome.warnings) got.push_back(p.ToString()), shown += "\n  " + p.ToString();
    CHECK_MESSAGE(outcome.spec.has_value(), shown);
    CHECK_MESSAGE(got == c.warnings, "got:" << shown);
  }
}

TEST_CASE("sweeps.parse: what the lenient readings mean for the trials") {
  // log_uniform's bounds are exponents: every draw lies in [e^-9, e^-2].
  ParseOutcome deprecated = parse_sweep(param(R"({"distribution": "log_uniform", "min": -9, "max": -2})"));
  REQUIRE(deprecated.spec);
  for (int64_t i = 0; i < 200; ++i) {
    const double v = trial_at(*deprecated.spec, i).params["p"].get<double>();
    CHECK(v >= std::exp(-9.0));
    CHECK(v <= std::exp(-2.0));
  }
  // inv_log_uniform(a, b) draws exp(-U(a, b)): in [e^-b, e^-a].
  ParseOutcome inverse = parse_sweep(param(R"({"distribution": "inv_log_uniform", "min": 1, "max": 3})"));
  REQUIRE(inverse.spec);
  for (int64_t i = 0; i < 200; ++i) {
    const double v = trial_at(*inverse.spec, i).params["p"].get<double>();
    CHECK(v >= std::exp(-3.0) * (1 - 1e-12));
    CHECK(v <= std::exp(-1.0) * (1 + 1e-12));
  }
  // q_log_uniform: rounded to q, floats.
  ParseOutcome quantized = parse_sweep(param(R"({"distribution": "q_log_uniform", "min": 0, "max": 5, "q": 2})"));
  REQUIRE(quantized.spec);
  const json q = trial_at(*quantized.spec, 3).params["p"];
  CHECK(q.is_number_float());
  CHECK(std::fmod(q.get<double>(), 2.0) == 0.0);
  // An invalid goal minimises; unknown macros are dropped; items converted.
  ParseOutcome lenient = parse_sweep(with(R"(, "metric": {"name": "loss", "goal": "up"}, "command": ["run", 7, "${nope}", "${args}"])"));
  REQUIRE(lenient.spec);
  CHECK(lenient.spec->metric->goal == Goal::kMinimize);
  auto argv = build_command(*lenient.spec, json{{"x", 1}}, CommandContext{});
  REQUIRE(argv.ok());
  CHECK(*argv == std::vector<std::string>{"run", "7", "--x=1"});
  // A quoted integer is read as an integer: int_uniform is inferred.
  ParseOutcome quoted = parse_sweep(param(R"({"min": "1", "max": 4})"));
  REQUIRE(quoted.spec);
  CHECK(trial_at(*quoted.spec, 0).params["p"].is_number_float());  // "1" is not a JSON integer: uniform, as W&B
  // A values list of numbers with a quoted number in it is a numeric parameter.
  ParseOutcome mixed = parse_sweep(R"({"method": "grid", "parameters": {"lr": {"values": [0.1, "1e-3"]}}})");
  REQUIRE(mixed.spec);
  CHECK(trial_at(*mixed.spec, 1).params["lr"] == json(0.001));
  // ... but a list of strings stays strings.
  ParseOutcome strings = parse_sweep(R"({"method": "grid", "parameters": {"v": {"values": ["1e-3", "2"]}}})");
  REQUIRE(strings.spec);
  CHECK(strings.warnings.empty());
  CHECK(trial_at(*strings.spec, 0).params["v"] == json("1e-3"));
}

TEST_CASE("sweeps.parse: problems are capped with a final line saying how many more") {
  std::string text = R"({"method": "grid", "parameters": {)";
  for (int i = 0; i < 150; ++i) {
    if (i) text += ",";
    text += "\"p";
    text += std::to_string(1000 + i);
    text += "\": {\"values\": []}";
  }
  text += "}}";
  const ParseOutcome outcome = parse_sweep(text);
  REQUIRE(outcome.problems.size() == kMaxProblems + 1);
  CHECK(outcome.problems.back().ToString() == "... and 50 more problems; fix these first");
}

TEST_CASE("sweeps.parse: method bayes and tpe carry their searcher's settings, others carry none") {
  auto bayes = parse_sweep(R"({"method": "bayes", "metric": {"name": "l", "goal": "maximize"},
      "bayes": {"n_startup_trials": 4}, "parameters": {"x": {"min": 0.0, "max": 1.0}}})");
  REQUIRE(bayes.spec);
  CHECK(bayes.spec->method == Method::kBayes);
  CHECK(is_adaptive(bayes.spec->method));
  REQUIRE(bayes.spec->search);
  CHECK(bayes.spec->search->method == search::SearchMethod::kBayes);
  CHECK(bayes.spec->search->goal == Goal::kMaximize);
  CHECK(bayes.spec->search->bayes.n_startup_trials == 4);
  CHECK(!bayes.spec->search->impute);
  // W&B's word form: "worst" is what the searchers do anyway; others are said.
  auto worst = parse_sweep(R"({"method": "tpe", "metric": {"name": "l", "impute": "worst"}, "parameters": {"x": {"min": 0.0, "max": 1.0}}})");
  REQUIRE(worst.spec);
  CHECK(worst.warnings.empty());
  CHECK(!worst.spec->search->impute);
  auto latest = parse_sweep(R"({"method": "tpe", "metric": {"name": "l", "impute": "latest"}, "parameters": {"x": {"min": 0.0, "max": 1.0}}})");
  REQUIRE(latest.spec);
  REQUIRE(latest.warnings.size() == 1);
  CHECK(latest.warnings[0].path == "metric.impute");
  // swept's number form, the value of a failed trial: bayes and tpe only.
  auto valued = parse_sweep(R"({"method": "bayes", "metric": {"name": "l", "impute": 10.0}, "parameters": {"x": {"min": 0.0, "max": 1.0}}})");
  REQUIRE(valued.spec);
  CHECK(valued.spec->search->impute == 10.0);
  CHECK(!parse_sweep(R"({"method": "random", "metric": {"name": "l", "impute": 10.0}, "parameters": {"x": {"min": 0.0, "max": 1.0}}})").spec);
  CHECK(!trial_count(*bayes.spec));  // unbounded without run_cap
  auto tpe = parse_sweep("method: tpe\nrun_cap: 5\nmetric: {name: l}\nparameters: {x: {values: [a, b]}}\n");
  REQUIRE(tpe.spec);
  CHECK(tpe.spec->method == Method::kTpe);
  REQUIRE(tpe.spec->search);
  CHECK(tpe.spec->search->tpe.n_startup_trials == 10);
  CHECK(trial_count(*tpe.spec) == 5);
  auto grid = parse_sweep(R"({"method": "grid", "parameters": {"x": {"values": [1]}}})");
  REQUIRE(grid.spec);
  CHECK(!grid.spec->search);
}

// The rule a file's early_terminate becomes, with metric {name: loss, goal: `goal`}.
stopping::Rule rule_of(const std::string& early_terminate, const std::string& goal = "minimize") {
  const ParseOutcome outcome = parse_sweep(R"({"method": "grid", "metric": {"name": "loss", "goal": ")" + goal + R"("},
      "parameters": {"a": {"value": 1}}, "early_terminate": )" + early_terminate + "}");
  REQUIRE(outcome.problems.empty());
  REQUIRE(outcome.spec->early_terminate.has_value());
  return *outcome.spec->early_terminate;
}

TEST_CASE("sweeps.parse: early_terminate asha and median become their typed rules as written") {
  const stopping::Rule asha = rule_of(R"({"type": "asha", "min_resource": 2, "reduction_factor": 3})", "maximize");
  CHECK(asha.type == stopping::RuleType::kAsha);
  CHECK(asha.goal == Goal::kMaximize);  // the metric's goal
  const auto& a = std::get<stopping::AshaSettings>(asha.settings);
  CHECK(a.min_resource == 2);
  CHECK(a.reduction_factor == 3);
  CHECK(a.min_early_stopping_rate == 0);
  CHECK(a.bootstrap_count == 0);

  const stopping::Rule automatic = rule_of(R"({"type": "asha", "min_resource": "auto"})");
  CHECK(automatic.goal == Goal::kMinimize);
  CHECK_FALSE(std::get<stopping::AshaSettings>(automatic.settings).min_resource.has_value());

  const stopping::Rule median = rule_of(R"({"type": "median", "n_startup_trials": 3, "n_warmup_steps": 5, "interval_steps": 2})");
  CHECK(median.type == stopping::RuleType::kMedian);
  const auto& m = std::get<stopping::PercentileSettings>(median.settings);
  CHECK(m.percentile == 50);
  CHECK(m.n_startup_trials == 3);
  CHECK(m.n_warmup_steps == 5);
  CHECK(m.interval_steps == 2);
  CHECK(m.n_min_trials == 1);
}

TEST_CASE("sweeps.parse: hyperband settings the rule cannot use are a warning, found at validation") {
  // W&B accepts these (max_iter wins over min_iter; empty bands stop nothing);
  // swept's rule refuses them, and says so before the sweep runs.
  struct Case {
    const char* et;
    const char* path;
  };
  for (const Case& c : {Case{R"({"type": "hyperband", "min_iter": 3, "max_iter": 2, "s": 1})", "early_terminate.max_iter"},
                        Case{R"({"type": "hyperband", "max_iter": 27, "s": 0})", "early_terminate.s"},
                        Case{R"({"type": "hyperband", "max_iter": 2, "s": 1})", "early_terminate.max_iter"},
                        Case{R"({"type": "hyperband", "min_iter": 3, "max_iter": 27})", "early_terminate.s"}}) {
    CAPTURE(std::string(c.et));
    const ParseOutcome outcome = parse_sweep(std::string(R"({"method": "grid", "metric": {"name": "loss"},
        "parameters": {"a": {"value": 1}}, "early_terminate": )") + c.et + "}");
    REQUIRE(outcome.problems.empty());
    REQUIRE(outcome.warnings.size() == 1);
    CHECK(outcome.warnings[0].path == c.path);
    CHECK(outcome.warnings[0].message.find("swept cannot apply this rule") != std::string::npos);
    CHECK_FALSE(outcome.spec->early_terminate.has_value());
  }
}

TEST_CASE("sweeps.parse: hyperband numbers written as strings are read as numbers") {
  const ParseOutcome outcome = parse_sweep(R"({"method": "grid", "metric": {"name": "loss"},
      "parameters": {"a": {"value": 1}},
      "early_terminate": {"type": "hyperband", "max_iter": "27", "s": "2", "eta": "3"}})");
  REQUIRE(outcome.problems.empty());
  CHECK(outcome.warnings.size() == 3);  // one per quoted number, none about the rule
  REQUIRE(outcome.spec->early_terminate.has_value());
  const auto& h = std::get<stopping::HyperbandSettings>(outcome.spec->early_terminate->settings);
  CHECK(h.max_iter == 27.0);
  CHECK(h.s == 2);
  CHECK(h.eta == 3.0);
  CHECK_FALSE(h.min_iter.has_value());
}

TEST_CASE("sweeps.parse: a full file becomes typed values defaults filled") {
  const ParseOutcome outcome = parse_sweep(R"({
    "name": "mnist", "description": "lr sweep", "method": "random", "run_cap": 20, "seed": 18446744073709551615,
    "metric": {"name": "val_loss", "goal": "maximize", "target": 0.1},
    "program": "train.py", "command": ["${env}", "${interpreter}", "${program}", "${args}"],
    "early_terminate": {"type": "hyperband", "min_iter": 3},
    "resources": {"gpus": 2, "cpus": 4, "nodes": 3, "procs_per_node": 2}, "max_parallel": 3, "max_retries": 1, "timeout_s": 90.5,
    "entity": "me", "project": "p", "controller": {"type": "local"}, "kind": "sweep", "apiVersion": "v1",
    "parameters": {"lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1}}})");
  REQUIRE(outcome.problems.empty());
  const SweepSpec& s = *outcome.spec;
  CHECK(s.name == "mnist");
  CHECK(s.description == "lr sweep");
  CHECK(s.method == Method::kRandom);
  CHECK(s.run_cap == 20);
  CHECK(s.seed == 18446744073709551615ULL);
  REQUIRE(s.metric.has_value());
  CHECK(s.metric->name == "val_loss");
  CHECK(s.metric->goal == Goal::kMaximize);
  CHECK(s.program == "train.py");
  CHECK(s.command.size() == 4);
  REQUIRE(s.early_terminate.has_value());
  CHECK(s.early_terminate->type == stopping::RuleType::kHyperband);
  CHECK(s.early_terminate->goal == Goal::kMaximize);
  const auto& hyperband = std::get<stopping::HyperbandSettings>(s.early_terminate->settings);
  CHECK(hyperband.min_iter == 3.0);
  CHECK_FALSE(hyperband.max_iter.has_value());
  CHECK(hyperband.eta == 3.0);
  CHECK(hyperband.strict);
  CHECK(s.resources.gpus == 2);
  CHECK(s.resources.nodes == 3);
  CHECK(s.resources.procs_per_node == 2);
  CHECK(s.resources.cpus == 4);
  CHECK(s.resources.gpu_memory_fraction == 0.0);
  CHECK(s.max_parallel == 3);
  CHECK(s.max_retries == 1);
  CHECK(s.timeout_s == 90.5);
  CHECK(s.space != nullptr);
  CHECK(describe(s) == "random, 1 parameter, 20 trials, each on 3 nodes x 2 processes");
}

TEST_CASE("sweeps.parse: resources.ps and ps_nodes, defaults none") {
  auto parse = [](const std::string& resources) {
    ParseOutcome o = parse_sweep(R"({"method": "grid", "parameters": {"lr": {"value": 0.1}}, "resources": )" +
                                 resources + "}");
    REQUIRE(o.problems.empty());
    return *o.spec;
  };
  SweepSpec none = parse(R"({"nodes": 2})");
  CHECK(none.resources.ps == 0);
  CHECK_FALSE(none.resources.ps_nodes);
  SweepSpec shared = parse(R"({"nodes": 2, "ps": 3})");
  CHECK(shared.resources.ps == 3);
  CHECK_FALSE(shared.resources.ps_nodes);
  CHECK(describe(shared) == "grid, 1 parameter, 1 trial, each on 2 nodes x 1 process + 3 parameter servers");
  SweepSpec own = parse(R"({"nodes": 2, "ps": 1, "ps_nodes": true})");
  CHECK(own.resources.ps == 1);
  CHECK(own.resources.ps_nodes);
  CHECK(describe(own) == "grid, 1 parameter, 1 trial, each on 2 nodes x 1 process + 1 parameter server on nodes "
                         "of their own");
}

TEST_CASE("sweeps.parse: resources.memory in bytes with units, resources.pids") {
  auto memory = [](const std::string& yaml_value) {
    const ParseOutcome o =
        parse_sweep("method: grid\nparameters: {x: {values: [1]}}\nresources:\n  memory: " + yaml_value + "\n  pids: 64\n");
    REQUIRE_MESSAGE(o.spec.has_value(), yaml_value);
    CHECK(o.spec->resources.pids == 64);
    return o.spec->resources.memory_bytes;
  };
  CHECK(memory("8GiB") == int64_t{8} << 30);
  CHECK(memory("512MB") == 512000000);
  CHECK(memory("1.5 GiB") == int64_t{3} << 29);
  CHECK(memory("2TB") == int64_t{2000000000000});
  CHECK(memory("1048576") == 1048576);
  CHECK(memory("1e9") == 1000000000);
}

TEST_CASE("sweeps.parse: defaults when keys are absent - inference keeps 1 and 1.0 apart") {
  const ParseOutcome a = parse_sweep(R"({"method": "grid", "parameters": {"x": {"values": [1]}}})");
  REQUIRE(a.spec.has_value());
  CHECK(a.spec->name.empty());
  CHECK_FALSE(a.spec->metric.has_value());
  CHECK_FALSE(a.spec->run_cap.has_value());
  CHECK_FALSE(a.spec->early_terminate.has_value());
  CHECK(a.spec->resources.gpus == 0);
  CHECK(a.spec->resources.cpus == 1);
  CHECK(a.spec->resources.memory_bytes == 0);
  CHECK(a.spec->resources.pids == 4096);
  CHECK(a.spec->max_parallel == 0);
  CHECK(a.spec->seed == 0);
  // {"min": 1, "max": 10} is int_uniform (a grid of 10), {"min": 1.0, ...} uniform (no grid).
  CHECK(parse_sweep(R"({"method": "grid", "parameters": {"x": {"min": 1, "max": 10}}})").spec.has_value());
  const ParseOutcome f = parse_sweep(R"({"method": "grid", "parameters": {"x": {"min": 1.0, "max": 10}}})");
  REQUIRE(f.problems.size() == 1);
  CHECK(f.problems[0].ToString().find("found uniform (continuous)") != std::string::npos);
}

TEST_CASE("sweeps.parse: never throws on hostile input") {
  const std::string inputs[] = {"null", "1", "\"s\"", "{\"method\": null, \"parameters\": null}", "{\"parameters\": {\"a\": null}}",
                                "{\"trials\": []}", "{\"trials\": [{}]}", std::string("{\"a\":\0}", 7), "\xef\xbb\xbf{}",
                                "{\"method\": \"grid\", \"parameters\": {\"a\": {\"values\": [1e400]}}}"};
  for (const auto& text : inputs) {
    INFO(text);
    const ParseOutcome o = parse_sweep(text);
    CHECK_FALSE(o.spec.has_value());
    CHECK_FALSE(o.problems.empty());
  }
}

}  // namespace
}  // namespace swept::sweeps
