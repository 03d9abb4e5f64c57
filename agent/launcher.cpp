// PosixLauncher: clone(CLONE_VM | CLONE_VFORK) + immediate exec with an argv
// array, one process group per trial.
//
// Why not posix_spawn: a trial must die with its agent (PR_SET_PDEATHSIG),
// which posix_spawn cannot set. Why not fork: fork copies the page tables of
// the whole process (in `swept run`, the scheduler, the dashboard and their
// threads too), which made starting a trial cost milliseconds. So, like
// glibc's posix_spawn, the child shares the agent's memory on a stack of its
// own until it execs, while the launching thread waits (CLONE_VFORK). The
// child therefore makes only async-signal-safe system calls on memory
// prepared before the clone and writes nothing the parent reads but errno
// through the pipe; every signal is blocked across the clone so that no
// handler of the agent's runs in the child before it resets them. An exec failure (ENOENT, EACCES) comes back through a close-on-exec
// pipe, so a bad command is an error value here, never a half-started child.
#include "agent/launcher.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <pthread.h>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace swept::agent {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

Status errno_status(const std::string& what, int err) {
  return Status::IoError(what + ": " + std::strerror(err));
}

// Closes the descriptors it holds unless released.
struct FdPair {
  int read_end = -1;
  int write_end = -1;
  ~FdPair() {
    if (read_end >= 0) ::close(read_end);
    if (write_end >= 0) ::close(write_end);
  }
};

// Both ends close-on-exec; the read end non-blocking unless asked otherwise.
Status make_pipe(FdPair& p, bool nonblocking_read = true) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno_status("pipe2", errno);
  p.read_end = fds[0];
  p.write_end = fds[1];
  if (!nonblocking_read) return Status::Ok();
  int flags = ::fcntl(p.read_end, F_GETFL);
  if (flags < 0 || ::fcntl(p.read_end, F_SETFL, flags | O_NONBLOCK) != 0) return errno_status("fcntl", errno);
  return Status::Ok();
}

// The agent's environment with the overrides applied, as "KEY=VALUE" strings.
std::vector<std::string> build_environment(const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    std::string_view key = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& [k, v] : overrides) overridden = overridden || key == k;
    if (!overridden) env.emplace_back(entry);
  }
  for (const auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> c_array(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// What the forked child does, prepared before the fork.
struct ChildPlan {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* working_dir = nullptr;  // null: stay where the agent is
  int stdout_fd = -1;
  int stderr_fd = -1;
  int error_fd = -1;  // close-on-exec; gets errno if the child fails before exec
  pid_t parent_pid = -1;
};

[[noreturn]] void child_failed(int error_fd) {
  int e = errno;
  ssize_t ignored = ::write(error_fd, &e, sizeof e);
  (void)ignored;
  ::_exit(127);
}

// Runs in the cloned child of a possibly multi-threaded agent, on its own
// stack but in the agent's memory: only async-signal-safe system calls, no
// allocation, no locks, no writes to shared memory, then exec.
[[noreturn]] void exec_child(const ChildPlan& plan) {
  // The trial dies with the agent (even by SIGKILL): an unsupervised trial
  // would keep its GPU and race its own retry for the checkpoint directory.
  // (The signal follows the spawning thread: run_agent's, which outlives
  // every child it starts.)
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_failed(plan.error_fd);
  if (::getppid() != plan.parent_pid) ::_exit(127);  // the agent is already gone
  if (::setpgid(0, 0) != 0) child_failed(plan.error_fd);

  // Default dispositions and an empty mask, whatever the agent's threads had.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &default_action, nullptr);  // EINVAL for reserved ones
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  int devnull = ::open("/dev/null", O_RDONLY);  // 0, 1, 2 are open: this is >= 3
  if (devnull < 0 || ::dup2(devnull, STDIN_FILENO) < 0) child_failed(plan.error_fd);
  if (::dup2(plan.stdout_fd, STDOUT_FILENO) < 0 || ::dup2(plan.stderr_fd, STDERR_FILENO) < 0) {
    child_failed(plan.error_fd);
  }
  // Every other descriptor (other trials' pipes, sockets) closes at exec; the
  // error pipe stays usable until then.
  if (::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // kernels before 5.11
  }
  if (plan.working_dir && ::chdir(plan.working_dir) != 0) child_failed(plan.error_fd);
  ::execve(plan.path, plan.argv, plan.envp);
  child_failed(plan.error_fd);
}

int child_entry(void* plan) { exec_child(*static_cast<const ChildPlan*>(plan)); }

// Starts the child on a private stack sharing the agent's memory; returns
// once it has exec'd or exited (CLONE_VFORK). Returns the pid, or -errno.
pid_t clone_and_exec(const ChildPlan& plan) {
  constexpr size_t kChildStackBytes = 256 * 1024;
  void* stack = ::mmap(nullptr, kChildStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -errno;
  sigset_t all, previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  pid_t pid = ::clone(child_entry, static_cast<char*>(stack) + kChildStackBytes,
                      CLONE_VM | CLONE_VFORK | SIGCHLD, const_cast<ChildPlan*>(&plan));
  int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::munmap(stack, kChildStackBytes);
  return pid < 0 ? -clone_errno : pid;
}

}  // namespace

std::string self_exe_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return exe.parent_path().string();
}

Result<std::string> resolve_command(const std::string& name, const std::string& self_dir,
                                    const std::string& path_env) {
  if (name.empty()) return Status::InvalidArgument("the trial's command is empty");
  auto found = [&](const std::string& path) -> Result<std::string> {
    if (is_executable_file(path)) return path;
    return Status::FailedPrecondition("permission denied: " + path + " is not an executable file");
  };
  if (name == "swept-train" && !self_dir.empty()) {
    std::string beside = self_dir + "/swept-train";
    if (is_executable_file(beside)) return beside;
  }
  if (name.find('/') != std::string::npos) {
    std::string path = name;
    if (path[0] != '/') {
      std::error_code ec;
      path = (std::filesystem::current_path(ec) / name).lexically_normal().string();
    }
    if (!exists(path)) return Status::NotFound("command not found: " + name);
    return found(path);
  }
  size_t begin = 0;
  while (begin <= path_env.size()) {
    size_t end = path_env.find(':', begin);
    if (end == std::string::npos) end = path_env.size();
    std::string dir = path_env.substr(begin, end - begin);
    // POSIX: an empty PATH entry is the current directory.
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  return Status::NotFound("command not found: " + name + " (not in PATH=" + path_env + ")");
}

Result<SpawnedChild> PosixLauncher::launch(const LaunchSpec& spec) {
  if (spec.argv.empty()) return Status::InvalidArgument("the trial's command is empty");
  const char* path_env = std::getenv("PATH");
  static const std::string own_dir = self_exe_dir();  // the executable does not move: read it once
  auto program = resolve_command(spec.argv[0], own_dir, path_env ? path_env : "/usr/bin:/bin");
  if (!program.ok()) return program.status();
  if (!spec.working_dir.empty() && !exists(spec.working_dir)) {
    return Status::NotFound("trial working directory " + spec.working_dir + " does not exist");
  }

  FdPair out, err, exec_error;
  SWEPT_RETURN_IF_ERROR(make_pipe(out));
  SWEPT_RETURN_IF_ERROR(make_pipe(err));
  SWEPT_RETURN_IF_ERROR(make_pipe(exec_error, /*nonblocking_read=*/false));

  // Everything the child needs is built here: after the clone it allocates nothing.
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<std::string> env_strings = build_environment(spec.env_overrides);
  auto argv = c_array(argv_strings);
  auto envp = c_array(env_strings);
  ChildPlan plan;
  plan.path = program->c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.working_dir = spec.working_dir.empty() ? nullptr : spec.working_dir.c_str();
  plan.stdout_fd = out.write_end;
  plan.stderr_fd = err.write_end;
  plan.error_fd = exec_error.write_end;
  plan.parent_pid = ::getpid();

  pid_t pid = clone_and_exec(plan);
  if (pid < 0) return errno_status("clone", -pid);

  ::setpgid(pid, pid);  // also here, so the group exists whichever runs first
  ::close(exec_error.write_end);
  exec_error.write_end = -1;
  // The error pipe closes at a successful exec (close-on-exec) and carries
  // the errno of a failed one.
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_error.read_end, &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (child_errno == ENOENT) return Status::NotFound("command not found: " + spec.argv[0]);
    if (child_errno == EACCES) return Status::FailedPrecondition("permission denied: " + *program);
    if (child_errno == ENOEXEC) return Status::FailedPrecondition("not an executable format: " + *program);
    return errno_status("cannot start " + *program, child_errno);
  }

  SpawnedChild child;
  child.pid = pid;
  // pidfd_open on a not-yet-reaped child cannot race with pid reuse.
  child.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  child.stdout_fd = out.read_end;
  child.stderr_fd = err.read_end;
  out.read_end = -1;
  err.read_end = -1;
  return child;  // the write ends close with `out` and `err`: only the child holds them now
}

}  // namespace swept::agent
