// ThreadPool implementation: a generation counter under one mutex wakes the
// workers for a job; tasks are claimed through an atomic counter; the caller
// works too and then waits until EVERY worker has reported the generation
// done, so no worker can still hold a job when the next one is set up and
// the job (a reference to the caller's std::function) never dangles.
// Workers spin briefly before sleeping: training steps issue many short jobs.
#include "trainer/cpu/thread_pool.h"

#include <chrono>

namespace swept::trainer::cpu {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    generation_atomic_.store(generation_ + 1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_tasks() {
  const std::function<void(int)>& job = *job_;
  for (;;) {
    int task = next_task_.fetch_add(1);
    if (task >= job_tasks_) return;
    job(task);
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin a little (about 50 µs) for the next job before sleeping.
    auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (generation_atomic_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < spin_until) {
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_tasks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++workers_done_;
      workers_done_atomic_.store(workers_done_, std::memory_order_release);
    }
    done_.notify_one();
  }
}

void ThreadPool::parallel_for(int tasks, const std::function<void(int)>& fn) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (int i = 0; i < tasks; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_tasks_ = tasks;
    next_task_.store(0);
    workers_done_ = 0;
    workers_done_atomic_.store(0);
    ++generation_;
    generation_atomic_.store(generation_, std::memory_order_release);
  }
  wake_.notify_all();
  run_tasks();
  // Spin briefly for the workers (their tasks usually end with ours) before
  // paying for a sleep and a wake-up.
  const int workers = static_cast<int>(workers_.size());
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
  while (workers_done_atomic_.load(std::memory_order_acquire) != workers &&
         std::chrono::steady_clock::now() < spin_until) {
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return workers_done_ == workers; });
  job_ = nullptr;
}

}  // namespace swept::trainer::cpu
