// Tests of the store when its files are taken away under a running writer
// (issue 15, item 7): the -shm index truncated mid-sweep must end the process
// with a message and exit code 1, never a silent SIGBUS; a WAL that cannot be
// checkpointed is reported once, with its size. Each case runs the writer in
// a forked child, whose stderr (the log) and exit the test reads.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <string>

#include "common/exit_codes.h"
#include "store/test_support.h"
#include "store/writer.h"

using namespace swept::store;

namespace {

struct ChildResult {
  int wait_status = 0;
  std::string stderr_text;
};

// Runs `body` in a forked child (exit 0 when it returns) and collects its stderr.
ChildResult run_in_child(const std::function<void()>& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    body();
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildResult r;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.stderr_text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  while (::waitpid(pid, &r.wait_status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

swept::SweepRow sweep(int i) {
  swept::SweepRow s;
  s.name = std::to_string(i);
  s.method = "grid";
  s.spec = std::string(2000, 'x');  // a page's worth per commit, so the WAL grows
  s.created_at = i;
  return s;
}

// Commits `n` transactions of one sweep each; exits 3 on the first error.
void write_sweeps(Writer& w, int from, int n) {
  for (int i = from; i < from + n; ++i) {
    if (!w.begin().ok() || !w.insert_sweep(sweep(i)).ok() || !w.commit().ok()) ::_exit(3);
  }
}

}  // namespace

TEST_CASE("store: the -shm file truncated under the writer ends it with a message and exit 1, not a silent SIGBUS") {
  testing::TempDb db;
  ChildResult r = run_in_child([&] {
    auto w = Writer::open(db.path);
    if (!w.ok()) ::_exit(4);
    write_sweeps(**w, 0, 20);
    // What an operator's `truncate`, or a failing disk, does to the mapped index.
    if (::truncate((db.path + "-shm").c_str(), 0) != 0) ::_exit(5);
    write_sweeps(**w, 20, 20);
    ::_exit(6);  // SQLite noticed without touching the mapping: not the case under test
  });
  INFO("child stderr: " << r.stderr_text);
  REQUIRE_FALSE(WIFSIGNALED(r.wait_status));  // before the guard: killed by SIGBUS (7), no word
  REQUIRE(WIFEXITED(r.wait_status));
  CHECK(WEXITSTATUS(r.wait_status) == swept::kExitFailure);
  CHECK(r.stderr_text.find("SIGBUS") != std::string::npos);
  CHECK(r.stderr_text.find(db.path + "-shm") != std::string::npos);  // the file that went away, named
  CHECK(r.stderr_text.find("start the scheduler again") != std::string::npos);
}

TEST_CASE("store: a WAL that cannot be checkpointed is reported once, with its size, and when it can again") {
  testing::TempDb db;
  ChildResult r = run_in_child([&] {
    WriterOptions options;
    options.wal_checkpoint_pages = 10;
    options.wal_warn_pages = 40;
    auto w = Writer::open(db.path, options);
    if (!w.ok()) ::_exit(4);
    write_sweeps(**w, 0, 2);
    // A reader that keeps a snapshot open: no checkpoint can pass it.
    sqlite3* reader = nullptr;
    sqlite3_open_v2(db.path.c_str(), &reader, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* st = nullptr;
    sqlite3_exec(reader, "BEGIN", nullptr, nullptr, nullptr);
    sqlite3_prepare_v2(reader, "SELECT count(*) FROM sweeps", -1, &st, nullptr);
    if (sqlite3_step(st) != SQLITE_ROW) ::_exit(7);
    write_sweeps(**w, 2, 150);
    // The reader lets go: the next checkpoint completes, the log restarts.
    sqlite3_finalize(st);
    sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(reader);
    write_sweeps(**w, 152, 60);
  });
  INFO("child stderr: " << r.stderr_text);
  REQUIRE(WIFEXITED(r.wait_status));
  CHECK(WEXITSTATUS(r.wait_status) == 0);
  const std::string& log = r.stderr_text;
  size_t warn = log.find("cannot be checkpointed");
  REQUIRE(warn != std::string::npos);
  CHECK(log.find("cannot be checkpointed", warn + 1) == std::string::npos);  // once
  CHECK(log.find(db.path + "-wal") != std::string::npos);
  CHECK(log.find(" MiB (") != std::string::npos);
  CHECK(log.find("a reader keeps an older snapshot open") != std::string::npos);
  CHECK(log.find("checkpointed again") != std::string::npos);
}
