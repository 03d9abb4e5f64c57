// ThreadPool: the CPU backend's fork-join workers. parallel_for(tasks, fn)
// runs fn(0..tasks-1) spread over the pool's threads (the caller is one of
// them) and returns when every call has returned. Which thread runs which
// task is not fixed, so callers write results per TASK (never per thread):
// results then do not depend on scheduling, only on the number of tasks.
// Thread safety: one caller at a time (the owning Backend's thread); fn must
// not throw and must not call parallel_for on the same pool.
#pragma once

#include <atomic>
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

 private:
  void worker_loop();
  void run_tasks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  // Set under mutex_ before generation_ moves; read by workers after they
  // saw the new generation under mutex_.
  const std::function<void(int)>* job_ = nullptr;
  int job_tasks_ = 0;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> generation_atomic_{0};  // generation_, for spinning
  std::atomic<int> next_task_{0};
  int workers_done_ = 0;
  std::atomic<int> workers_done_atomic_{0};  // workers_done_, for the caller's spin
  bool stopping_ = false;
};

}  // namespace swept::trainer::cpu
