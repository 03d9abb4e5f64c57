// ThreadPool: the CPU backend's fork-join workers. parallel_for(tasks, fn)
// runs fn(0..tasks-1) spread over the pool's threads (the caller is one of
// them) and returns when every call has returned. Which thread runs which
// task is not fixed, so callers write results per TASK (never per thread):
// results then do not depend on scheduling, only on the number of tasks.
//
// The caller never waits for a worker that has not started: tasks are
// claimed one by one, and parallel_for returns once every task is done, so
// on a busy machine a descheduled worker costs nothing but its share of the
// work (the caller takes the tasks it does not claim). A training step
// issues dozens of jobs of 5 to 200 µs, so workers spin between jobs (up to
// kSpinTime) before they sleep.
//
// When another process takes a core, a worker that has claimed a task may be
// descheduled for a whole time slice (milliseconds) while the caller waits
// for it: the second thread then loses more than it gains. The caller
// notices (recent jobs took longer than its own pace says they would have
// taken it alone) and runs the jobs alone for a while (kSoloTime) before it
// tries the workers again.
// Results do not change: the tasks are the same, only who runs them.
//
// Thread safety: one caller at a time (the owning Backend's thread); fn must
// not throw and must not call parallel_for on the same pool.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace swept::trainer::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1; starts threads-1 workers
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(int tasks, const std::function<void(int)>& fn);
  // Jobs that the caller ran alone because the workers had stalled (for
  // tests and diagnostics).
  uint64_t solo_jobs() const { return solo_jobs_; }

 private:
  void worker_loop();
  // Claims and runs tasks of `generation` until none is left; returns how many it ran.
  int run_tasks(uint32_t generation);

  // The job: (generation << 32) | index of the next unclaimed task. A task is
  // claimed by a compare-exchange that also checks the generation, so a late
  // worker can never claim a task of a job that is already over, and a
  // claimed task keeps its job (and job_fn_) alive until it is done.
  static uint64_t pack(uint32_t generation, uint32_t task) { return uint64_t{generation} << 32 | task; }
  static uint32_t generation_of(uint64_t claim) { return static_cast<uint32_t>(claim >> 32); }
  static uint32_t task_of(uint64_t claim) { return static_cast<uint32_t>(claim); }

  std::vector<std::thread> workers_;
  std::atomic<uint64_t> claim_{0};
  // Written by the caller before it publishes a generation in claim_ (release).
  std::atomic<const std::function<void(int)>*> job_fn_{nullptr};
  std::atomic<uint64_t> job_{0};        // (generation << 32) | its task count
  std::atomic<uint32_t> completed_{0};  // tasks of the current job that have returned
  std::atomic<int> sleepers_{0};        // workers asleep (or about to be) on sleep_cv_
  std::mutex sleep_mutex_;
  std::condition_variable sleep_cv_;
  std::atomic<bool> stopping_{false};
  uint32_t generation_ = 0;             // the caller's copy

  // The caller's stall detector (see the top of this file); caller-only state.
  int window_jobs_ = 0;
  std::chrono::steady_clock::duration window_time_{}, window_alone_{};
  std::chrono::steady_clock::time_point solo_until_{};
  uint64_t solo_jobs_ = 0;
  int warmup_jobs_ = 0;  // jobs left unmeasured: after a solo stretch, and at the start (set by the constructor)
};

}  // namespace swept::trainer::cpu
