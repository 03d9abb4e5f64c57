// PosixLauncher: clone(CLONE_VM) + immediate exec with an argv array, one
// process group per trial; the agent learns the exec's outcome later.
//
// Why not posix_spawn: a trial must die with its agent (PR_SET_PDEATHSIG),
// which posix_spawn cannot set, and posix_spawn blocks its caller until the
// child has exec'd (CLONE_VFORK): on a loaded machine that is a millisecond
// or more per trial in which the agent can do nothing else. Why not fork:
// fork copies the page tables of the whole process (in `swept run`, the
// scheduler, the dashboard and their threads too), which costs as much.
// So the child shares the agent's memory on a stack of its own until it
// execs, and the agent goes on at once. The child therefore (1) only reads
// memory prepared before the clone, which the parent keeps unchanged until
// the exec is decided (ExecWatch), and (2) makes raw system calls only: a
// libc wrapper would write errno, which lives in the launching thread's TLS
// and is shared with it. Every signal is blocked across the clone so that no
// handler of the agent's runs in the child before it resets them. An exec
// failure (ENOENT, EACCES) comes back as an errno through a close-on-exec
// pipe whose end of file means the exec happened.
//
// A trial with a cgroup is created in it by the kernel (clone3 with
// CLONE_INTO_CGROUP). Moving a running process into a cgroup (writing
// cgroup.procs) is a migration: it takes the kernel's cgroup threadgroup
// lock for writing, which waits for an RCU grace period and holds off every
// fork and exit on the host meanwhile, once per trial. A child created in
// place takes that lock for reading only, like any fork. glibc 2.36 has no
// clone3 wrapper, and a child on a new stack cannot return from a C call, so
// the system call is made by a few instructions of our own (x86-64; other
// CPUs use the cgroup.procs path).
#include "agent/launcher.h"
#include "common/mutex.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sched.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <pthread.h>
#include <cstring>
#include <filesystem>

#include "common/log.h"

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

// A failure of the host, not of the trial (docs/protocol.md, "Host faults
// and quarantine"): Unavailable, which the agent reports as `host_fault`.
Status host_status(const std::string& what, int err) {
  return Status::Unavailable(what + ": " + std::strerror(err));
}

// Whether an exec's errno says the host cannot run programs now (memory,
// process or file limits, a disk error) rather than that the trial's
// command is wrong.
bool host_exec_errno(int err) {
  return err == ENOMEM || err == EAGAIN || err == EIO || err == EMFILE || err == ENFILE || err == ETXTBSY;
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
  if (::pipe2(fds, O_CLOEXEC) != 0) return host_status("pipe2", errno);
  p.read_end = fds[0];
  p.write_end = fds[1];
  if (!nonblocking_read) return Status::Ok();
  int flags = ::fcntl(p.read_end, F_GETFL);
  if (flags < 0 || ::fcntl(p.read_end, F_SETFL, flags | O_NONBLOCK) != 0) return host_status("fcntl", errno);
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

// The functions the cloned child runs are not instrumented by sanitizers:
// instrumented code calls into the sanitizer's runtime (before a noreturn
// call, on a check), which uses libc and the launching thread's state from
// a stack the runtime does not know.
#define SWEPT_CHILD_CODE __attribute__((no_sanitize("address", "undefined")))

// Raw system calls for the child: they return -errno and touch no memory of
// the parent's but what they are given.
#if defined(__x86_64__)
SWEPT_CHILD_CODE long raw_syscall(long n, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0) {
  long ret;
  register long r10 asm("r10") = a4;
  register long r8 asm("r8") = a5;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8) : "rcx", "r11", "memory");
  return ret;
}
#elif defined(__aarch64__)
SWEPT_CHILD_CODE long raw_syscall(long n, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0) {
  register long x8 asm("x8") = n;
  register long x0 asm("x0") = a1;
  register long x1 asm("x1") = a2;
  register long x2 asm("x2") = a3;
  register long x3 asm("x3") = a4;
  register long x4 asm("x4") = a5;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
  return x0;
}
#else
#error "agent/launcher.cpp: write raw_syscall for this architecture"
#endif

// What the cloned child does, prepared before the clone.
struct ChildPlan {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* working_dir = nullptr;  // null: stay where the agent is
  const char* cgroup_procs = nullptr;  // null: none; else the child writes "0" there first
  const char* const* more_cgroup_procs = nullptr;  // null-terminated; each gets "0" too
  const RunAs* run_as = nullptr;  // become this user after making the directories (only its numbers are read)
  const char* const* make_dirs = nullptr;  // null-terminated
  const char* file_path = nullptr;         // null: none
  const char* file_content = nullptr;
  size_t file_size = 0;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int error_fd = -1;  // close-on-exec; gets a ChildFailure if the child fails before exec
  pid_t parent_pid = -1;
  int first_reserved_signal = 32;  // libc's own real-time signals: [this, SIGRTMIN)
  int first_user_signal = 34;      // SIGRTMIN
};

// What the child reports through the error pipe when it gives up.
enum class Stage : int { kSetup, kMakeDir, kWriteFile, kChdir, kExec, kCgroup, kRunAs };
struct ChildFailure {
  Stage stage = Stage::kSetup;
  int item = 0;  // which of make_dirs
  int error = 0;  // errno
};

[[noreturn]] SWEPT_CHILD_CODE void child_failed(int error_fd, Stage stage, long negative_errno, int item = 0) {
  ChildFailure f{stage, item, static_cast<int>(-negative_errno)};
  raw_syscall(SYS_write, error_fd, reinterpret_cast<long>(&f), sizeof f);
  for (;;) raw_syscall(SYS_exit_group, 127);
}

// dup2's meaning (a no-op when the two are equal) with dup3, which every
// architecture has.
SWEPT_CHILD_CODE long move_fd(int from, int to) { return from == to ? 0 : raw_syscall(SYS_dup3, from, to, 0); }

// The kernel's struct sigaction; all zero is SIG_DFL with no flags and an
// empty mask, whatever the architecture's field order.
struct KernelSigaction {
  unsigned long handler = 0;
  unsigned long flags = 0;
  unsigned long restorer = 0;
  unsigned long mask = 0;
};

// Runs in the cloned child of a possibly multi-threaded agent, on its own
// stack but in the agent's memory: raw system calls only, then exec.
[[noreturn]] SWEPT_CHILD_CODE void exec_child(const ChildPlan& plan) {
  // The trial dies with the agent (even by SIGKILL): an unsupervised trial
  // would keep its GPU and race its own retry for the checkpoint directory.
  // (The signal follows the spawning thread: run_agent's, which outlives
  // every child it starts.)
  long rc = raw_syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
  if (rc < 0) child_failed(plan.error_fd, Stage::kSetup, rc);
  if (raw_syscall(SYS_getppid) != plan.parent_pid) raw_syscall(SYS_exit_group, 127);  // the agent is gone
  if ((rc = raw_syscall(SYS_setpgid, 0, 0)) < 0) child_failed(plan.error_fd, Stage::kSetup, rc);
  // Into the trial's cgroup before anything else runs: whatever the trial
  // starts later is born inside it (agent/containment.h).
  if (plan.cgroup_procs) {
    long fd = raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(plan.cgroup_procs), O_WRONLY | O_CLOEXEC);
    if (fd < 0) child_failed(plan.error_fd, Stage::kCgroup, fd, -1);
    rc = raw_syscall(SYS_write, fd, reinterpret_cast<long>("0"), 1);
    raw_syscall(SYS_close, fd);
    if (rc < 0) child_failed(plan.error_fd, Stage::kCgroup, rc, -1);
  }
  for (int i = 0; plan.more_cgroup_procs && plan.more_cgroup_procs[i]; ++i) {
    long fd = raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(plan.more_cgroup_procs[i]), O_WRONLY | O_CLOEXEC);
    if (fd < 0) child_failed(plan.error_fd, Stage::kCgroup, fd, i);
    rc = raw_syscall(SYS_write, fd, reinterpret_cast<long>("0"), 1);
    raw_syscall(SYS_close, fd);
    if (rc < 0) child_failed(plan.error_fd, Stage::kCgroup, rc, i);
  }

  // Default dispositions and an empty mask, whatever the agent's threads had.
  // (exec resets handlers itself, but a signal arriving before it would run
  // one here; and it keeps SIG_IGN, which a trial must not inherit.)
  const KernelSigaction default_action;
  const unsigned long empty_mask = 0;
  for (int sig = 1; sig < 65; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (sig >= plan.first_reserved_signal && sig < plan.first_user_signal) continue;
    raw_syscall(SYS_rt_sigaction, sig, reinterpret_cast<long>(&default_action), 0, sizeof empty_mask);
  }
  raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&empty_mask), 0, sizeof empty_mask);

  for (int i = 0; plan.make_dirs && plan.make_dirs[i]; ++i) {
    rc = raw_syscall(SYS_mkdirat, AT_FDCWD, reinterpret_cast<long>(plan.make_dirs[i]), 0755);
    if (rc < 0 && rc != -EEXIST) child_failed(plan.error_fd, Stage::kMakeDir, rc, i);
  }
  if (plan.run_as) {
    // The trial's directories become the user's (not following a link the
    // trial left in their place), then the process becomes the user: groups
    // first, while it still may set them.
    for (int i = 0; plan.make_dirs && plan.make_dirs[i]; ++i) {
      rc = raw_syscall(SYS_fchownat, AT_FDCWD, reinterpret_cast<long>(plan.make_dirs[i]), plan.run_as->uid,
                       plan.run_as->gid, AT_SYMLINK_NOFOLLOW);
      if (rc < 0) child_failed(plan.error_fd, Stage::kMakeDir, rc, i);
    }
    const RunAs& u = *plan.run_as;
    if ((rc = raw_syscall(SYS_setgroups, static_cast<long>(u.groups.size()), reinterpret_cast<long>(u.groups.data()))) < 0 ||
        (rc = raw_syscall(SYS_setresgid, u.gid, u.gid, u.gid)) < 0 ||
        (rc = raw_syscall(SYS_setresuid, u.uid, u.uid, u.uid)) < 0) {
      child_failed(plan.error_fd, Stage::kRunAs, rc);
    }
    // A change of credentials clears the parent-death signal: armed again.
    if ((rc = raw_syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL)) < 0) child_failed(plan.error_fd, Stage::kSetup, rc);
    if (raw_syscall(SYS_getppid) != plan.parent_pid) raw_syscall(SYS_exit_group, 127);
  }
  if (plan.file_path) {
    long fd = raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(plan.file_path),
                          O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) child_failed(plan.error_fd, Stage::kWriteFile, fd);
    for (size_t done = 0; done < plan.file_size;) {
      rc = raw_syscall(SYS_write, fd, reinterpret_cast<long>(plan.file_content + done), plan.file_size - done);
      if (rc == -EINTR) continue;
      if (rc <= 0) child_failed(plan.error_fd, Stage::kWriteFile, rc < 0 ? rc : -ENOSPC);
      done += static_cast<size_t>(rc);
    }
    raw_syscall(SYS_close, fd);
  }

  long devnull = raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDONLY);
  if (devnull < 0) child_failed(plan.error_fd, Stage::kSetup, devnull);
  if ((rc = move_fd(static_cast<int>(devnull), STDIN_FILENO)) < 0) child_failed(plan.error_fd, Stage::kSetup, rc);
  if ((rc = move_fd(plan.stdout_fd, STDOUT_FILENO)) < 0) child_failed(plan.error_fd, Stage::kSetup, rc);
  if ((rc = move_fd(plan.stderr_fd, STDERR_FILENO)) < 0) child_failed(plan.error_fd, Stage::kSetup, rc);
  // Every other descriptor (other trials' pipes, sockets) closes at exec; the
  // error pipe stays usable until then.
  if (raw_syscall(SYS_close_range, 3, ~0u, CLOSE_RANGE_CLOEXEC) < 0) {
    for (int fd = 3; fd < 65536; ++fd) raw_syscall(SYS_fcntl, fd, F_SETFD, FD_CLOEXEC);  // kernels before 5.11
  }
  if (plan.working_dir && (rc = raw_syscall(SYS_chdir, reinterpret_cast<long>(plan.working_dir))) < 0) {
    child_failed(plan.error_fd, Stage::kChdir, rc);
  }
  rc = raw_syscall(SYS_execve, reinterpret_cast<long>(plan.path), reinterpret_cast<long>(plan.argv),
                   reinterpret_cast<long>(plan.envp));
  child_failed(plan.error_fd, Stage::kExec, rc);
}

SWEPT_CHILD_CODE int child_entry(void* plan) { exec_child(*static_cast<const ChildPlan*>(plan)); }

// clone3(args) whose child runs fn(arg) on the stack the arguments name and
// never returns here. Returns the child's pid, or -errno (-ENOSYS where this
// build has no implementation). Blocks no signal itself: the caller does.
#if defined(__x86_64__) && defined(SYS_clone3)
constexpr bool kHaveClone3 = true;
SWEPT_CHILD_CODE long clone3_run(clone_args* args, int (*fn)(void*), void* arg) {
  long ret;
  // fn and arg ride in r12 and r13, which the system call leaves alone in
  // both processes. The child starts on its new stack (rsp = stack +
  // stack_size): it aligns it, calls fn, and exits with its result should fn
  // ever return. The parent jumps past that with the pid in rax.
  register long fn_reg asm("r12") = reinterpret_cast<long>(fn);
  register long arg_reg asm("r13") = reinterpret_cast<long>(arg);
  asm volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xorl %%ebp, %%ebp\n\t"
      "andq $-16, %%rsp\n\t"
      "movq %%r13, %%rdi\n\t"
      "callq *%%r12\n\t"
      "movl %%eax, %%edi\n\t"
      "movl %[exit_nr], %%eax\n\t"
      "syscall\n\t"
      "hlt\n"
      "1:\n\t"
      : "=a"(ret)
      : "0"(SYS_clone3), "D"(args), "S"(sizeof(clone_args)), "r"(fn_reg), "r"(arg_reg),
        [exit_nr] "i"(SYS_exit_group)
      : "rcx", "r11", "memory");
  return ret;
}
#else
constexpr bool kHaveClone3 = false;
long clone3_run(clone_args*, int (*)(void*), void*) { return -ENOSYS; }
#endif

// Set once the kernel has said it cannot create children in a cgroup
// (ENOSYS: no clone3; EINVAL/E2BIG: no CLONE_INTO_CGROUP): later launches
// go straight to the cgroup.procs path.
std::atomic<bool> clone3_unsupported{!kHaveClone3};

// Whether a clone3 failure means the host cannot make a process now (as a
// failed clone() would) rather than that this way into the cgroup is closed.
bool host_clone_errno(int err) { return err == EAGAIN || err == ENOMEM || err == ENOSPC; }

constexpr size_t kChildStackBytes = 64 * 1024;

// Children's stacks are kept for the next launch instead of unmapped: an
// munmap in a multi-threaded process interrupts every other CPU running one
// of its threads to flush its TLB, once per trial.
class StackPool {
 public:
  static StackPool& instance() {
    static StackPool pool;
    return pool;
  }
  void* take() {
    {
      MutexLock lock(mutex_);
      if (!free_.empty()) {
        void* s = free_.back();
        free_.pop_back();
        return s;
      }
    }
    return ::mmap(nullptr, kChildStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  }
  // Precondition: no child runs on `stack` any more (it exec'd or exited).
  void give_back(void* stack) {
    {
      MutexLock lock(mutex_);
      if (free_.size() < kKept) {
        free_.push_back(stack);
        return;
      }
    }
    ::munmap(stack, kChildStackBytes);
  }

 private:
  static constexpr size_t kKept = 64;
  Mutex mutex_;
  std::vector<void*> free_ SWEPT_GUARDED_BY(mutex_);
};

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

// Everything the child reads before its exec, kept unchanged until then.
struct ExecWatch::Memory {
  std::vector<std::string> argv_strings;
  std::vector<std::string> env_strings;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string program;
  std::string command;  // argv[0] as given, for messages
  std::string working_dir;
  std::string cgroup_procs;
  std::vector<std::string> more_cgroup_procs;
  std::vector<const char*> more_cgroup_procs_ptrs;
  std::vector<std::string> make_dirs;
  std::vector<const char*> make_dir_ptrs;
  std::optional<RunAs> run_as;
  std::string file_path;
  std::string file_content;
  ChildPlan plan;
  void* stack = MAP_FAILED;
  ~Memory() {
    if (stack != MAP_FAILED) StackPool::instance().give_back(stack);
  }
};

ExecWatch::~ExecWatch() { outcome(); }

Status ExecWatch::outcome() {
  if (outcome_) return *outcome_;
  if (fd_ < 0) return Status::Ok();  // nothing was launched through it
  ChildFailure failure;
  ssize_t n;
  while (true) {
    n = ::read(fd_, &failure, sizeof failure);
    if (n >= 0) break;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) break;  // cannot happen on a pipe we own; treated as end of file below
    struct pollfd p {fd_, POLLIN, 0};
    ::poll(&p, 1, -1);
  }
  ::close(fd_);
  fd_ = -1;
  const int child_errno = failure.error;
  const Memory& m = *memory_;
  if (n <= 0) {
    outcome_ = Status::Ok();  // end of file: closed by the exec
  } else if (failure.stage == Stage::kMakeDir) {
    const std::string& dir = failure.item >= 0 && static_cast<size_t>(failure.item) < m.make_dirs.size()
                                 ? m.make_dirs[static_cast<size_t>(failure.item)]
                                 : m.working_dir;
    outcome_ = host_status("cannot create the trial directory " + dir, child_errno);
  } else if (failure.stage == Stage::kWriteFile) {
    outcome_ = host_status("cannot write " + m.file_path, child_errno);
  } else if (failure.stage == Stage::kChdir) {
    outcome_ = host_status("cannot enter the trial directory " + m.working_dir, child_errno);
  } else if (failure.stage == Stage::kCgroup) {
    const std::string& file = failure.item >= 0 && static_cast<size_t>(failure.item) < m.more_cgroup_procs.size()
                                  ? m.more_cgroup_procs[static_cast<size_t>(failure.item)]
                                  : m.cgroup_procs;
    outcome_ = host_status("cannot enter the trial's cgroup (" + file + ")", child_errno);
  } else if (failure.stage == Stage::kRunAs) {
    outcome_ = host_status("cannot become user " + (m.run_as ? m.run_as->name : std::string("?")), child_errno);
  } else if (failure.stage == Stage::kSetup) {
    outcome_ = host_status("cannot start " + m.program, child_errno);
  } else if (child_errno == ENOENT) {
    outcome_ = Status::NotFound("command not found: " + m.command);
  } else if (child_errno == EACCES) {
    outcome_ = Status::FailedPrecondition("permission denied: " + m.program);
  } else if (child_errno == ENOEXEC) {
    outcome_ = Status::FailedPrecondition("not an executable format: " + m.program);
  } else if (host_exec_errno(child_errno)) {
    outcome_ = host_status("cannot start " + m.program, child_errno);
  } else {
    outcome_ = errno_status("cannot start " + m.program, child_errno);
  }
  // After an exec the child no longer runs on this memory. After a failure it
  // may still be running its last instructions (exit) on the stack: the
  // memory stays until the watch is destroyed, after the child is reaped.
  if (outcome_->ok()) memory_.reset();
  return *outcome_;
}

PosixLauncher::PosixLauncher() {
  const char* env = std::getenv("SWEPT_AGENT_CLONE_INTO_CGROUP");
  clone_into_cgroup_ = !(env && std::string_view(env) == "0");
}

Result<SpawnedChild> PosixLauncher::launch(const LaunchSpec& spec) {
  if (spec.argv.empty()) return Status::InvalidArgument("the trial's command is empty");
  const char* path_env = std::getenv("PATH");
  static const std::string own_dir = self_exe_dir();  // the executable does not move: read it once
  auto program = resolve_command(spec.argv[0], own_dir, path_env ? path_env : "/usr/bin:/bin");
  if (!program.ok()) return program.status();
  const bool child_makes_working_dir =
      std::find(spec.make_dirs.begin(), spec.make_dirs.end(), spec.working_dir) != spec.make_dirs.end();
  if (!spec.working_dir.empty() && !child_makes_working_dir && !exists(spec.working_dir)) {
    return Status::NotFound("trial working directory " + spec.working_dir + " does not exist");
  }

  FdPair out, err, exec_error;
  SWEPT_RETURN_IF_ERROR(make_pipe(out));
  SWEPT_RETURN_IF_ERROR(make_pipe(err));
  SWEPT_RETURN_IF_ERROR(make_pipe(exec_error));

  // Everything the child needs is built here: after the clone it allocates nothing.
  auto watch = std::make_shared<ExecWatch>();
  watch->memory_ = std::make_unique<ExecWatch::Memory>();
  ExecWatch::Memory& m = *watch->memory_;
  m.argv_strings = spec.argv;
  m.env_strings = build_environment(spec.env_overrides);
  m.argv = c_array(m.argv_strings);
  m.envp = c_array(m.env_strings);
  m.program = *program;
  m.command = spec.argv[0];
  m.working_dir = spec.working_dir;
  m.cgroup_procs = spec.cgroup_procs;
  m.more_cgroup_procs = spec.more_cgroup_procs;
  for (const auto& f : m.more_cgroup_procs) m.more_cgroup_procs_ptrs.push_back(f.c_str());
  m.more_cgroup_procs_ptrs.push_back(nullptr);
  m.make_dirs = spec.make_dirs;
  for (const auto& d : m.make_dirs) m.make_dir_ptrs.push_back(d.c_str());
  m.make_dir_ptrs.push_back(nullptr);
  m.file_path = spec.file_path;
  m.file_content = spec.file_content;
  m.stack = StackPool::instance().take();
  if (m.stack == MAP_FAILED) return host_status("mmap (the child's stack)", errno);
  ChildPlan& plan = m.plan;
  plan.path = m.program.c_str();
  plan.argv = m.argv.data();
  plan.envp = m.envp.data();
  plan.working_dir = m.working_dir.empty() ? nullptr : m.working_dir.c_str();
  plan.make_dirs = m.make_dir_ptrs.data();
  plan.more_cgroup_procs = m.more_cgroup_procs_ptrs.data();
  if (spec.run_as) m.run_as = *spec.run_as;
  plan.run_as = m.run_as ? &*m.run_as : nullptr;
  plan.file_path = m.file_path.empty() ? nullptr : m.file_path.c_str();
  plan.file_content = m.file_content.data();
  plan.file_size = m.file_content.size();
  plan.stdout_fd = out.write_end;
  plan.stderr_fd = err.write_end;
  plan.error_fd = exec_error.write_end;
  plan.parent_pid = ::getpid();
  plan.first_user_signal = SIGRTMIN;

  sigset_t all, previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  pid_t pid = -1;
  int clone_errno = 0;
  const char* failed_call = "clone3";
  bool born_in_cgroup = false;
  if (spec.cgroup_fd >= 0 && clone_into_cgroup_ && !clone3_unsupported.load(std::memory_order_relaxed)) {
    plan.cgroup_procs = nullptr;  // the kernel puts it there
    clone_args args{};
    args.flags = CLONE_VM | CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.stack = reinterpret_cast<uint64_t>(m.stack);  // its lowest address; the kernel starts at the top
    args.stack_size = kChildStackBytes;
    args.cgroup = static_cast<uint64_t>(spec.cgroup_fd);
    long rc = clone3_run(&args, child_entry, &plan);
    if (rc >= 0) {
      pid = static_cast<pid_t>(rc);
      born_in_cgroup = true;
    } else if (host_clone_errno(static_cast<int>(-rc))) {
      clone_errno = static_cast<int>(-rc);
    } else if (rc == -ENOSYS || rc == -EINVAL || rc == -E2BIG) {
      if (!clone3_unsupported.exchange(true)) {
        log::info(std::string("this kernel cannot create a process in a cgroup (clone3: ") + std::strerror(-rc) +
                  "): trials enter their cgroup through cgroup.procs instead");
      }
    }
    // Any other refusal (permissions on that cgroup, say) is left to the
    // cgroup.procs path below, which names the file and the error if it fails too.
  }
  if (pid < 0 && clone_errno == 0) {
    plan.cgroup_procs = m.cgroup_procs.empty() ? nullptr : m.cgroup_procs.c_str();
    failed_call = "clone";
    pid = ::clone(child_entry, static_cast<char*>(m.stack) + kChildStackBytes, CLONE_VM | SIGCHLD, &plan);
    if (pid < 0) clone_errno = errno;
  }
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) return host_status(failed_call, clone_errno);

  ::setpgid(pid, pid);  // also here, so the group exists whichever runs first
  // The child holds its own copies of the write ends now; with ours closed,
  // the pipes reach end of file when the trial (or the exec) is done.
  ::close(exec_error.write_end);
  exec_error.write_end = -1;
  watch->fd_ = exec_error.read_end;
  exec_error.read_end = -1;

  SpawnedChild child;
  child.pid = pid;
  // pidfd_open on a not-yet-reaped child cannot race with pid reuse.
  child.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  child.stdout_fd = out.read_end;
  child.stderr_fd = err.read_end;
  child.exec = std::move(watch);
  child.born_in_cgroup = born_in_cgroup;
  out.read_end = -1;
  err.read_end = -1;
  return child;  // the write ends close with `out` and `err`: only the child holds them now
}

}  // namespace swept::agent
