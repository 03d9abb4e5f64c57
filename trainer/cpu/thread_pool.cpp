// ThreadPool implementation (see thread_pool.h). One 64-bit atomic, claim_,
// holds the job's generation and its next unclaimed task; workers and the
// caller claim tasks with compare-exchange, and the caller returns once
// completed_ reaches the job's task count. The invariants that keep the
// caller's std::function alive for as long as anyone can call it:
//   - a task can only be claimed while claim_ holds its generation, and only
//     below that generation's task count (job_ carries both, so a worker
//     cannot pair an old claim with the next job's count);
//   - the caller moves to the next generation only after every claimed task
//     has returned (completed_ == tasks);
//   - so a worker reads job_fn_ only after a successful claim, while the
//     caller is still inside parallel_for for that job.
// Idle workers spin (pause, then sched_yield so that other processes on a
// shared machine get the core) and after kSpinTime sleep on sleep_cv_;
// sleepers_ tells the caller whether a notify (a futex call) is needed.
// (Not std::atomic<uint64_t>::wait: libstdc++ 12 implements 64-bit waits
// through a proxy counter, and this pool's test once hung there with every
// worker asleep and a job published.)
#include "trainer/cpu/thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace swept::trainer::cpu {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Busy-polls (pause) for about kPauseTime, then polls with sched_yield;
// the whole wait lasts at most `limit`. Returns whether `waiting()` ended.
// The clock is read only every 64 polls (reading it on every poll once cost
// a third of a training run's CPU time in __vdso_clock_gettime).
constexpr auto kPauseTime = std::chrono::microseconds(50);

template <typename Waiting>
bool poll_while(Waiting waiting, std::chrono::steady_clock::duration limit) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (!waiting()) return true;
      cpu_relax();
    }
    const auto spent = std::chrono::steady_clock::now() - start;
    if (spent >= limit) return false;
    if (spent >= kPauseTime) std::this_thread::yield();
  }
}

// How long an idle worker stays awake: longer than the serial stretches of a
// training step (a whole MLP step is ~0.3 ms), because waking a sleeping
// thread costs tens to hundreds of µs on a VM, where an idle vCPU is halted.
constexpr auto kSpinTime = std::chrono::milliseconds(2);

// The stall detector: over each window of kStallWindow jobs the caller adds
// up the jobs' wall time and what they would have taken on the caller alone
// (its own time per task × the job's tasks). When the workers made the window
// slower than that, the second thread lost more than it gained: the caller
// runs jobs alone for kSoloTime, then measures again. Measured on the 2-core
// VM with a busy-loop process beside it: docs/benchmarks.md (CPU hog).
constexpr int kStallWindow = 64;
// ... and only when the window took clearly longer than alone: 20 % more.
// At "any longer", a quiet machine's hiccup of ~0.1 ms in a 2.5 ms window of
// MLP steps, whose small jobs gain little from the second thread anyway, sent
// the caller solo for kSoloTime: 0-20 % of an MLP run's jobs ran alone on a
// quiet 2-core VM (2026-11-27; counted with a temporary print), and its
// two-thread rate dropped in those stretches. A worker descheduled by another
// process costs a scheduler slice (milliseconds), far past the margin.
constexpr int kStallMarginPercent = 20;
constexpr auto kSoloTime = std::chrono::milliseconds(250);
// After a solo stretch the workers are asleep (no job reached them for
// kSoloTime), so the first jobs of the next window pay their wake-ups, tens
// to hundreds of µs each on a VM whose idle vCPU is halted. Counting those
// jobs made the window look stalled and sent the caller solo again: once
// solo, a run tended to stay solo (the bimodal MLP figures of issue 13).
// The first kWarmupJobs after a solo stretch run on the pool unmeasured.
constexpr int kWarmupJobs = 16;

}  // namespace

ThreadPool::ThreadPool(int threads) {
  // The first jobs are unmeasured too: their tasks JIT-compile oneDNN's
  // kernels for each new shape (milliseconds) on whichever thread meets the
  // shape first, which says nothing about a stall.
  warmup_jobs_ = kWarmupJobs;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  claim_.store(pack(generation_ + 1, 0));
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    sleep_cv_.notify_all();
  }
  for (auto& t : workers_) t.join();
}

int ThreadPool::run_tasks(uint32_t generation) {
  int ran = 0;
  uint64_t claim = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(claim) != generation) return ran;
    // The task count must be the count OF THIS generation: the caller sets
    // up the next job (count, then claim_) right after this one ends, and a
    // worker still holding this job's last claim value must not pair it with
    // the next job's larger count (its exchange would then succeed, since
    // claim_ has not moved yet, and run a task of the next job twice).
    const uint64_t job = job_.load(std::memory_order_acquire);
    if (generation_of(job) != generation || task_of(claim) >= task_of(job)) return ran;
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;
    (*job_fn_.load(std::memory_order_relaxed))(static_cast<int>(task_of(claim)));
    completed_.fetch_add(1, std::memory_order_release);
    ++ran;
    claim = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    uint64_t claim = 0;
    const auto idle = [&] {  // seq_cst loads (plain loads on x86): see the sleep below
      claim = claim_.load();
      return generation_of(claim) == seen && !stopping_.load();
    };
    if (!poll_while(idle, kSpinTime)) {
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      // Announce the sleep before the last look at claim_ (both seq_cst): a
      // caller that publishes after that look sees sleepers_ > 0 and then
      // needs sleep_mutex_, which this thread holds until it is waiting.
      sleepers_.fetch_add(1);
      while (idle()) sleep_cv_.wait(lock);
      sleepers_.fetch_sub(1);
    }
    if (stopping_.load()) return;
    seen = generation_of(claim);
    run_tasks(seen);
  }
}

void ThreadPool::parallel_for(int tasks, const std::function<void(int)>& fn) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (int i = 0; i < tasks; ++i) fn(i);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  if (start < solo_until_) {  // the workers stalled recently: same tasks, run here
    ++solo_jobs_;
    for (int i = 0; i < tasks; ++i) fn(i);
    return;
  }
  const uint32_t count = static_cast<uint32_t>(tasks);
  completed_.store(0, std::memory_order_relaxed);
  job_fn_.store(&fn, std::memory_order_relaxed);
  ++generation_;
  job_.store(pack(generation_, count), std::memory_order_relaxed);
  claim_.store(pack(generation_, 0));  // seq_cst: publishes the three above
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    sleep_cv_.notify_all();
  }
  const int ran_here = run_tasks(generation_);
  // Only tasks that a worker has claimed and not finished are left: wait for
  // them (they are running, so the wait is short unless that worker's core
  // was taken away; then yielding hands the core back to it).
  const auto ran_out = std::chrono::steady_clock::now();
  poll_while([&] { return completed_.load(std::memory_order_acquire) != count; },
             std::chrono::steady_clock::duration::max());
  const auto end = std::chrono::steady_clock::now();
  if (warmup_jobs_ > 0) {
    --warmup_jobs_;
    return;
  }
  window_time_ += end - start;
  // Alone, the caller would have run every task at its own pace (a job whose
  // tasks all went to workers says nothing: counted as it was).
  window_alone_ += ran_here > 0 ? (ran_out - start) * tasks / ran_here : end - start;
  if (++window_jobs_ == kStallWindow) {
    if (window_time_ * 100 > window_alone_ * (100 + kStallMarginPercent)) {
      solo_until_ = end + kSoloTime;
      warmup_jobs_ = kWarmupJobs;
    }
    window_jobs_ = 0;
    window_time_ = window_alone_ = std::chrono::steady_clock::duration::zero();
  }
}

}  // namespace swept::trainer::cpu
