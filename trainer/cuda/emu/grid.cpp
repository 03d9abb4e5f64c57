// The grid engine of the CUDA emulation: runs every thread of every block of
// a kernel launch, with __syncthreads as a barrier among a block's threads.
//
// Default engine (fibers): blocks run one after another on the launching
// thread; within a block, each CUDA thread is a Boost.Context fiber. The
// scheduler resumes the threads in order; a thread runs until it finishes or
// reaches __syncthreads, so after one pass every unfinished thread waits at
// the barrier, and the next pass releases them all: exactly the barrier's
// semantics. A kernel whose first block never reaches __syncthreads runs its
// other blocks' threads as plain calls (no fiber), which is most launches; if
// such a kernel then reaches __syncthreads in a later block, the emulation
// stops the process with a message (it cannot suspend a plain call), rather
// than compute a wrong result.
//
// ThreadSanitizer engine (SWEPT_CUDA_EMU_THREADS, scripts/test-cuda-tsan.sh):
// a block's CUDA threads are OS threads meeting at a std::barrier, so a
// missing __syncthreads (a data race between a block's threads) is a race
// TSan reports. Blocks run one at a time (__shared__ is a plain static then).
#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "trainer/cuda/emu/emu.h"

namespace swept::cuda::emu {
namespace {

uint3 unflatten(unsigned i, dim3 d) { return uint3{i % d.x, (i / d.x) % d.y, i / (d.x * d.y)}; }

#if defined(SWEPT_CUDA_EMU_THREADS)

thread_local std::barrier<>* t_barrier = nullptr;
std::mutex g_launch_mu;  // one launch at a time: __shared__ is process-wide here

void run_grid_threads(dim3 grid, dim3 block, const std::function<void(uint3, uint3)>& body) {
  std::lock_guard<std::mutex> lock(g_launch_mu);
  const unsigned threads = block.x * block.y * block.z, blocks = grid.x * grid.y * grid.z;
  std::barrier<> sync(threads);  // __syncthreads
  std::vector<std::thread> team;
  for (unsigned t = 0; t < threads; ++t) {
    team.emplace_back([&, t] {
      t_barrier = &sync;
      for (unsigned b = 0; b < blocks; ++b) {
        body(unflatten(b, grid), unflatten(t, block));
        sync.arrive_and_wait();  // the block ends: its shared memory is reused by the next
      }
    });
  }
  for (auto& th : team) th.join();
}

#else

namespace ctx = boost::context;

// The fiber scheduler of the block being run on this thread.
struct BlockRun {
  ctx::fiber* to_scheduler = nullptr;  // the running fiber's way back
  bool reached_barrier = false;
};
thread_local BlockRun* t_block = nullptr;
thread_local bool t_plain = false;  // running threads as plain calls (no barrier possible)

constexpr size_t kStackBytes = 64 * 1024;

// Fiber stacks, kept per thread for the next block instead of returned to
// malloc (a block of 256 threads would otherwise allocate 16 MiB each time).
struct StackPool {
  std::vector<void*> free;
  ~StackPool() {
    for (void* p : free) std::free(p);
  }
};
thread_local StackPool t_stacks;

struct PooledStack {
  ctx::stack_context allocate() {
    void* base = nullptr;
    if (!t_stacks.free.empty()) {
      base = t_stacks.free.back();
      t_stacks.free.pop_back();
    } else {
      base = std::malloc(kStackBytes);
      if (!base) throw std::bad_alloc();
    }
    ctx::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = static_cast<char*>(base) + kStackBytes;  // stacks grow down
    return sc;
  }
  void deallocate(ctx::stack_context& sc) noexcept {
    t_stacks.free.push_back(static_cast<char*>(sc.sp) - sc.size);
  }
};

// Runs one block's threads as fibers; returns whether any reached a barrier.
bool run_block_fibers(uint3 block_index, dim3 block, const std::function<void(uint3, uint3)>& body) {
  const unsigned threads = block.x * block.y * block.z;
  BlockRun run;
  BlockRun* outer = t_block;
  t_block = &run;
  std::vector<ctx::fiber> fibers;
  fibers.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    fibers.emplace_back(std::allocator_arg, PooledStack(),
                        [&run, &body, block_index, t, block](ctx::fiber&& scheduler) {
                          run.to_scheduler = &scheduler;
                          body(block_index, unflatten(t, block));
                          return std::move(scheduler);
                        });
  }
  unsigned running = threads;
  while (running > 0) {
    running = 0;
    for (unsigned t = 0; t < threads; ++t) {
      if (!fibers[t]) continue;
      fibers[t] = std::move(fibers[t]).resume();
      if (fibers[t]) ++running;  // waiting at the barrier
    }
  }
  t_block = outer;
  return run.reached_barrier;
}

#endif

}  // namespace

void block_barrier() {
#if defined(SWEPT_CUDA_EMU_THREADS)
  t_barrier->arrive_and_wait();
#else
  if (t_plain || !t_block) {
    std::fprintf(stderr,
                 "CUDA emulation: __syncthreads reached in a block run without fibers (the kernel's "
                 "first block never reached it); the emulation cannot run this kernel\n");
    std::abort();
  }
  BlockRun* run = t_block;
  run->reached_barrier = true;
  ctx::fiber* back = run->to_scheduler;
  *back = std::move(*back).resume();  // to the scheduler; resumed when the barrier opens
  run->to_scheduler = back;
#endif
}

void run_grid(dim3 grid, dim3 block, const std::function<void(uint3, uint3)>& body) {
#if defined(SWEPT_CUDA_EMU_THREADS)
  run_grid_threads(grid, block, body);
#else
  const unsigned blocks = grid.x * grid.y * grid.z, threads = block.x * block.y * block.z;
  const bool cooperative = run_block_fibers(unflatten(0, grid), block, body);
  for (unsigned b = 1; b < blocks; ++b) {
    if (cooperative) {
      run_block_fibers(unflatten(b, grid), block, body);
      continue;
    }
    t_plain = true;
    for (unsigned t = 0; t < threads; ++t) body(unflatten(b, grid), unflatten(t, block));
    t_plain = false;
  }
#endif
}

}  // namespace swept::cuda::emu
