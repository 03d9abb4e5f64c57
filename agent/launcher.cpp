// PosixLauncher: posix_spawn with an argv array, one process group per trial.
//
// Why posix_spawn and not fork: `swept run` hosts the agent next to other
// threads, and after fork only async-signal-safe calls are allowed; glibc's
// posix_spawn (clone + exec) needs none and reports exec failures (ENOENT,
// EACCES) back to the caller, so a bad command is an error value here, never
// a half-started child.
#include "agent/launcher.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
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

Status make_pipe(FdPair& p) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno_status("pipe2", errno);
  p.read_end = fds[0];
  p.write_end = fds[1];
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

// RAII for the spawn attribute objects.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
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

Result<SpawnedChild> PosixLauncher::launch(const LaunchSpec& spec) {
  if (spec.argv.empty()) return Status::InvalidArgument("the trial's command is empty");
  const char* path_env = std::getenv("PATH");
  auto program = resolve_command(spec.argv[0], self_exe_dir(), path_env ? path_env : "/usr/bin:/bin");
  if (!program.ok()) return program.status();

  FdPair out, err;
  SWEPT_RETURN_IF_ERROR(make_pipe(out));
  SWEPT_RETURN_IF_ERROR(make_pipe(err));

  SpawnSetup setup;
  // stdin from /dev/null, stdout/stderr to the pipes, then close everything
  // else the agent has open (other trials' pipes, sockets).
  posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out.write_end, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, err.write_end, STDERR_FILENO);
  posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3);
  if (!spec.working_dir.empty()) posix_spawn_file_actions_addchdir_np(&setup.actions, spec.working_dir.c_str());

  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&setup.attr, &all);
  posix_spawnattr_setsigmask(&setup.attr, &none);
  posix_spawnattr_setpgroup(&setup.attr, 0);  // a new group led by the child
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> argv_strings = spec.argv;
  std::vector<std::string> env_strings = build_environment(spec.env_overrides);
  auto argv = c_array(argv_strings);
  auto envp = c_array(env_strings);

  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program->c_str(), &setup.actions, &setup.attr, argv.data(), envp.data());
  if (rc != 0) {
    if (rc == ENOENT && !spec.working_dir.empty() && !exists(spec.working_dir)) {
      return Status::NotFound("trial working directory " + spec.working_dir + " does not exist");
    }
    if (rc == ENOENT) return Status::NotFound("command not found: " + spec.argv[0]);
    if (rc == EACCES) return Status::FailedPrecondition("permission denied: " + *program);
    if (rc == ENOEXEC) return Status::FailedPrecondition("not an executable format: " + *program);
    return errno_status("cannot start " + *program, rc);
  }

  SpawnedChild child;
  child.pid = pid;
  // pidfd_open on a not-yet-reaped child cannot race with pid reuse.
  child.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (child.pidfd >= 0) ::fcntl(child.pidfd, F_SETFD, FD_CLOEXEC);
  child.stdout_fd = out.read_end;
  child.stderr_fd = err.read_end;
  out.read_end = -1;
  err.read_end = -1;
  return child;  // the write ends close with `out` and `err`: only the child holds them now
}

}  // namespace swept::agent
