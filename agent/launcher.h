// Launcher: starts one trial as a child process.
//
// Invariants of every child started by PosixLauncher:
//  - it runs an argv array with execve (never a shell), so parameters with
//    spaces, quotes or `$` reach the program as written;
//  - it leads its own process group (pgid == pid), so a stop signal sent to
//    -pid reaches everything the trial started;
//  - stdin is /dev/null, stdout and stderr are pipes whose read ends (non-
//    blocking, close-on-exec) the caller owns; every other descriptor of the
//    agent is closed in the child, so no trial holds another's pipes open;
//  - signal dispositions are default and the signal mask empty, whatever the
//    spawning thread had (`swept run` is multi-threaded);
//  - the environment is the agent's, with the overrides applied;
//  - it gets SIGKILL when the thread that launched it ends (PR_SET_PDEATHSIG),
//    so an agent killed with SIGKILL leaves no unsupervised trial behind.
//    The child arms this first thing; a child whose agent process died
//    before that exits at once. (A launching thread that ended, in a process
//    that lives on, before its child armed it would leave that child
//    running: the thread must outlive its children, as run_agent's does.)
// A child with a cgroup is created inside it where the kernel can (clone3
// with CLONE_INTO_CGROUP), else it moves itself there first thing.
// The child shares the agent's memory until it execs, like posix_spawn's, and
// makes only raw system calls in between (no libc state touched, not even
// errno: safe in a multi-threaded process). Unlike posix_spawn, the agent
// does not wait for the exec: launch() returns once the child exists, and
// ExecWatch reports later whether the exec succeeded. Starting a program
// takes the kernel a while on a busy machine, and an agent blocked for it
// could neither start nor reap its other trials meanwhile.
// Thread safety: launch() may be called from any thread; the thread must
// outlive the child (the agent's event loop does).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/run_as.h"
#include "common/status.h"

namespace swept::agent {

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is resolved with resolve_command()
  // Set (or replaced) on top of the agent's own environment.
  std::vector<std::pair<std::string, std::string>> env_overrides;
  std::string working_dir;  // the child starts there; must exist unless it is in make_dirs
  // Directories the child creates before it execs, in order (one that
  // exists already is fine), then a file it writes (created or truncated).
  // On a slow filesystem each costs ~0.1 ms, which the agent's loop would
  // otherwise spend per trial: in the child it runs beside the loop.
  std::vector<std::string> make_dirs;
  std::string file_path;  // empty: none
  std::string file_content;
  // The trial's cgroup v2 (agent/containment.h), two ways to enter it:
  // `cgroup_fd`, a descriptor of its directory (borrowed: open until launch()
  // returns), makes the kernel create the child in it (clone3 with
  // CLONE_INTO_CGROUP, Linux 5.7+): it is inside from its first instruction
  // and no migration takes place. Where the kernel refuses that (an older
  // kernel, or no clone3 in this build for the CPU), or with
  // SWEPT_AGENT_CLONE_INTO_CGROUP=0 in the agent's environment, the child
  // writes "0" into `cgroup_procs` (the cgroup's `cgroup.procs` file) before
  // anything else instead; a failure there is a failed launch. Empty / -1:
  // no cgroup.
  std::string cgroup_procs;
  int cgroup_fd = -1;
  // The cgroup.procs files of the trial's cgroup v1 directories (its limits,
  // agent/limits.h), which the child writes "0" into first thing, however it
  // entered the one above; a failure there is a failed launch (Unavailable).
  std::vector<std::string> more_cgroup_procs;
  // Non-null: the child becomes this user once in its cgroups, with the
  // directories of make_dirs (made as root) handed to it; it then writes
  // file_path, enters working_dir and execs as that user, so no trial file
  // is written by root where the trial could have planted a link. Borrowed
  // until launch() returns.
  const RunAs* run_as = nullptr;
};

// Until a launched child has exec'd, it runs on memory of the agent's (its
// stack, argv and environment); ExecWatch owns that memory and the pipe on
// which the child reports the exec. Its destructor waits for the exec to be
// decided if nobody asked yet, so the memory is never freed under the child.
class ExecWatch {
 public:
  ExecWatch() = default;
  ~ExecWatch();
  ExecWatch(const ExecWatch&) = delete;
  ExecWatch& operator=(const ExecWatch&) = delete;

  // Ok if the program runs, or why it did not start: NotFound,
  // FailedPrecondition (EACCES, ENOEXEC): the trial's command is wrong;
  // Unavailable: the host's fault (a directory or the file of LaunchSpec
  // could not be made or entered, out of memory or processes, a disk
  // error); IoError: any other exec failure. Such a child exits with status 127
  // at once. Blocks until the exec is decided, so ask once the child has
  // exited (then it returns at once) or when it must be known now. Later
  // calls return the same answer. After a successful exec the memory is
  // freed; after a failure it is kept until the watch is destroyed, which
  // must then wait until the child has been reaped.
  Status outcome();

 private:
  friend class PosixLauncher;
  struct Memory;
  std::unique_ptr<Memory> memory_;
  int fd_ = -1;
  std::optional<Status> outcome_;
};

// What a successful launch hands over. The caller owns the descriptors and
// must close them, and must reap the child (waitpid) exactly once.
struct SpawnedChild {
  pid_t pid = -1;      // also the process group id
  int pidfd = -1;      // readable when the child exits; -1 if the kernel lacks pidfd_open
  int stdout_fd = -1;  // read end, O_NONBLOCK
  int stderr_fd = -1;  // read end, O_NONBLOCK
  // Whether the exec succeeded (see ExecWatch); null for fakes in tests,
  // which means it did.
  std::shared_ptr<ExecWatch> exec;
  // True when the kernel created the child in LaunchSpec::cgroup_fd's cgroup
  // (clone3); false when it entered through cgroup_procs, or had no cgroup.
  bool born_in_cgroup = false;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  // Starts the child. NotFound("command not found: X ...") when argv[0]
  // cannot be resolved, FailedPrecondition when it is not executable,
  // InvalidArgument for an empty argv, Unavailable when the host cannot
  // start a process now (pipe, memory or clone refused: a host fault). An exec
  // that fails after these checks (a file of an unknown format, a missing
  // #! interpreter) is reported by SpawnedChild::exec instead.
  virtual Result<SpawnedChild> launch(const LaunchSpec& spec) = 0;
};

class PosixLauncher final : public Launcher {
 public:
  // Reads SWEPT_AGENT_CLONE_INTO_CGROUP once: "0" makes every child enter its
  // cgroup through cgroup.procs (the fallback path; tests and benchmarks
  // compare the two with it).
  PosixLauncher();
  Result<SpawnedChild> launch(const LaunchSpec& spec) override;

 private:
  bool clone_into_cgroup_ = true;
};

// Finds the executable for argv[0]:
//  - "swept-train" is the swept-train beside the running program (in
//    `self_dir`) when that file exists, so the built-in trainer runs without
//    PATH set up; otherwise it is looked up like any name;
//  - a name with a '/' is a path: relative ones are taken from the agent's
//    current directory (not the trial's), made absolute;
//  - any other name is searched in `path_env` (the agent's PATH).
// NotFound "command not found: X" when nothing matches; FailedPrecondition
// when the file exists but is not executable.
Result<std::string> resolve_command(const std::string& name, const std::string& self_dir,
                                    const std::string& path_env);

// The directory of the running executable (/proc/self/exe), "" if unknown.
std::string self_exe_dir();

}  // namespace swept::agent
