// `swept validate`, `swept expand` and `swept run`, run as the real binary
// (built beside this test) on the examples (JSON and their YAML twins) and on
// bad files: exit codes, output lines, warnings, --strict, --explain, help.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/exit_codes.h"

namespace {

using json = nlohmann::json;

struct Run {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// CTest runs test cases in parallel, each in its own process: each gets its
// own scratch folder so that captured outputs and temp files never collide.
std::string scratch_dir() {
  return SWEPT_BINARY_DIR "/cli-test/" + std::to_string(::getpid());
}

// Runs `swept ARGS` with stdout and stderr captured apart.
Run swept(const std::string& args) {
  const std::string dir = scratch_dir();
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const std::string cmd = quote(SWEPT_BINARY_DIR "/bin/swept") + " " + args + " >" + quote(out) + " 2>" + quote(err);
  const int status = std::system(cmd.c_str());
  Run r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string dir = scratch_dir();
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

const std::string kExamples = SWEPT_SOURCE_DIR "/examples/";

TEST_CASE("cli: validate summarises a good file and exits 0") {
  const Run r = swept("validate " + quote(kExamples + "grid-basic.json"));
  CHECK(r.exit_code == swept::kExitOk);
  CHECK(r.out == kExamples + "grid-basic.json: ok: grid, 6 parameters, 12 trials\n");
  CHECK(r.err.empty());
}

TEST_CASE("cli: validate lists every problem one line each and exits 2") {
  const std::string path = write_temp("bad.json", R"({"method": "grid", "run_cap": 0, "parameters": {"lr": {"min": 1, "max": 0}}})");
  const Run r = swept("validate " + quote(path));
  CHECK(r.exit_code == swept::kExitUsage);
  CHECK(r.out.empty());
  CHECK(lines(r.err) == std::vector<std::string>{path + ": run_cap: expected a positive integer, found 0",
                                                 path + ": parameters.lr.max: expected max > min (1), found 0"});
}

TEST_CASE("cli: a missing file a directory and a huge file are refused with exit 2") {
  const Run missing = swept("validate /nonexistent/sweep.json");
  CHECK(missing.exit_code == swept::kExitUsage);
  CHECK(missing.err.find("cannot open the file") != std::string::npos);
  const Run directory = swept("validate " + quote(SWEPT_BINARY_DIR));
  CHECK(directory.exit_code == swept::kExitUsage);
  const std::string huge = write_temp("huge.json", "{\"name\": \"" + std::string(5 << 20, 'x') + "\"}");
  const Run big = swept("expand " + quote(huge));
  CHECK(big.exit_code == swept::kExitUsage);
  CHECK(big.err == huge + ": expected a sweep file of at most 1048576 bytes (1 MiB), found a larger one; is this really "
                          "a sweep file?\n");
  CHECK(big.out.empty());
}

TEST_CASE("cli: expand prints one JSON object per trial with index params and command") {
  const Run r = swept("expand " + quote(kExamples + "nested-grid-random-order.json"));
  REQUIRE(r.exit_code == swept::kExitOk);
  const auto ls = lines(r.out);
  REQUIRE(ls.size() == 16);
  std::set<std::string> distinct;
  for (size_t i = 0; i < ls.size(); ++i) {
    const json line = json::parse(ls[i]);
    CHECK(line.size() == 3);
    CHECK(line["index"] == i);
    CHECK(line["params"]["optim"]["name"] == "sgd");  // nesting kept
    CHECK(line["command"][0] == "/usr/bin/env");
    CHECK(json::parse(line["command"][3].get<std::string>()) == line["params"]);  // ${args_json}
    distinct.insert(line["params"].dump());
  }
  CHECK(distinct.size() == 16);
}

TEST_CASE("cli: expand --limit and --seed") {
  const std::string file = quote(kExamples + "random-search.json");
  const Run a = swept("expand " + file + " --limit 3");
  const Run b = swept("expand " + file + " --limit 3 --seed 2026");
  const Run c = swept("expand " + file + " --limit=3 --seed=99");
  REQUIRE(a.exit_code == 0);
  CHECK(lines(a.out).size() == 3);
  CHECK(a.out == b.out);  // the file's seed is 2026
  CHECK(a.out != c.out);
  const Run zero = swept("expand " + file + " --limit 0");
  CHECK(zero.exit_code == 0);
  CHECK(zero.out.empty());
  const Run bad = swept("expand " + file + " --limit -1");
  CHECK(bad.exit_code == swept::kExitUsage);
  const Run junk = swept("expand " + file + " --limit lots");
  CHECK(junk.exit_code == swept::kExitUsage);
  CHECK(junk.err.find("swept expand:") == 0);
}

TEST_CASE("cli: an unbounded random search shows 10 trials and says so") {
  const std::string path = write_temp("unbounded.json", R"({"method": "random", "parameters": {"x": {"min": 0.0, "max": 1.0}}})");
  const Run r = swept("expand " + quote(path));
  CHECK(r.exit_code == 0);
  CHECK(lines(r.out).size() == 10);
  CHECK(r.err.find("unbounded random search") != std::string::npos);
}

TEST_CASE("cli: an unset envvar macros fails expand with no partial output") {
  const std::string path = write_temp("envvar.json", R"({"method": "grid", "parameters": {"x": {"values": [1, 2]}},
      "command": ["run", "${envvar:SWEPT_TEST_SURELY_UNSET_VARIABLE}"]})");
  const Run r = swept("expand " + quote(path));
  CHECK(r.exit_code == swept::kExitUsage);
  CHECK(r.out.empty());
  CHECK(r.err.find("SWEPT_TEST_SURELY_UNSET_VARIABLE") != std::string::npos);
  const Run set = swept("expand " + quote(path) + " --limit 1");  // still unset: same
  CHECK(set.exit_code == swept::kExitUsage);
  const std::string cmd_env = "env SWEPT_TEST_SURELY_UNSET_VARIABLE=v " + quote(SWEPT_BINARY_DIR "/bin/swept") + " expand " +
                              quote(path) + " >" + quote(scratch_dir() + "/env.out") + " 2>&1";
  CHECK(std::system(cmd_env.c_str()) == 0);
  CHECK(lines(slurp(scratch_dir() + "/env.out"))[0] ==
        R"({"index":0,"params":{"x":1},"command":["run","v"]})");
}

TEST_CASE("cli: --help on each command and usage errors exit 2") {
  for (const char* command : {"validate", "expand"}) {
    INFO(command);
    const Run help = swept(std::string(command) + " --help");
    CHECK(help.exit_code == 0);
    CHECK(help.out.find(std::string("usage: swept ") + command) == 0);
    const Run none = swept(command);
    CHECK(none.exit_code == swept::kExitUsage);
    CHECK(none.err.find("expected a sweep FILE") != std::string::npos);
    const Run unknown = swept(std::string(command) + " --frobnicate x.json");
    CHECK(unknown.exit_code == swept::kExitUsage);
  }
}

// Every command that takes a sweep file reads YAML as well as JSON
// (cli/sweep_file.h); their help must not say JSON only.
TEST_CASE("cli: the help of the commands that take a sweep file says YAML or JSON") {
  for (const char* command : {"run", "submit"}) {
    INFO(command);
    const Run help = swept(std::string(command) + " --help");
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("the sweep file (YAML or JSON)") != std::string::npos);
  }
}

TEST_CASE("cli: expand on bayes/tpe prints the random startup trials only and says the rest depend on results") {
  const std::string path = write_temp("tpe.json", R"({"method": "tpe", "metric": {"name": "loss"}, "seed": 3,
      "tpe": {"n_startup_trials": 4}, "parameters": {"x": {"min": 0.0, "max": 1.0}}})");
  const Run r = swept("expand " + quote(path) + " --limit 100");
  CHECK(r.exit_code == 0);
  const auto ls = lines(r.out);
  CHECK(ls.size() == 4);
  CHECK(r.err.find("depend on results") != std::string::npos);
  // The same trials on every run (seed, index): what the scheduler starts.
  CHECK(swept("expand " + quote(path)).out == r.out);
  const Run no_metric = swept("validate " + quote(write_temp("bayes.json", R"({"method": "bayes", "parameters": {"x": {"min": 0.0, "max": 1.0}}})")));
  CHECK(no_metric.exit_code == 2);
  CHECK(no_metric.err.find(": metric: bayes learns from a metric") != std::string::npos);
}

TEST_CASE("cli: every example validates and expands to trials with commands") {
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kExamples)) {
    if (entry.path().extension() != ".json" && entry.path().extension() != ".yaml") continue;
    ++examples;
    INFO(entry.path().string());
    const Run v = swept("validate " + quote(entry.path().string()));
    CHECK(v.exit_code == 0);
    const Run e = swept("expand " + quote(entry.path().string()) + " --limit 50");
    CHECK(e.exit_code == 0);
    const auto ls = lines(e.out);
    CHECK_FALSE(ls.empty());
    for (const auto& l : ls) {
      const json line = json::parse(l);
      CHECK(line["params"].is_object());
      CHECK_FALSE(line["command"].empty());
    }
  }
  CHECK(examples >= 14);
}

TEST_CASE("cli: a YAML file - format by extension, problems with path line and column, exit 2") {
  const std::string good = write_temp("good.yml", "method: grid\nparameters:\n  lr:\n    values: [1e-3, 1e-2]\n");
  const Run ok = swept("validate " + quote(good));
  CHECK(ok.exit_code == swept::kExitOk);
  CHECK(ok.out == good + ": ok: grid, 1 parameter, 2 trials\n");
  CHECK(ok.err.empty());
  const Run trials = swept("expand " + quote(good));
  CHECK(lines(trials.out) == std::vector<std::string>{
                                 R"({"index":0,"params":{"lr":0.001},"command":["swept-train","--lr=0.001"]})",
                                 R"({"index":1,"params":{"lr":0.01},"command":["swept-train","--lr=0.01"]})"});
  const std::string bad = write_temp("bad.yaml", "method: grid\nparameters:\n  lr:\n    min: 3\n    max: 1\n  wd: {values: []}\n");
  const Run r = swept("validate " + quote(bad));
  CHECK(r.exit_code == swept::kExitUsage);
  CHECK(r.out.empty());
  CHECK(lines(r.err) == std::vector<std::string>{
                            bad + ": parameters.lr.max: expected max > min (3), found 1 (line 5, column 10)",
                            bad + ": parameters.wd.values: expected a non-empty array of values, found an empty array "
                                  "(line 6, column 16)"});
  // The extension decides: YAML text in a .json file is refused by the JSON reader...
  const std::string yaml_in_json = write_temp("yaml.json", "method: grid\nparameters: {x: {values: [1]}}\n");
  const Run as_json = swept("validate " + quote(yaml_in_json));
  CHECK(as_json.exit_code == swept::kExitUsage);
  CHECK(as_json.err.find("expected valid JSON") != std::string::npos);
  // ... and any other name is read by content.
  const std::string no_ext = write_temp("sweep.conf", "method: grid\nparameters: {x: {values: [1]}}\n");
  CHECK(swept("validate " + quote(no_ext)).exit_code == swept::kExitOk);
}

TEST_CASE("cli: malformed YAML - tabs, quotes, scalars, garbage, nesting, alias bomb: exit 2, one line each") {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char level = 'b'; level <= 'j'; ++level) {
    bomb += std::string(1, level) + ": &" + level + " [";
    for (int k = 0; k < 9; ++k) bomb += std::string(k ? ", *" : "*") + static_cast<char>(level - 1);
    bomb += "]\n";
  }
  std::string garbage;
  for (int i = 0; i < 2000; ++i) garbage += static_cast<char>((i * 7919) % 251);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"tabs.yaml", "method: grid\nparameters:\n\tx: {values: [1]}\n"},
      {"quote.yaml", "method: grid\nparameters:\n  x: {values: [\"a]}\n"},
      {"scalar.yaml", "method: grid\nparameters: 3\n"},
      {"garbage.yaml", garbage},
      {"nesting.yaml", "x: " + std::string(10 << 20, '[')},
      {"deep.yaml", "x: " + std::string(500000, '[')},
      {"bomb.yaml", bomb},
  };
  for (const auto& [name, text] : files) {
    INFO(name);
    const std::string path = write_temp(name, text);
    const Run r = swept("validate " + quote(path));
    CHECK(r.exit_code == swept::kExitUsage);
    CHECK(r.out.empty());
    const auto ls = lines(r.err);
    REQUIRE(ls.size() == 1);
    CHECK(ls[0].rfind(path + ": ", 0) == 0);
    if (name != "nesting.yaml") CHECK_MESSAGE(ls[0].find("(line ") != std::string::npos, ls[0]);  // a size: no line
  }
}

TEST_CASE("cli: warnings go to stderr with exit 0, --strict makes them problems, --explain shows each reading") {
  const std::string path = write_temp("lenient.yaml", R"(method: random
metric: {name: loss, goal: minimise}
paramters_extra: 1
parameters:
  lr: {values: [1e-5, 0.5]}
  wd:
    distribution: log_uniform
    min: -5
    max: -1
command: [run, 3, "${args}"]
)");
  const Run lenient = swept("validate " + quote(path));
  CHECK(lenient.exit_code == swept::kExitOk);
  CHECK(lenient.out == path + ": ok: random, 2 parameters, unbounded (no run_cap)\n");
  // validate's summary comes first, warnings on stderr, each once, in file order.
  const auto warnings = lines(lenient.err);
  REQUIRE(warnings.size() == 4);
  CHECK(warnings[0].rfind(path + ": warning: metric.goal: ", 0) == 0);
  CHECK(warnings[1].rfind(path + ": warning: paramters_extra: unknown top-level key", 0) == 0);
  CHECK(warnings[2].rfind(path + ": warning: parameters.wd.distribution: W&B's deprecated log_uniform", 0) == 0);
  CHECK(warnings[3].rfind(path + ": warning: command[1]: expected a string, found 3", 0) == 0);
  const Run strict = swept("validate --strict " + quote(path));
  CHECK(strict.exit_code == swept::kExitUsage);
  CHECK(strict.out.empty());
  CHECK(lines(strict.err).size() == 4);
  CHECK(strict.err.find("warning:") == std::string::npos);
  const Run explained = swept("validate --explain " + quote(path));
  CHECK(explained.exit_code == swept::kExitOk);
  CHECK(explained.out.find(path + ": parameters.lr.values[0]: 1e-5 read as 1e-05: ") != std::string::npos);
  CHECK(explained.out.find("(line 5, column 17)") != std::string::npos);
  CHECK(explained.out.find("parameters.wd.distribution: log_uniform min -5 max -1 read as log_uniform_values") !=
        std::string::npos);
  const Run expand_explained = swept("expand --explain --limit 1 " + quote(path));
  CHECK(expand_explained.exit_code == swept::kExitOk);
  CHECK(lines(expand_explained.out).size() == 1);  // stdout stays JSON lines
  CHECK(expand_explained.err.find("1e-5 read as 1e-05") != std::string::npos);
}

TEST_CASE("cli: swept run runs a YAML sweep file end to end") {
  const std::string dir = scratch_dir() + "/run";
  std::filesystem::create_directories(dir);
  // The example's command is relative to the repository root.
  const std::string cmd = "cd " + quote(SWEPT_SOURCE_DIR) + " && " + quote(SWEPT_BINARY_DIR "/bin/swept") +
                          " run examples/script-sweep.yaml --db " + quote(dir + "/s.db") + " --workdir " +
                          quote(dir + "/work") + " --dashboard off --progress off >" + quote(dir + "/out") + " 2>&1";
  const int status = std::system(cmd.c_str());
  INFO(slurp(dir + "/out"));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(slurp(dir + "/out").find("sweep 1 completed: 14 completed, 0 failed") != std::string::npos);
}


// Issue 15, defect 12: flags and database files that are wrong are refused
// with exit 2 and a message that names the problem, without SQLite's
// internals.
TEST_CASE("cli: a bad --bind, --log-level or --timeout-ms is refused with exit 2 and the right hint") {
  const std::string db = scratch_dir() + "/flags.db";
  Run r = swept("scheduler --bind tcp://127.0.0.1:99999 --db " + quote(db));
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(r.err.find("port 99999 is out of range") != std::string::npos, r.err);
  r = swept("scheduler --bind garbage --db " + quote(db));
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(r.err.find("use tcp://HOST:PORT") != std::string::npos, r.err);
  r = swept("scheduler --bind tcp://127.0.0.1:5x --db " + quote(db));
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(r.err.find("not a number") != std::string::npos, r.err);
  r = swept("scheduler --bind tcp://127.0.0.1:* --log-level loud --db " + quote(db));
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(r.err.find("--log-level 'loud'") != std::string::npos, r.err);
  r = swept("status --timeout-ms -5 --scheduler tcp://127.0.0.1:1");
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(r.err.find("--timeout-ms must be at least 1") != std::string::npos, r.err);
  CHECK_FALSE(std::filesystem::exists(db));  // nothing was created
}

TEST_CASE("cli: a directory or a corrupt file as --db is refused with exit 2, without SQLite internals") {
  const std::string dir = scratch_dir() + "/a-directory";
  std::filesystem::create_directories(dir);
  const std::string corrupt = write_temp("corrupt.db", std::string(8192, 'x'));
  for (const std::string& cmd : {std::string("scheduler --bind tcp://127.0.0.1:* --db "), std::string("status --db ")}) {
    Run r = swept(cmd + quote(dir));
    CHECK_MESSAGE(r.exit_code == 2, cmd, r.err);
    CHECK_MESSAGE(r.err.find("is a directory, not a database file") != std::string::npos, r.err);
    r = swept(cmd + quote(corrupt));
    CHECK_MESSAGE(r.exit_code == 2, cmd, r.err);
    CHECK_MESSAGE(r.err.find("not a SQLite database") != std::string::npos, r.err);
    for (const char* internal : {"sqlite3_", ".cpp:", "SQLite code"})
      CHECK_MESSAGE(r.err.find(internal) == std::string::npos, r.err);
  }
  CHECK_FALSE(std::filesystem::exists(dir + ".lock"));
}

TEST_CASE("cli: swept web and swept scheduler --web refuse a non-loopback address without --token or --insecure") {
  const std::string dir = scratch_dir() + "/web";
  std::filesystem::create_directories(dir);
  Run r = swept("web --listen 0.0.0.0:0 --db " + quote(dir + "/w.db"));
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(r.err.find("without a token") != std::string::npos, r.err);
  r = swept("scheduler --bind tcp://127.0.0.1:* --web 0.0.0.0:0 --db " + quote(dir + "/s.db"));
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(r.err.find("--insecure") != std::string::npos, r.err);
}

TEST_CASE("cli: swept run and swept scheduler take --max-unauthenticated as swept web does, and refuse bad values") {
  const std::string dir = scratch_dir() + "/max-unauthenticated";
  std::filesystem::create_directories(dir);
  for (const std::string command : {"web", "run", "scheduler"}) {
    INFO(command);
    const Run help = swept(command + " --help");
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("--max-unauthenticated arg (=128)") != std::string::npos);  // the same default
  }
  const std::string sweep = write_temp("one.json", R"({"method": "grid", "command": ["true"], "parameters": {"x": {"value": 1}}})");
  const std::string db = dir + "/s.db";
  const std::vector<std::string> refusals = {
      "run " + quote(sweep) + " --dashboard 127.0.0.1:0 --progress off --db " + quote(db) + " --max-unauthenticated ",
      "scheduler --bind tcp://127.0.0.1:* --web 127.0.0.1:0 --db " + quote(db) + " --max-unauthenticated "};
  for (const std::string& base : refusals) {
    for (const std::string bad : {"0", "-3", "160", "100000"}) {
      const Run r = swept(base + bad);
      CHECK_MESSAGE(r.exit_code == swept::kExitUsage, base, bad, r.err);
      CHECK_MESSAGE(r.err.find("--max-unauthenticated must be between 1 and 159") != std::string::npos, r.err);
      CHECK_MESSAGE(r.err.find("got " + bad) != std::string::npos, r.err);
    }
    const Run r = swept(base + "many");
    CHECK_MESSAGE(r.exit_code == swept::kExitUsage, r.err);
    CHECK_MESSAGE(r.err.find("max-unauthenticated") != std::string::npos, r.err);
  }
  CHECK_FALSE(std::filesystem::exists(db));  // refused before anything was opened
  // A good value is taken: the sweep runs with its dashboard up.
  const Run ok = swept("run " + quote(sweep) + " --dashboard 127.0.0.1:0 --progress off --db " + quote(db) +
                       " --workdir " + quote(dir + "/work") + " --max-unauthenticated 4");
  CHECK_MESSAGE(ok.exit_code == 0, ok.err);
}


// ---- warm starts (issue 28): the file read at the edge, exit 2 naming the field ----

// A grid sweep of the example quadratic script over `lrs`, warm-started from `warm` ("" for none).
std::string quadratic_grid(const std::string& lrs, const std::string& warm) {
  json j = {{"method", "grid"},
            {"metric", {{"name", "loss"}}},
            {"command", {SWEPT_SOURCE_DIR "/examples/scripts/quadratic.py", "${args}"}},
            {"parameters", {{"lr", {{"values", json::parse(lrs)}}}, {"target", {{"value", 3.0}}}, {"steps", {{"value", 5}}}}}};
  if (!warm.empty()) j["warm_start"] = {{"file", warm}};
  return j.dump();
}

TEST_CASE("cli: validate counts the trials of a warm start file that fit, and says why the first did not") {
  const std::string csv = write_temp("runs.csv",
                                     "trial_id,index,state,attempts,agent,exit_code,metric_value,reason,param.lr,"
                                     "param.steps,param.target,metric.loss\n"
                                     "1,0,completed,1,a,0,0.5,,0.1,5,3,0.5\n"
                                     "2,1,completed,1,a,0,0.4,,7,5,3,0.4\n"
                                     "3,2,failed,1,a,1,,\"exit code 1, \"\"oops\"\"\",0.5,5,3,\n");
  const std::string sweep = write_temp("warm.json", quadratic_grid("[0.1, 0.5, 0.9]", "runs.csv"));
  Run r = swept("validate " + quote(sweep));
  INFO(r.err);
  CHECK(r.exit_code == swept::kExitOk);
  CHECK(lines(r.out).front() ==
        sweep + ": warm start: 1 of 3 earlier trials fit; 2 skipped: 1 outside this sweep's space (first: " + csv +
            ", row 3: parameters.lr: 7 is not among its values), 1 without a final value of loss (not completed, or "
            "never reported it)");
}

TEST_CASE("cli: an unreadable warm start file or one without the metric is exit 2 naming warm_start.file") {
  const std::string sweep = write_temp("nofile.json", quadratic_grid("[0.1]", "missing.csv"));
  Run v = swept("validate " + quote(sweep));
  CHECK(v.exit_code == swept::kExitUsage);
  CHECK(v.err.find("warm_start.file: " + scratch_dir() + "/missing.csv: cannot open the file") != std::string::npos);
  // swept submit reads it before it connects: no scheduler is needed to refuse it.
  Run s = swept("submit " + quote(sweep) + " --scheduler tcp://127.0.0.1:9 --timeout-ms 500");
  CHECK(s.exit_code == swept::kExitUsage);
  CHECK(s.err.find("swept submit: " + sweep + ": warm_start.file: ") != std::string::npos);
  write_temp("other.json", R"([{"id": 4, "state": "completed", "params": {"lr": 0.1}, "latest": {"acc": 0.9}}])");
  Run m = swept("validate " + quote(write_temp("other-metric.json", quadratic_grid("[0.1]", "other.json"))));
  CHECK(m.exit_code == swept::kExitUsage);
  CHECK(m.err.find("warm_start.file: " + scratch_dir() + "/other.json: no completed trial in it has a value of the "
                   "sweep's metric 'loss'") != std::string::npos);
  Run db = swept("validate " + quote(write_temp("bysweep.json", R"({"method": "grid", "metric": {"name": "loss"},
      "warm_start": {"sweep": 3}, "parameters": {"x": {"values": [1]}}})")));
  CHECK(db.exit_code == swept::kExitOk);
  CHECK(db.out.find("warm start from sweep 3: give --db FILE to count the trials that fit") != std::string::npos);
}

TEST_CASE("cli: a sweep warm-started from another's CSV export runs only the points it does not know") {
  const std::string dir = scratch_dir() + "/warm-run";
  std::filesystem::create_directories(dir);
  const std::string bin = quote(SWEPT_BINARY_DIR "/bin/swept");
  const std::string db = quote(dir + "/s.db");
  std::ofstream(dir + "/a.json") << quadratic_grid("[0.1, 0.5]", "");
  std::ofstream(dir + "/b.json") << quadratic_grid("[0.1, 0.5, 0.9]", "a.csv");
  const std::string run = " --db " + db + " --workdir " + quote(dir + "/work") + " --dashboard off --progress off";
  const std::string cmd = bin + " run " + quote(dir + "/a.json") + run + " && " + bin + " export 1 --db " + db +
                          " --format csv -o " + quote(dir + "/a.csv") + " && " + bin + " run " +
                          quote(dir + "/b.json") + run + " && " + bin + " trials 2 --json --db " + db + " >" +
                          quote(dir + "/trials.json");
  const int status = std::system(("( " + cmd + " ) 2>" + quote(dir + "/err")).c_str());
  INFO(slurp(dir + "/err"));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(slurp(dir + "/err").find("warm start: 2 of 2 earlier trials fit") != std::string::npos);
  json trials = json::parse(slurp(dir + "/trials.json"));
  REQUIRE(trials.size() == 3);
  int imported = 0;
  for (const json& t : trials) {
    if (t["state"] == "imported") {
      ++imported;
      CHECK(t["attempts"] == 0);
      CHECK(t["reason"].get<std::string>().rfind("imported from " + dir + "/a.csv, row ", 0) == 0);
      CHECK(t["latest"].contains("loss"));
    } else {
      CHECK(t["state"] == "completed");
      CHECK(t["params"]["lr"] == 0.9);  // the one point not known
    }
  }
  CHECK(imported == 2);
}

}  // namespace
