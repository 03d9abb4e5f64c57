// The YAML reader: our own corpus (sweeps/testdata/yaml/, one file per rule
// of docs/sweep-format.md "YAML"), malformed files each with its one problem
// and position, generated hostile inputs (garbage, deep nesting, an alias
// bomb), and the examples' YAML twins read against their JSON originals.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "sweeps/numeric.h"
#include "sweeps/space.h"
#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace swept::sweeps {
namespace {

using json = nlohmann::json;

const std::string kCorpus = SWEPT_SOURCE_DIR "/sweeps/testdata/yaml/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing " << path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shown(const ParseOutcome& o) {
  std::string s;
  for (const auto& p : o.problems) s += "\n  problem: " + p.ToString();
  for (const auto& p : o.warnings) s += "\n  warning: " + p.ToString();
  return s;
}

ParseOutcome parse_file(const std::string& name, Format format = Format::kYaml) {
  return parse_sweep(slurp(kCorpus + name), format);
}

SweepSpec parse_ok(const std::string& name) {
  ParseOutcome o = parse_file(name);
  REQUIRE_MESSAGE(o.spec.has_value(), name << shown(o));
  CHECK(o.format == Format::kYaml);
  return *o.spec;
}

const Leaf& leaf(const SweepSpec& spec, const std::string& dotted) {
  for (const Leaf& l : spec.space->leaves) {
    if (l.dotted == dotted) return l;
  }
  FAIL("no leaf " << dotted);
  return spec.space->leaves.front();
}

std::vector<json> all_trials(const SweepSpec& spec, int64_t limit = 100000) {
  std::vector<json> out;
  const int64_t n = std::min(trial_count(spec).value_or(limit), limit);
  for (int64_t i = 0; i < n; ++i) out.push_back(trial_at(spec, i).params);
  return out;
}

// Exactly equal, JSON types included (1 is not 1.0).
bool same_typed(const json& a, const json& b) { return a == b && a.dump() == b.dump(); }

TEST_CASE("sweeps.yaml: numbers - 1e-5 is a number, 1 and 1.0 differ, a string list stays strings") {
  const ParseOutcome o = parse_file("numbers.yaml");
  REQUIRE_MESSAGE(o.spec.has_value(), shown(o));
  const SweepSpec& spec = *o.spec;
  CHECK(leaf(spec, "lr").distribution == Distribution::kLogUniformValues);
  CHECK(leaf(spec, "lr").min == 1e-5);
  CHECK(leaf(spec, "lr").max == 1e-1);
  CHECK(leaf(spec, "layers").distribution == Distribution::kIntUniform);
  CHECK(leaf(spec, "width").distribution == Distribution::kUniform);
  CHECK(same_typed(json(leaf(spec, "momentum").values), json::parse("[0.5, 0.9, 0.9]")));
  CHECK(same_typed(json(leaf(spec, "scale").values), json::parse("[3000000.0, 2000.0]")));
  CHECK(same_typed(json(leaf(spec, "tags").values), json::parse(R"(["1e-5", "2e-3"])")));
  CHECK(leaf(spec, "quoted_min").min == 0.5);
  // The quoted number is the one warning, at its line.
  REQUIRE(o.warnings.size() == 1);
  CHECK(o.warnings[0].path == "parameters.quoted_min.min");
  CHECK(o.warnings[0].line == 22);
  // --explain's readings say which spelling made which value, in file order.
  REQUIRE(o.readings.size() >= 6);
  CHECK(o.readings[0].path == "parameters.lr.min");
  CHECK(o.readings[0].spelling == "1e-5");
  CHECK(o.readings[0].value == "1e-05");
  CHECK(o.readings[0].line == 9);
  CHECK(o.readings[0].column == 10);
  for (size_t i = 1; i < o.readings.size(); ++i) CHECK(o.readings[i - 1].line <= o.readings[i].line);
  // Random search draws integers for int_uniform and floats for uniform.
  for (const json& t : all_trials(spec)) {
    CHECK(t["layers"].is_number_integer());
    CHECK(t["width"].is_number_float());
  }
}

TEST_CASE("sweeps.yaml: YAML 1.1 scalars read as W&B's client reads them, quoted ones stay strings") {
  const SweepSpec spec = parse_ok("yaml11.yaml");
  const auto trials = all_trials(spec);
  REQUIRE(trials.size() == 4);
  CHECK(same_typed(trials[0], json::parse(R"({"augment": true, "epochs": 8, "fused": true, "mask": 31, "minutes": 90,
      "name": "yes", "nothing": null, "steps": 1000, "version": "010"})")));
  CHECK(trials[1]["fused"] == false);
  CHECK(trials[2]["augment"] == false);
}

TEST_CASE("sweeps.yaml: a key written twice in a mapping - the last value kept, as PyYAML keeps it, and a warning") {
  const ParseOutcome o = parse_file("duplicate-key.yaml");
  REQUIRE_MESSAGE(o.spec.has_value(), shown(o));
  // One warning per repeat, naming the key (its path) and both lines, at the kept one.
  REQUIRE_MESSAGE(o.warnings.size() == 2, shown(o));
  CHECK(o.warnings[0].path == "parameters.lr");
  CHECK_MESSAGE(o.warnings[0].message.find("lines 6 and 7") != std::string::npos, o.warnings[0].message);
  CHECK_MESSAGE(o.warnings[0].message.find("PyYAML") != std::string::npos, o.warnings[0].message);
  CHECK(o.warnings[0].line == 7);
  CHECK(o.warnings[1].path == "parameters.batch.values");
  CHECK_MESSAGE(o.warnings[1].message.find("lines 9 and 10") != std::string::npos, o.warnings[1].message);
  CHECK(o.warnings[1].line == 10);
  // The last values are the ones swept.
  const auto trials = all_trials(*o.spec);
  REQUIRE(trials.size() == 1);
  CHECK(same_typed(trials[0], json::parse(R"({"batch": 64, "lr": 2})")));
  // A problem in the value that is dropped is still a problem (nothing read is hidden).
  const ParseOutcome bad = parse_sweep("method: grid\nparameters:\n  lr: {values: [.inf]}\n  lr: {values: [2]}\n", Format::kYaml);
  CHECK_FALSE(bad.spec.has_value());
}

TEST_CASE("sweeps.yaml: anchors, aliases and merge keys (explicit keys win, the first merged mapping wins)") {
  const SweepSpec spec = parse_ok("anchors.yaml");
  const auto trials = all_trials(spec);
  REQUIRE(trials.size() == 2 * 2 * 2 * 2 * 3);
  std::set<json> sizes, biases, decoder_widths;
  for (const json& t : trials) {
    sizes.insert(t["head"]["size"]);
    biases.insert(t["head"]["bias"]);
    decoder_widths.insert(t["decoder"]["width"]);
  }
  CHECK(sizes == std::set<json>{1, 2, 3});
  CHECK(biases == std::set<json>{false});
  CHECK(decoder_widths == std::set<json>{64, 128});
}

TEST_CASE("sweeps.yaml: deprecated distributions - exponents, a warning each, draws in range") {
  const ParseOutcome o = parse_file("deprecated.yaml");
  REQUIRE_MESSAGE(o.spec.has_value(), shown(o));
  REQUIRE(o.warnings.size() == 3);
  CHECK(o.warnings[0].path == "parameters.lr.distribution");
  CHECK(o.warnings[0].line == 6);
  CHECK(o.warnings[0].message.find("read as log_uniform_values") != std::string::npos);
  CHECK(o.warnings[1].message.find("q_log_uniform_values") != std::string::npos);
  CHECK(o.warnings[2].message.find("inv_log_uniform_values") != std::string::npos);
  for (const json& t : all_trials(*o.spec)) {
    CHECK(t["lr"].get<double>() >= std::exp(-9.21));
    CHECK(t["lr"].get<double>() <= std::exp(-2.30));
    CHECK(std::fmod(t["batch"].get<double>(), 8.0) == 0.0);
    CHECK(t["batch"].get<double>() >= 16.0);
    CHECK(t["batch"].get<double>() <= 512.0);
    CHECK(t["temperature"].get<double>() >= std::exp(-2.0) * (1 - 1e-12));
    CHECK(t["temperature"].get<double>() <= 1.0);
  }
}

TEST_CASE("sweeps.yaml: W&B's leniency - four warnings with their lines, the sweep still runs") {
  const ParseOutcome o = parse_file("leniency.yaml");
  REQUIRE_MESSAGE(o.spec.has_value(), shown(o));
  std::vector<std::pair<std::string, int>> got;
  for (const auto& w : o.warnings) got.emplace_back(w.path, w.line);
  CHECK(got == std::vector<std::pair<std::string, int>>{
                   {"early_terminat", 3}, {"metric.goal", 6}, {"command[3]", 13}, {"command[4]", 14}});
  CHECK(o.warnings[0].message.find("did you mean 'early_terminate'?") != std::string::npos);
  CHECK(o.spec->metric->goal == Goal::kMinimize);
  auto argv = build_command(*o.spec, trial_at(*o.spec, 1).params, CommandContext{});
  REQUIRE(argv.ok());
  CHECK(*argv == std::vector<std::string>{"python", "train.py", "--epochs", "3", "--x=2"});
}

TEST_CASE("sweeps.yaml: every macro of W&B's agent") {
  const SweepSpec spec = parse_ok("macros.yaml");
  CommandContext context;
  context.getenv = [](const std::string& name) -> std::optional<std::string> {
    if (name == "SWEPT_YAML_TEST_HOME") return "/home/sweeper";
    return std::nullopt;
  };
  auto argv = build_command(spec, trial_at(spec, 0).params, context);
  REQUIRE(argv.ok());
  CHECK(*argv == std::vector<std::string>{
                     "/usr/bin/env", "python3", "train.py", "--fast=False", "--lr=0.01",  // env interpreter program args
                     "--fast", "False", "--lr", "0.01",                                   // args_no_equals
                     "fast=False", "lr=0.01",                                             // args_no_hyphens
                     "--lr=0.01",                                                         // args_no_boolean_flags
                     R"({"fast": false, "lr": 0.01})",                                    // args_json
                     "swept-params.json",                                                 // args_json_file
                     "+fast=False", "+lr=0.01", "++fast=False", "++lr=0.01",              // hydra
                     "--home=/home/sweeper"});                                            // envvar
}

TEST_CASE("sweeps.yaml: layout - directives, comments, block scalars, flow style, document markers") {
  const SweepSpec spec = parse_ok("layout.yaml");
  CHECK(spec.name == "layout");
  CHECK(spec.description == "A sweep over two things,\ndescribed on two lines.\n");
  CHECK(trial_count(spec) == 4);
  CHECK(spec.command == std::vector<std::string>{"swept-train", "${args}"});
}

TEST_CASE("sweeps.yaml: a grid read from YAML and from JSON gives the same trials in the same order") {
  const SweepSpec from_yaml = parse_ok("grid.yaml");
  const ParseOutcome from_json = parse_file("grid.json", Format::kJson);
  REQUIRE(from_json.spec);
  const auto a = all_trials(from_yaml), b = all_trials(*from_json.spec);
  REQUIRE(a.size() == 3 * 2 * 3 * 4);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(same_typed(a[i], b[i]), i << ": " << a[i] << " vs " << b[i]);
}

struct Bad {
  const char* file;
  std::string path;
  std::string says;  // a phrase of the message
  int line, column;
};

TEST_CASE("sweeps.yaml: malformed files - one problem each, with its path, line and column") {
  const std::vector<Bad> cases = {
      {"tab-indent.yaml", "", "found a tab", 3, 1},
      {"unclosed-quote.yaml", "parameters.lr.values[0]", "expected valid YAML", 5, 1},
      {"scalar-for-mapping.yaml", "parameters", "expected an object of parameters", 2, 13},
      {"top-sequence.yaml", "", "expected a YAML mapping at the top level", 1, 1},
      {"unknown-alias.yaml", "parameters.lr", "anchor is not defined", 3, 7},
      {"two-documents.yaml", "", "found a second one", 5, 1},
      {"unclosed-flow.yaml", "parameters.lr.values[1]", "expected valid YAML", 5, 5},
      {"infinity.yaml", "parameters.lr.min", "expected a finite number", 3, 13},
      {"beyond-double.yaml", "parameters.lr.max", "found 1e400, a number beyond the range of a double", 3, 24},
      {"foreign-tag.yaml", "parameters.lr", "found the tag", 3, 7},
      {"control-char.yaml", "", "control character 0x01", 4, 7},
      {"empty-document.yaml", "", "found no document", 0, 0},
      {"alias-cycle.yaml", "parameters.lr.values", "a cycle", 3, 16},
      {"complex-key.yaml", "parameters", "found a sequence used as a key", 4, 5},
  };
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus + "bad")) files += entry.path().extension() == ".yaml";
  CHECK(files == static_cast<int>(cases.size()));  // every file has its case
  for (const Bad& c : cases) {
    INFO(c.file);
    const ParseOutcome o = parse_file(std::string("bad/") + c.file);
    CHECK_FALSE(o.spec.has_value());
    REQUIRE_MESSAGE(o.problems.size() == 1, shown(o));
    const Problem& p = o.problems[0];
    CHECK(p.path == c.path);
    CHECK_MESSAGE(p.message.find(c.says) != std::string::npos, p.message);
    CHECK(p.line == c.line);
    CHECK(p.column == c.column);
  }
}

TEST_CASE("sweeps.yaml: hostile input - garbage, deep nesting, 10 MB, an alias bomb: refused with one problem") {
  // Binary garbage (a fixed seed): refused at the UTF-8 or control-character gate.
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage += static_cast<char>(numeric::mix64(static_cast<uint64_t>(i)) & 0xFF);
  ParseOutcome g = parse_sweep(garbage, Format::kYaml);
  CHECK_FALSE(g.spec);
  REQUIRE(g.problems.size() == 1);
  CHECK(g.problems[0].line >= 1);
  // 10 MB of nesting: refused by size before any parsing.
  ParseOutcome big = parse_sweep("a: " + std::string(10 << 20, '['), Format::kYaml);
  REQUIRE(big.problems.size() == 1);
  CHECK(big.problems[0].message.find("at most 1048576 bytes") != std::string::npos);
  // Just under 1 MiB of nesting, flow and block: refused at depth 64.
  for (const std::string& deep : {"x: " + std::string(1000000, '['), "x:\n  " + [] {
                                    std::string s;
                                    for (int i = 0; i < 400000; ++i) s += "- ";
                                    return s + "1\n";
                                  }()}) {
    ParseOutcome d = parse_sweep(deep, Format::kYaml);
    REQUIRE(d.problems.size() == 1);
    CHECK_MESSAGE(d.problems[0].message.find("nested at most 64 levels") != std::string::npos, d.problems[0].message);
  }
  // A billion laughs: 9 levels of 9 aliases each would be 387 million values.
  std::string bomb = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  std::string previous = "a";
  for (char level = 'b'; level <= 'j'; ++level) {
    bomb += std::string(1, level) + ": &" + level + " [";
    for (int k = 0; k < 9; ++k) bomb += (k ? ", *" : "*") + previous;
    bomb += "]\n";
    previous = std::string(1, level);
  }
  bomb += "method: grid\nparameters:\n  x:\n    values: *j\n";
  // A chain of 5000 merge keys, each merging the one before: bounded like nesting.
  std::string chain = "m0: &m0 {k0: 1}\n";
  for (int i = 1; i < 5000; ++i) {
    const std::string n = std::to_string(i), previous = std::to_string(i - 1);
    for (const std::string& piece : {std::string("m"), n, std::string(": &m"), n, std::string(" {<<: *m"), previous,
                                     std::string(", k"), n, std::string(": 1}\n")}) {
      chain.append(piece);  // (GCC 12 warns falsely on "literal" + string here)
    }
  }
  ParseOutcome merges = parse_sweep(chain + "method: grid\nparameters: {x: {values: [1]}}\n", Format::kYaml);
  REQUIRE(merges.problems.size() == 1);
  CHECK_MESSAGE(merges.problems[0].message.find("nested at most 64 levels deep once aliases are expanded") !=
                    std::string::npos,
                merges.problems[0].message);
  ParseOutcome b = parse_sweep(bomb, Format::kYaml);
  CHECK_FALSE(b.spec);
  REQUIRE(b.problems.size() == 1);
  CHECK(b.problems[0].message.find("aliases to copy at most 100000 values") != std::string::npos);
  CHECK(b.problems[0].line >= 1);
}

TEST_CASE("sweeps.yaml: mutated corpus files give a spec or problems, never a crash or a partial result") {
  std::vector<std::string> seeds;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kCorpus)) {
    if (entry.is_regular_file()) seeds.push_back(slurp(entry.path().string()));
  }
  REQUIRE(seeds.size() >= 20);
  const std::string bytes = " \t\n:-[]{},&*!|>'\"#%@`?<1e.";
  int checked = 0;
  for (uint64_t round = 0; round < 3000; ++round) {
    std::string text = seeds[round % seeds.size()];
    const uint64_t r = numeric::mix64(round + 1);
    const int edits = 1 + static_cast<int>(r % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const uint64_t x = numeric::mix64(r + static_cast<uint64_t>(e));
      const size_t at = x % text.size();
      switch ((x >> 32) % 3) {
        case 0: text[at] = bytes[(x >> 40) % bytes.size()]; break;
        case 1: text.insert(at, 1, bytes[(x >> 40) % bytes.size()]); break;
        default: text.erase(at, 1 + (x >> 48) % 8); break;
      }
    }
    for (Format f : {Format::kYaml, Format::kAuto}) {
      const ParseOutcome o = parse_sweep(text, f);
      CHECK(o.spec.has_value() == o.problems.empty());
      if (o.spec && trial_count(*o.spec).value_or(1) > 0) (void)trial_at(*o.spec, 0);
      ++checked;
    }
  }
  CHECK(checked == 6000);
}

TEST_CASE("sweeps.yaml: format by content - JSON text, YAML text, YAML flow style that is not JSON") {
  CHECK(detect_format("  {\"method\": \"grid\"}") == Format::kJson);
  CHECK(detect_format("method: grid") == Format::kYaml);
  CHECK(detect_format("# a comment\n{}") == Format::kYaml);
  const ParseOutcome flow = parse_sweep("{method: grid, parameters: {x: {values: [1, 2]}}}");
  REQUIRE(flow.spec);
  CHECK(flow.format == Format::kYaml);
  const ParseOutcome json_text = parse_sweep(R"({"method": "grid", "parameters": {"x": {"values": [1, 2]}}})");
  REQUIRE(json_text.spec);
  CHECK(json_text.format == Format::kJson);
  // Broken JSON stays a JSON problem (it is not a valid sweep as YAML either).
  const ParseOutcome broken = parse_sweep(R"({"method": "grid", "parameters": {,}})");
  REQUIRE(broken.problems.size() == 1);
  CHECK(broken.problems[0].message.find("expected valid JSON") == 0);
  // The JSON reader does not read YAML.
  CHECK_FALSE(parse_sweep("method: grid\nparameters: {x: {values: [1]}}\n", Format::kJson).spec);
}

TEST_CASE("sweeps.yaml: a checker's problem names the YAML line and column of its value") {
  const ParseOutcome o = parse_sweep("method: grid\nparameters:\n  lr:\n    min: 3\n    max: 1\n  wd: {values: []}\n",
                                     Format::kYaml);
  REQUIRE(o.problems.size() == 2);
  CHECK(o.problems[0].ToString() == "parameters.lr.max: expected max > min (3), found 1 (line 5, column 10)");
  CHECK(o.problems[1].ToString() ==
        "parameters.wd.values: expected a non-empty array of values, found an empty array (line 6, column 16)");
}

TEST_CASE("sweeps.yaml: each example's YAML twin reads as its JSON original") {
  int twins = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SWEPT_SOURCE_DIR "/examples")) {
    if (entry.path().extension() != ".json") continue;
    std::filesystem::path twin = entry.path();
    twin.replace_extension(".yaml");
    INFO(entry.path().string());
    REQUIRE_MESSAGE(std::filesystem::exists(twin), "no YAML twin " << twin.string());
    const ParseOutcome a = parse_sweep(slurp(entry.path().string()), Format::kJson);
    const ParseOutcome b = parse_sweep(slurp(twin.string()), Format::kYaml);
    REQUIRE_MESSAGE(a.spec, shown(a));
    REQUIRE_MESSAGE(b.spec, shown(b));
    // The one warning an example may carry: the one every W&B file with
    // `method: custom` gets (examples/multi-objective.yaml, engine optuna).
    for (const auto& w : b.warnings) CHECK_MESSAGE(w.path == "scheduler.engine", w.ToString());
    CHECK(describe(*a.spec) == describe(*b.spec));
    CHECK(a.spec->command == b.spec->command);
    CHECK(a.spec->seed == b.spec->seed);
    const auto ta = all_trials(*a.spec, 50), tb = all_trials(*b.spec, 50);
    REQUIRE(ta.size() == tb.size());
    for (size_t i = 0; i < ta.size(); ++i) CHECK_MESSAGE(same_typed(ta[i], tb[i]), i << ": " << ta[i] << " vs " << tb[i]);
    ++twins;
  }
  CHECK(twins >= 7);
}

}  // namespace
}  // namespace swept::sweeps
