// LeaseKeeper: see lease_keeper.h for why it exists and what it guarantees.
//
// The page holds two deadlines and two counters, all lock-free atomics
// (they are shared between processes, so nothing may need a lock). The
// keeper's loop: read the deadlines; past the SIGKILL one, kill every trial
// once for that deadline; past the SIGTERM one, SIGTERM every trial once for
// it; otherwise sleep on the page's futex word until the nearer deadline.
// "Once for that deadline": a deadline the agent does not move (it is frozen,
// or it has stopped its trials itself) is acted on once, not in a loop.
// Before each signal it judges the published trial pids (judge_trials): a
// verdict is the pid and its state in one word, so that a slot the agent
// has since given to another trial never carries the old one's verdict, and
// a trial found running once stays "signalled" (by the SIGKILL its
// SIGTERM may have made it a zombie, which is still the keeper's doing).
#include "agent/lease_keeper.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <new>
#include <string>

namespace swept::agent {

struct LeaseKeeper::Shared {
  std::atomic<int64_t> term_at_ms{INT64_MAX};
  std::atomic<int64_t> kill_at_ms{INT64_MAX};
  // The futex word: bumped whenever a deadline moves earlier, or to quit.
  std::atomic<uint32_t> wake{0};
  std::atomic<uint32_t> quit{0};
  std::atomic<uint32_t> interventions{0};
  // Published by the agent: its trials' main pids (0: an empty slot).
  std::atomic<int32_t> pids[kMaxTrackedPids] = {};
  // Written by the keeper: (pid << 8) | kSignalled or kEndedFirst; 0: none.
  std::atomic<uint64_t> verdicts[kMaxTrackedPids] = {};
};

namespace {

static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "the keeper's page is shared between processes: its atomics must not need a lock");

int64_t monotonic_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Not common/log: its lock may have been held by another thread of the agent
// at the fork. One write(2) of a whole line.
void say(const std::string& what) {
  std::string line = "swept lease keeper (pid " + std::to_string(::getpid()) + "): " + what + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, int64_t timeout_ms) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout_ms / 1000);
  ts.tv_nsec = static_cast<long>(timeout_ms % 1000) * 1000000L;
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

constexpr uint64_t kSignalled = 1;
constexpr uint64_t kEndedFirst = 2;

uint64_t verdict_of(pid_t pid, uint64_t state) { return (static_cast<uint64_t>(static_cast<uint32_t>(pid)) << 8) | state; }

// Whether `pid` has ended: a zombie ('Z', 'X' in /proc/PID/stat), or gone.
// No allocation, no lock (the keeper is a fork of a threaded process).
bool process_ended(pid_t pid) {
  char path[32] = "/proc/";
  char digits[12];
  int n = 0;
  for (uint32_t v = static_cast<uint32_t>(pid); n == 0 || v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  size_t at = 6;
  while (n > 0) path[at++] = digits[--n];
  std::memcpy(path + at, "/stat", 6);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH;
  char buf[512];
  ssize_t got = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (got <= 0) return true;  // a process being reaped reads empty
  buf[got] = 0;
  char* paren = std::strrchr(buf, ')');
  if (!paren || paren + 2 >= buf + got) return false;
  return paren[2] == 'Z' || paren[2] == 'X';
}

// The keeper wakes at least this often to see whether its agent still runs
// (PR_SET_PDEATHSIG is the first line; this is the second).
constexpr int64_t kMaxSleepMs = 10000;

}  // namespace

Result<std::unique_ptr<LeaseKeeper>> LeaseKeeper::start(const TrialsView& view) {
  void* page = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return Status::Unavailable(std::string("lease keeper: mmap: ") + std::strerror(errno));
  std::unique_ptr<LeaseKeeper> keeper(new LeaseKeeper());
  keeper->shared_ = new (page) Shared();
  keeper->view_ = view;
  const pid_t agent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::munmap(page, sizeof(Shared));
    keeper->shared_ = nullptr;
    return Status::Unavailable(std::string("lease keeper: fork: ") + std::strerror(e));
  }
  if (pid == 0) run_keeper(*keeper->shared_, keeper->view_, agent);
  keeper->pid_ = pid;
  return keeper;
}

void LeaseKeeper::run_keeper(Shared& shared, const TrialsView& view, pid_t agent) {
  // Dies with the agent's thread; exits at once if the agent died already.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != agent) ::_exit(0);
  // Its own session and group: a stop sent to the agent's group, or the
  // terminal's ^C/^Z, does not reach it.
  ::setsid();
  ::prctl(PR_SET_NAME, "swept-keeper");
  // Default dispositions, an empty mask: none of the agent's handlers runs here.
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // No descriptor of the agent's (sockets, trials' pipes) stays open here.
  ::syscall(SYS_close_range, 3, ~0u, 0);

  int64_t termed_for = INT64_MIN;  // the deadline last acted on
  int64_t killed_for = INT64_MIN;
  while (shared.quit.load() == 0 && ::getppid() == agent) {
    const uint32_t wake = shared.wake.load();
    const int64_t term_at = shared.term_at_ms.load();
    const int64_t kill_at = shared.kill_at_ms.load();
    const int64_t now = monotonic_ms();
    if (kill_at != INT64_MAX && now >= kill_at && killed_for != kill_at) {
      killed_for = kill_at;
      termed_for = term_at;  // too late for SIGTERM
      judge_trials(shared);
      if (int n = signal_every_trial(view, SIGKILL); n > 0) {
        shared.interventions.fetch_add(1);
        say("the agent (pid " + std::to_string(agent) + ") did not renew its lease: SIGKILL to " +
            std::to_string(n) + (view.mode == ContainmentMode::kCgroup ? " trial(s)" : " trial process(es)"));
      }
      continue;
    }
    if (term_at != INT64_MAX && now >= term_at && termed_for != term_at) {
      termed_for = term_at;
      judge_trials(shared);
      if (int n = signal_every_trial(view, SIGTERM); n > 0) {
        shared.interventions.fetch_add(1);
        say("the agent (pid " + std::to_string(agent) + ") did not renew its lease: SIGTERM to " +
            std::to_string(n) + (view.mode == ContainmentMode::kCgroup ? " trial(s)" : " trial process(es)") +
            ", SIGKILL in " + std::to_string(kill_at == INT64_MAX ? 0 : kill_at - now) + " ms");
      }
      continue;
    }
    int64_t next = kMaxSleepMs;
    if (term_at != INT64_MAX && termed_for != term_at) next = std::min(next, term_at - now);
    if (kill_at != INT64_MAX && killed_for != kill_at) next = std::min(next, kill_at - now);
    futex_wait(shared.wake, wake, std::max<int64_t>(next, 1));
  }
  ::_exit(0);
}

void LeaseKeeper::judge_trials(Shared& shared) {
  for (size_t i = 0; i < kMaxTrackedPids; ++i) {
    const pid_t pid = shared.pids[i].load();
    if (pid <= 0) continue;
    if (shared.verdicts[i].load() == verdict_of(pid, kSignalled)) continue;  // signalled before: still ours
    shared.verdicts[i].store(verdict_of(pid, process_ended(pid) ? kEndedFirst : kSignalled));
  }
}

void LeaseKeeper::set_trial_pids(const std::vector<pid_t>& pids) {
  if (pids == published_) return;
  for (size_t i = 0; i < kMaxTrackedPids; ++i) {
    const pid_t want = i < pids.size() ? pids[i] : 0;
    if (shared_->pids[i].load(std::memory_order_relaxed) == want) continue;
    // The slot's old verdict is cleared before it names another trial.
    shared_->pids[i].store(0);
    shared_->verdicts[i].store(0);
    shared_->pids[i].store(want);
  }
  published_ = pids;
}

bool LeaseKeeper::found_ended(pid_t pid) const {
  if (pid <= 0) return false;
  for (size_t i = 0; i < kMaxTrackedPids; ++i) {
    if (shared_->verdicts[i].load() == verdict_of(pid, kEndedFirst)) return true;
  }
  return false;
}

LeaseKeeper::~LeaseKeeper() {
  if (!shared_) return;
  if (pid_ > 0 && !reaped_) {
    shared_->quit.store(1);
    shared_->wake.fetch_add(1);
    futex_wake(shared_->wake);
    ::kill(pid_, SIGKILL);  // at once: it holds nothing that needs a clean exit
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  ::munmap(shared_, sizeof(Shared));
}

void LeaseKeeper::set_deadlines(int64_t term_at_ms, int64_t kill_at_ms) {
  const int64_t old_term = shared_->term_at_ms.load(std::memory_order_relaxed);
  const int64_t old_kill = shared_->kill_at_ms.load(std::memory_order_relaxed);
  if (old_term == term_at_ms && old_kill == kill_at_ms) return;
  shared_->term_at_ms.store(term_at_ms);
  shared_->kill_at_ms.store(kill_at_ms);
  // A later deadline needs no word: the keeper wakes at the old one, reads
  // the new one and sleeps again. An earlier one must cut its sleep short.
  if (term_at_ms < old_term || kill_at_ms < old_kill) {
    shared_->wake.fetch_add(1);
    futex_wake(shared_->wake);
  }
}

uint32_t LeaseKeeper::interventions() const { return shared_->interventions.load(std::memory_order_acquire); }

bool LeaseKeeper::alive() {
  if (reaped_ || pid_ <= 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {  // ECHILD: reaped by the subreaper sweep
    reaped_ = true;
    return false;
  }
  return true;
}

}  // namespace swept::agent
