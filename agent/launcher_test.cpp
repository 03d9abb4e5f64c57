// Tests of the launcher with real tiny processes: argv without a shell, the
// environment, process groups, descriptors, and commands that do not exist.
#include "agent/launcher.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <optional>
#include <thread>

#include "agent/test_util.h"
#include "common/testing/eventually.h"

using namespace swept::agent;
using swept::agent::testing::TempDir;

namespace {

struct Finished {
  std::string out, err;
  int status = 0;
  bool ok = false;  // exited within the deadline
};

// Reads both pipes to their end and reaps the child, within a deadline.
Finished collect(const SpawnedChild& child) {
  Finished f;
  int fds[2] = {child.stdout_fd, child.stderr_fd};
  std::string* sinks[2] = {&f.out, &f.err};
  bool open[2] = {true, true};
  swept::testing::eventually(
      [&] {
        std::vector<int> live;
        for (int i = 0; i < 2; ++i)
          if (open[i]) live.push_back(fds[i]);
        swept::agent::testing::poll_readable(live, 100);
        for (int i = 0; i < 2; ++i) {
          while (open[i]) {
            char buf[4096];
            ssize_t n = ::read(fds[i], buf, sizeof buf);
            if (n > 0) {
              sinks[i]->append(buf, static_cast<size_t>(n));
            } else if (n == 0 || errno != EINTR) {
              if (n == 0 || errno != EAGAIN) open[i] = false;
              break;
            }
          }
        }
        return !open[0] && !open[1];
      },
      20, swept::agent::testing::kNoPause);
  if (open[0] || open[1]) ::kill(-child.pid, SIGKILL);
  f.ok = !open[0] && !open[1];
  ::waitpid(child.pid, &f.status, 0);
  for (int fd : {child.stdout_fd, child.stderr_fd, child.pidfd})
    if (fd >= 0) ::close(fd);
  return f;
}

Finished run(const LaunchSpec& spec) {
  PosixLauncher launcher;
  auto child = launcher.launch(spec);
  REQUIRE_MESSAGE(child.ok(), child.status().ToString());
  return collect(*child);
}

void make_executable(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0755);
}

}  // namespace

TEST_CASE("agent launcher: argv reaches the program as written, without a shell") {
  TempDir dir;
  LaunchSpec spec;
  spec.argv = {"printf", "%s|", "a b", "$HOME", "*", "'quoted'", "`id`"};
  spec.working_dir = dir.path();
  Finished f = run(spec);
  REQUIRE(f.ok);
  CHECK(f.out == "a b|$HOME|*|'quoted'|`id`|");
  CHECK(WIFEXITED(f.status));
  CHECK(WEXITSTATUS(f.status) == 0);
}

TEST_CASE("agent launcher: environment overrides, working directory, stdin from /dev/null") {
  TempDir dir;
  ::setenv("SWEPT_TEST_INHERITED", "from-agent", 1);
  ::setenv("SWEPT_TEST_REPLACED", "old", 1);
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "echo \"$SWEPT_TEST_INHERITED,$SWEPT_TEST_REPLACED,$SWEPT_TEST_NEW,[${CUDA_VISIBLE_DEVICES-unset}]\"; "
               "pwd; cat; echo err >&2"};
  spec.env_overrides = {{"SWEPT_TEST_REPLACED", "new"}, {"SWEPT_TEST_NEW", "x y"}, {"CUDA_VISIBLE_DEVICES", ""}};
  spec.working_dir = dir.path();
  Finished f = run(spec);
  REQUIRE(f.ok);
  std::string real_dir = std::filesystem::canonical(dir.path()).string();
  CHECK(f.out == "from-agent,new,x y,[]\n" + real_dir + "\n");  // cat read nothing: stdin is /dev/null
  CHECK(f.err == "err\n");
}

TEST_CASE("agent launcher: the child leads its own process group") {
  TempDir dir;
  PosixLauncher launcher;
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo started; exec sleep 30"};
  spec.working_dir = dir.path();
  auto child = launcher.launch(spec);
  REQUIRE(child.ok());
  CHECK(::getpgid(child->pid) == child->pid);
  CHECK(::getpgid(child->pid) != ::getpgrp());
  CHECK(::kill(-child->pid, SIGTERM) == 0);  // the group exists and can be signalled
  Finished f = collect(*child);
  CHECK(f.ok);
  CHECK(WIFSIGNALED(f.status));
  CHECK(WTERMSIG(f.status) == SIGTERM);
}

TEST_CASE("agent launcher: the agent's other descriptors do not leak into the child") {
  TempDir dir;
  int leaky = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
  REQUIRE(leaky > 2);
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "if [ -e /proc/self/fd/" + std::to_string(leaky) + " ]; then echo leaked; else echo closed; fi"};
  spec.working_dir = dir.path();
  Finished f = run(spec);
  ::close(leaky);
  CHECK(f.out == "closed\n");
}

TEST_CASE("agent launcher: a command that does not exist is an error value, not a crash") {
  TempDir dir;
  PosixLauncher launcher;
  LaunchSpec spec;
  spec.argv = {"swept-no-such-command-xyz", "--flag"};
  spec.working_dir = dir.path();
  auto child = launcher.launch(spec);
  REQUIRE_FALSE(child.ok());
  CHECK(child.status().code() == swept::StatusCode::kNotFound);
  CHECK(child.status().message().find("command not found: swept-no-such-command-xyz") == 0);

  spec.argv = {"./no/such/path"};
  child = launcher.launch(spec);
  REQUIRE_FALSE(child.ok());
  CHECK(child.status().message() == "command not found: ./no/such/path");

  spec.argv = {};
  CHECK(launcher.launch(spec).status().code() == swept::StatusCode::kInvalidArgument);
}

TEST_CASE("agent launcher: a trial directory the host cannot make is the host's fault (Unavailable), a bad command "
          "the trial's") {
  TempDir dir;
  // A file where the trial's directory should go: mkdir fails with ENOTDIR,
  // as it would with ENOSPC or EROFS on a broken disk.
  std::ofstream(dir.path() + "/sweep-1") << "in the way";
  PosixLauncher launcher;
  LaunchSpec spec;
  spec.argv = {"/bin/true"};
  spec.working_dir = dir.path() + "/sweep-1/trial-1";
  spec.make_dirs = {spec.working_dir};
  auto child = launcher.launch(spec);
  REQUIRE(child.ok());
  swept::Status outcome = child->exec->outcome();
  collect(*child);
  CHECK(outcome.code() == swept::StatusCode::kUnavailable);
  CHECK_MESSAGE(outcome.message().find("cannot create the trial directory " + spec.working_dir) == 0, outcome.message());
  // The trial's own mistakes stay the trial's.
  spec.argv = {"swept-no-such-command-xyz"};
  CHECK(launcher.launch(spec).status().code() == swept::StatusCode::kNotFound);
  make_executable(dir.path() + "/not-a-program", "no shebang, no ELF\n");
  spec.argv = {dir.path() + "/not-a-program"};
  spec.working_dir = dir.path();
  spec.make_dirs.clear();
  child = launcher.launch(spec);
  REQUIRE(child.ok());
  outcome = child->exec->outcome();
  collect(*child);
  CHECK(outcome.code() != swept::StatusCode::kUnavailable);
}

TEST_CASE("agent launcher: resolve_command finds swept-train beside the program, then PATH") {
  TempDir self, bin;
  make_executable(bin.path() + "/tool", "#!/bin/sh\n");
  std::ofstream(bin.path() + "/not-exec") << "x";
  std::string path = "/nonexistent:" + bin.path();

  CHECK(*resolve_command("tool", self.path(), path) == bin.path() + "/tool");
  auto missing = resolve_command("swept-train", self.path(), path);
  CHECK(missing.status().code() == swept::StatusCode::kNotFound);
  make_executable(self.path() + "/swept-train", "#!/bin/sh\n");
  CHECK(*resolve_command("swept-train", self.path(), path) == self.path() + "/swept-train");

  auto not_exec = resolve_command(bin.path() + "/not-exec", self.path(), path);
  CHECK(not_exec.status().code() == swept::StatusCode::kFailedPrecondition);
  CHECK(not_exec.status().message().find("permission denied") == 0);
  CHECK(*resolve_command(bin.path() + "/tool", "", "") == bin.path() + "/tool");
}

TEST_CASE("agent launcher: the running program's directory is found") {
  std::string dir = self_exe_dir();
  REQUIRE_FALSE(dir.empty());
  CHECK(std::filesystem::exists(dir + "/agent_tests"));
}

TEST_CASE("agent launcher: a trial dies with the thread that launched it (the agent)") {
  TempDir dir;
  PosixLauncher launcher;
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "exec sleep 30"};
  spec.working_dir = dir.path();
  std::optional<swept::Result<SpawnedChild>> child;
  // The "agent" ends once its trial runs. (Before the exec is decided the
  // child may not have armed PR_SET_PDEATHSIG yet; run_agent's thread never
  // ends while it has children, see launcher.h.)
  std::thread([&] {
    child.emplace(launcher.launch(spec));
    if (child->ok()) CHECK((**child).exec->outcome().ok());
  }).join();
  REQUIRE(child->ok());
  const SpawnedChild& c = **child;
  bool exited = swept::testing::eventually(
      [&] {
        swept::agent::testing::poll_readable({c.pidfd}, 100);
        siginfo_t info{};
        return ::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0;
      },
      20, swept::agent::testing::kNoPause);
  if (!exited) ::kill(c.pid, SIGKILL);
  CHECK(exited);
  Finished f = collect(c);
  CHECK(WIFSIGNALED(f.status));
  CHECK(WTERMSIG(f.status) == SIGKILL);
}
