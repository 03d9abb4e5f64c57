// Command macros and the Python-style formatting of values in arguments.
#include <doctest/doctest.h>

#include <map>

#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace swept::sweeps {
namespace {

using json = nlohmann::json;

SweepSpec spec_with(const std::string& extra) {
  ParseOutcome outcome = parse_sweep(R"({"method": "grid", "parameters": {"x": {"value": 1}})" + extra + "}");
  REQUIRE_MESSAGE(outcome.spec.has_value(), (outcome.problems.empty() ? "" : outcome.problems[0].ToString()));
  return *outcome.spec;
}

CommandContext context_with(std::map<std::string, std::string> env = {}) {
  CommandContext c;
  c.getenv = [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return c;
}

std::vector<std::string> argv_of(const SweepSpec& spec, const json& params, const CommandContext& c = context_with()) {
  auto r = build_command(spec, params, c);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  return *r;
}

TEST_CASE("sweeps.command: the default is swept-train args - with a program WandBs env/interpreter/program/args") {
  CHECK(argv_of(spec_with(""), json{{"lr", 0.1}, {"bs", 64}}) == std::vector<std::string>{"swept-train", "--bs=64", "--lr=0.1"});
  CHECK(argv_of(spec_with(R"(, "program": "train.py")"), json{{"lr", 0.1}}) ==
        std::vector<std::string>{"/usr/bin/env", "python3", "train.py", "--lr=0.1"});
}

TEST_CASE("sweeps.command: every macro") {
  const json params = json::parse(R"({"flag": true, "off": false, "lr": 0.001, "name": "a b", "none": null})");
  SweepSpec spec = spec_with(R"(, "program": "t.py", "command": ["${env}", "${interpreter}", "${program}",
      "${args_no_hyphens}", "--", "${args_no_boolean_flags}", "${args_json}", "${args_json_file}", "${args_override_hydra}"])");
  CommandContext c = context_with();
  c.interpreter = "python3.11";
  c.args_json_file = "/tmp/trial-7/params.json";
  CHECK(argv_of(spec, params, c) ==
        std::vector<std::string>{"/usr/bin/env", "python3.11", "t.py",
                                 "flag=True", "lr=0.001", "name=a b", "none=None", "off=False", "--",
                                 "--flag", "--lr=0.001", "--name=a b", "--none=None",
                                 R"({"flag": true, "lr": 0.001, "name": "a b", "none": null, "off": false})",
                                 "/tmp/trial-7/params.json",
                                 "++flag=True", "++lr=0.001", "++name=a b", "++none=None", "++off=False"});
}

TEST_CASE("sweeps.command: values are written as Pythons str writes them") {
  SweepSpec spec = spec_with(R"(, "command": ["${args_no_hyphens}"])");
  auto one = [&](const char* value) { return argv_of(spec, json{{"v", json::parse(value)}})[0]; };
  CHECK(one("0.1") == "v=0.1");
  CHECK(one("1.0") == "v=1.0");
  CHECK(one("1") == "v=1");
  CHECK(one("1e-05") == "v=1e-05");
  CHECK(one("0.0001") == "v=0.0001");
  CHECK(one("1e16") == "v=1e+16");
  CHECK(one("1e15") == "v=1000000000000000.0");
  CHECK(one("123456.789") == "v=123456.789");
  CHECK(one("-2.5e-7") == "v=-2.5e-07");
  CHECK(one("1.7976931348623157e308") == "v=1.7976931348623157e+308");
  CHECK(one("-0.0") == "v=-0.0");
  CHECK(one("18446744073709551615") == "v=18446744073709551615");
  CHECK(one("[1, 2.5, \"a\", null, true]") == "v=[1, 2.5, 'a', None, True]");
  CHECK(one(R"({"b": {"c": [0.5]}, "a": "it's"})") == R"(v={'a': "it's", 'b': {'c': [0.5]}})");
  CHECK(one(R"("tab\there")") == "v=tab\there");  // str() of a string is the string itself
  CHECK(one(R"(["tab\there"])") == R"(v=['tab\there'])");
}

TEST_CASE("sweeps.command: args_json is json.dumps text ASCII only") {
  CHECK(args_json(json::parse(R"({"a": 1, "b": [1.5, "é😀"], "c": {"d": null}})")) ==
        R"({"a": 1, "b": [1.5, "\u00e9\ud83d\ude00"], "c": {"d": null}})");
  CHECK(args_json(json::parse(R"({"q": "say \"hi\"\n"})")) == R"({"q": "say \"hi\"\n"})");
  CHECK(args_json(json::object()) == "{}");
}

TEST_CASE("sweeps.command: envvar macros anywhere in an element - unset is an error that names it") {
  SweepSpec spec = spec_with(R"(, "command": ["run", "--out=${envvar:OUT}/${envvar:RUN}-x", "${args}"])");
  CHECK(argv_of(spec, json{{"x", 1}}, context_with({{"OUT", "/data"}, {"RUN", "r1"}})) ==
        std::vector<std::string>{"run", "--out=/data/r1-x", "--x=1"});
  auto missing = build_command(spec, json{{"x", 1}}, context_with({{"OUT", "/data"}}));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "command[1]: ${envvar:RUN} names an environment variable that is not set here; set RUN or remove it from the command");
  // No getenv at all behaves as an empty environment.
  CHECK_FALSE(build_command(spec, json{{"x", 1}}, CommandContext{}).ok());
}

TEST_CASE("sweeps.command: text that only looks like a macro stays as written") {
  SweepSpec spec = spec_with(R"(, "command": ["bash", "-c", "echo ${HOME} ${args}", "x${args}", "${}"])");
  CHECK(argv_of(spec, json{{"x", 1}}) == std::vector<std::string>{"bash", "-c", "echo ${HOME} ${args}", "x${args}", "${}"});
}

TEST_CASE("sweeps.command: an unknown macro expands to nothing (as W&B's agent), no program fails cleanly") {
  SweepSpec spec = spec_with("");
  spec.command = {"run", "${nope}", "${args_no_equals}"};
  auto r = build_command(spec, json{{"lr", 0.5}, {"fast", true}}, context_with());
  REQUIRE(r.ok());
  CHECK(*r == std::vector<std::string>{"run", "--fast", "True", "--lr", "0.5"});
  spec.command = {"${program}"};
  CHECK(build_command(spec, json::object(), context_with()).status().message() ==
        "command[0]: ${program} needs the sweep's program key, which is not set");
}

}  // namespace
}  // namespace swept::sweeps
