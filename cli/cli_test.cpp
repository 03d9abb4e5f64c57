// `swept validate` and `swept expand`, run as the real binary (built beside
// this test) on the examples and on bad files: exit codes, output lines, help.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

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

TEST_CASE("cli: every example validates and expands to trials with commands") {
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kExamples)) {
    if (entry.path().extension() != ".json") continue;
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
  CHECK(examples >= 5);
}

}  // namespace
