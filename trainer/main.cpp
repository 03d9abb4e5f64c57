// swept-train's entry point: parse the command line, arrange for the stop
// signals, run. Everything else is in swept_trainer (train.h), so tests
// drive the same code. SIGTERM and SIGINT only set a flag; the loop notices
// it after the current step, writes a checkpoint and exits 130.
//
// The stop signals are blocked in every thread and taken by one thread that
// waits for them (sigwait), so no signal handler ever runs on top of the
// compute threads. oneDNN's JIT-compiled sgemm kernels (AVX2, AVX-512) do not
// survive a handler frame pushed onto their stack: with a handler, a SIGTERM
// in mid-step corrupted the heap in about half of the runs (glibc: "corrupted
// size vs. prev_size"), never with oneDNN capped at SSE4.1.
#include <pthread.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "common/exit_codes.h"
#include "common/log.h"
#include "trainer/dist/ps_run.h"
#include "trainer/dist/world.h"
#include "trainer/options.h"
#include "trainer/train.h"

namespace {
std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true); }

// Installs the handler for the threads that libraries started before main
// (OpenBLAS's pool, at load), which do not block the signals and never run
// JIT code; blocks SIGTERM and SIGINT in this thread (and so in every thread
// created after it); starts the one thread that receives them.
void take_stop_signals_on_own_thread() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;  // writes to stdout are not cut short by the signal
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::thread([stop] {
    for (;;) {
      int sig = 0;
      if (sigwait(&stop, &sig) == 0) g_stop.store(true);
    }
  }).detach();
}
}  // namespace

int main(int argc, char** argv) {
  swept::log::set_program("swept-train");
  std::vector<std::string> args(argv + 1, argv + argc);
  auto env = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  swept::Result<swept::trainer::CommandLine> cl = swept::trainer::parse_command_line(args, env);
  if (!cl.ok()) {
    swept::log::error(cl.status().message());
    return swept::kExitUsage;
  }
  if (cl->action != swept::trainer::CommandLine::Action::kTrain) {
    std::cout << cl->text << std::endl;
    return swept::kExitOk;
  }
  if (cl->config.strategy == swept::trainer::Strategy::kParameterServer) {
    // The cluster from TF_CONFIG (trainer/dist/cluster.h), not torchrun's variables.
    take_stop_signals_on_own_thread();
    std::ios::sync_with_stdio(false);
    return swept::trainer::run_parameter_server_strategy(cl->config, env, std::cout, g_stop);
  }
  // WORLD_SIZE, RANK, ... (trainer/dist/world.h): refused before any work.
  swept::Result<swept::trainer::World> world = swept::trainer::world_from_env(env);
  if (!world.ok()) {
    swept::log::error(world.status().message());
    return swept::kExitUsage;
  }
  take_stop_signals_on_own_thread();
  std::ios::sync_with_stdio(false);
  return swept::trainer::run_training(cl->config, *world, std::cout, g_stop);
}
