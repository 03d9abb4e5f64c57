// Test harness for the integration tests: real `swept scheduler` and
// `swept agent` processes on loopback (ports picked at run time), a temporary
// directory per test, read-only queries of the scheduler's database, and
// waiting on conditions with deadlines (never fixed sleeps).
// Test-only code.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "common/testing/eventually.h"
#include "common/testing/temp_dir.h"

extern char** environ;

namespace swept::itest {

inline const std::string kSwept = std::string(SWEPT_BINARY_DIR) + "/bin/swept";
inline const std::string kTestsDir = std::string(SWEPT_SOURCE_DIR) + "/tests";

// The tests' one temporary directory (common/testing/temp_dir.h), required
// to exist.
class TempDir : public ::swept::testing::TempDir {
 public:
  TempDir() : ::swept::testing::TempDir("swept-itest") { REQUIRE(!path().empty()); }
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Waiting on a condition with a deadline: the tests' one helper.
using swept::testing::eventually;

// A child process with stdout and stderr in files; killed (SIGKILL) on scope exit.
class Process {
 public:
  Process(std::vector<std::string> argv, const std::string& log_path) : log_(log_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    int rc = posix_spawn(&pid_, cargv[0], &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
  }
  ~Process() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::kill(pid_, SIGCONT);
      wait();
    }
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) { ::kill(pid_, sig); }
  // Waits for the exit (up to `seconds`); returns the exit code, 128+signal, or -1 on timeout.
  int wait(double seconds = 30) {
    if (exited_) return status_;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      int st = 0;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  bool running() {
    if (exited_) return false;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      exited_ = true;
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return false;
    }
    return true;
  }
  std::string log() const { return read_file(log_); }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = -1;
  std::string log_;
};

// Runs a command to completion; returns its exit code, its output in *out.
inline int run_command(std::vector<std::string> argv, const std::string& log_path, std::string* out = nullptr,
                       double seconds = 60) {
  std::filesystem::remove(log_path);
  Process p(std::move(argv), log_path);
  int rc = p.wait(seconds);
  if (out) *out = p.log();
  return rc;
}

// Read-only queries of the scheduler's database while it runs.
inline int64_t db_int(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(h);
    return -1;
  }
  sqlite3_busy_timeout(h, 2000);
  sqlite3_stmt* st = nullptr;
  int64_t v = -1;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

inline std::string db_text(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  std::string v;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(h, 2000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(st, 0);
      if (t) v = reinterpret_cast<const char*>(t);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(h);
  return v;
}

// A scheduler process on a port of its choosing (or a given endpoint).
struct Scheduler {
  std::string db, endpoint;
  std::unique_ptr<Process> process;
  Scheduler(const TempDir& dir, const std::string& bind = "tcp://127.0.0.1:*", int grace_ms = 20000) {
    db = dir / "swept.db";
    std::string endpoint_file = dir / ("endpoint-" + std::to_string(std::rand()));
    process = std::make_unique<Process>(
        std::vector<std::string>{kSwept, "scheduler", "--bind", bind, "--db", db, "--heartbeat-ms", "100",
                                 "--liveness", "5", "--recovery-grace-ms", std::to_string(grace_ms),
                                 "--endpoint-file", endpoint_file},
        dir / "scheduler.log");
    REQUIRE_MESSAGE(eventually([&] { return std::filesystem::exists(endpoint_file); }, 20), process->log());
    endpoint = read_file(endpoint_file);
    while (!endpoint.empty() && (endpoint.back() == '\n')) endpoint.pop_back();
  }
};

// An agent process with fake GPUs and fast heartbeats and reconnects.
inline std::unique_ptr<Process> start_agent(const TempDir& dir, const std::string& endpoint, const std::string& name,
                                            const std::string& gpus = "none", int slots = 2) {
  return std::make_unique<Process>(
      std::vector<std::string>{kSwept, "agent", "--scheduler", endpoint, "--name", name, "--gpus", gpus, "--slots",
                               std::to_string(slots), "--workdir", dir / ("work-" + name), "--heartbeat-ms", "100",
                               "--liveness", "5", "--reconnect-min-ms", "100", "--reconnect-max-ms", "400",
                               "--stop-grace-ms", "500", "--metrics-flush-ms", "50"},
      dir / ("agent-" + name + ".log"));
}

// Submits a sweep file's text through `swept submit`; returns the sweep id.
inline int64_t submit(const TempDir& dir, const std::string& endpoint, const std::string& spec) {
  std::string file = dir / ("sweep-" + std::to_string(std::rand()) + ".json");
  write_file(file, spec);
  std::string out;
  int rc = run_command({kSwept, "submit", file, "--scheduler", endpoint}, dir / "submit.log", &out);
  REQUIRE_MESSAGE(rc == 0, out);
  return std::stoll(out);
}

// The invariants every failure test ends with: every trial final, none
// completed twice, no metric row duplicated.
inline void check_final_invariants(const std::string& db, int64_t sweep) {
  std::string s = std::to_string(sweep);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE sweep_id=" + s +
                       " AND state NOT IN ('completed','failed','stopped')") == 0);
  CHECK(db_int(db, "SELECT COUNT(*) FROM (SELECT trial_id FROM attempts WHERE state='completed' GROUP BY trial_id "
                   "HAVING COUNT(*) > 1)") == 0);
  CHECK(db_int(db, "SELECT COUNT(*) FROM (SELECT trial_id, name, step FROM metrics GROUP BY 1, 2, 3 HAVING COUNT(*) > 1)") ==
        0);
  CHECK(db_int(db, "SELECT COUNT(*) FROM sweeps WHERE id=" + s + " AND state='completed'") == 1);
}

inline bool sweep_done(const std::string& db, int64_t sweep) {
  return db_int(db, "SELECT COUNT(*) FROM sweeps WHERE id=" + std::to_string(sweep) + " AND state='completed'") == 1;
}

}  // namespace swept::itest
