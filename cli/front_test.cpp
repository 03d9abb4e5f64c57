// `swept best`, `swept trials` and `swept status` on a sweep with several
// objectives and a constraint (issue 28), run as the real binary: a grid
// sweep whose trial program prints hand-chosen values, run with `swept run`,
// then read back with --db. The front, the hypervolume and the infeasible
// trial are computed by hand below.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/exit_codes.h"

namespace {

// The sweep's trials: case -> (loss, acc, mem). Against loss down, acc up
// and mem at most 8: cases 0, 1 and 2 are the front (0 and 2 are equal,
// both on it), 3 would dominate them all but violates mem, 4 is dominated.
constexpr const char* kTrialProgram = R"(#!/usr/bin/env python3
import json, sys
case = int(sys.argv[1].split("=")[1])
loss, acc, mem = {0: (1, 0.5, 4), 1: (2, 0.9, 4), 2: (1, 0.5, 8), 3: (0.5, 0.95, 16), 4: (3, 0.4, 4)}[case]
print(json.dumps({"step": 1, "loss": loss, "acc": acc, "mem": mem}), flush=True)
)";

struct Output {
  int exit_code = -1;
  std::string out;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command line, stdout captured (stderr joins it, for the messages of failures).
Output shell(const std::string& cmd) {
  Output o;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) o.out.append(buf, n);
  const int status = ::pclose(p);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

std::string swept_bin() { return quote(SWEPT_BINARY_DIR "/bin/swept"); }

}  // namespace

TEST_CASE("cli: best, trials and status show a sweep's Pareto front, its hypervolume and infeasible trials") {
  const std::string dir = SWEPT_BINARY_DIR "/cli-test/front-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string program = dir + "/trial.py";
  std::ofstream(program) << kTrialProgram;
  std::filesystem::permissions(program, std::filesystem::perms::owner_all);
  std::ofstream(dir + "/sweep.yaml") << "method: grid\n"
                                        "metrics:\n"
                                        "  - {name: loss, goal: minimize}\n"
                                        "  - {name: acc, goal: maximize}\n"
                                        "constraints:\n"
                                        "  - {name: mem, max: 8}\n"
                                        "command:\n  - "
                                     << program
                                     << "\n  - ${args}\n"
                                        "parameters:\n"
                                        "  case: {values: [0, 1, 2, 3, 4]}\n";
  const std::string db = quote(dir + "/s.db");
  const Output run = shell(swept_bin() + " run " + quote(dir + "/sweep.yaml") + " --db " + db + " --workdir " +
                           quote(dir + "/work") + " --dashboard off --progress off");
  INFO(run.out);
  REQUIRE(run.exit_code == swept::kExitOk);

  // Trial ids by case, as `swept trials --json` gives them.
  const Output trials_json = shell(swept_bin() + " trials 1 --json --db " + db);
  REQUIRE(trials_json.exit_code == swept::kExitOk);
  std::map<int, int64_t> id_of;
  for (const auto& t : nlohmann::json::parse(trials_json.out)) id_of[t["params"]["case"].get<int>()] = t["id"];
  REQUIRE(id_of.size() == 5);

  // --json: the front as a list of trials, each with its objectives.
  const Output best_json = shell(swept_bin() + " best 1 --json --db " + db);
  INFO(best_json.out);
  REQUIRE(best_json.exit_code == swept::kExitOk);
  const auto front = nlohmann::json::parse(best_json.out);
  REQUIRE(front.is_array());
  REQUIRE(front.size() == 3);
  CHECK(front[0]["id"] == id_of[0]);
  CHECK(front[1]["id"] == id_of[1]);
  CHECK(front[2]["id"] == id_of[2]);
  CHECK(front[1]["objectives"]["loss"] == 2);
  CHECK(front[1]["objectives"]["acc"] == 0.9);
  CHECK(front[0]["feasible"] == true);

  // As text: each front trial with every objective.
  const Output best = shell(swept_bin() + " best 1 --db " + db);
  INFO(best.out);
  CHECK(best.exit_code == swept::kExitOk);
  CHECK(best.out.find("Pareto front of sweep 1: 3 trials (objectives: loss (minimize) acc (maximize))") !=
        std::string::npos);
  CHECK(best.out.find("trial " + std::to_string(id_of[1]) + " (index 1): loss=2 acc=0.9") != std::string::npos);
  CHECK(best.out.find("trial " + std::to_string(id_of[3])) == std::string::npos);

  // The table marks the infeasible trial and shows the objectives.
  const Output trials = shell(swept_bin() + " trials 1 --db " + db);
  INFO(trials.out);
  std::istringstream lines(trials.out);
  int marked = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("infeasible") == std::string::npos) continue;
    ++marked;
    CHECK(line.rfind(std::to_string(id_of[3]) + " ", 0) == 0);
    CHECK(line.find("completed (infeasible: mem)") != std::string::npos);
    CHECK(line.find("loss=0.5 acc=0.95") != std::string::npos);
  }
  CHECK(marked == 1);

  // Status: the front's size and its hypervolume against the worst values
  // seen, (3, 0.4): boxes from (1, 0.5) and (2, 0.9), 0.2 + 0.5 - 0.1.
  const Output status = shell(swept_bin() + " status 1 --db " + db);
  INFO(status.out);
  CHECK(status.exit_code == swept::kExitOk);
  CHECK(status.out.find("constraints: mem <= 8") != std::string::npos);
  CHECK(status.out.find("Pareto front: 3 trials of 5 completed with every objective (1 infeasible); hypervolume 0.6 "
                        "against the reference point (3, 0.4)") != std::string::npos);
  const Output list = shell(swept_bin() + " status --db " + db);
  CHECK(list.out.find("front of 3") != std::string::npos);

  // The CSV export says which trials are feasible, and what they violate.
  const Output csv = shell(swept_bin() + " export 1 --format csv --db " + db);
  INFO(csv.out);
  REQUIRE(csv.exit_code == swept::kExitOk);
  std::istringstream rows(csv.out);
  std::string header;
  std::getline(rows, header);
  CHECK(header.size() > 18);
  CHECK(header.compare(header.size() - 18, 18, ",feasible,violated") == 0);
  int feasible = 0, infeasible = 0;
  for (std::string row; std::getline(rows, row);) {
    if (row.size() >= 6 && row.compare(row.size() - 6, 6, ",true,") == 0) ++feasible;
    if (row.rfind(std::to_string(id_of[3]) + ",", 0) == 0) {
      CHECK(row.size() >= 10);
      CHECK(row.compare(row.size() - 10, 10, ",false,mem") == 0);
      ++infeasible;
    }
  }
  CHECK(feasible == 4);
  CHECK(infeasible == 1);
}
