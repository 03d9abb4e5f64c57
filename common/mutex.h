// Mutex, MutexLock and the thread-safety annotations that let clang check
// them (-Wthread-safety; scripts/thread_safety.py runs that check in CTest).
//
// A member written as `int n_ SWEPT_GUARDED_BY(mu_);` may only be touched
// while mu_ is held; a function declared SWEPT_REQUIRES(mu_) may only be
// called with it held. clang proves both at compile time over every
// translation unit; g++ ignores the annotations (the macros expand to
// nothing), so the production build is unchanged. libstdc++'s std::mutex
// carries no annotations, hence this thin wrapper: the same std::mutex,
// with the capability attributes clang needs.
//
// Condition variables: std::condition_variable_any waits on a Mutex
// directly (it is BasicLockable); code that waits writes the guarded reads
// inside the predicate, which clang cannot see into, so such lambdas are
// marked SWEPT_NO_THREAD_SAFETY_ANALYSIS or read under MutexLock after the
// wait returns.
#pragma once

#include <mutex>

#if defined(__clang__)
#define SWEPT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SWEPT_THREAD_ANNOTATION(x)
#endif

#define SWEPT_CAPABILITY(x) SWEPT_THREAD_ANNOTATION(capability(x))
#define SWEPT_SCOPED_CAPABILITY SWEPT_THREAD_ANNOTATION(scoped_lockable)
#define SWEPT_GUARDED_BY(x) SWEPT_THREAD_ANNOTATION(guarded_by(x))
#define SWEPT_PT_GUARDED_BY(x) SWEPT_THREAD_ANNOTATION(pt_guarded_by(x))
#define SWEPT_REQUIRES(...) SWEPT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define SWEPT_EXCLUDES(...) SWEPT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define SWEPT_ACQUIRE(...) SWEPT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define SWEPT_RELEASE(...) SWEPT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define SWEPT_NO_THREAD_SAFETY_ANALYSIS SWEPT_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace swept {

class SWEPT_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() SWEPT_ACQUIRE() { mu_.lock(); }
  void unlock() SWEPT_RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope (std::lock_guard, annotated). unlock()/lock()
// let a waiting loop drop the mutex around a blocking call.
class SWEPT_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) SWEPT_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() SWEPT_RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() SWEPT_RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() SWEPT_ACQUIRE() {
    mu_.lock();
    held_ = true;
  }
  // For std::condition_variable_any::wait(lock.mutex(), ...).
  Mutex& mutex() { return mu_; }

 private:
  Mutex& mu_;
  bool held_ = true;
};

}  // namespace swept
