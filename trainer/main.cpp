// swept-train's entry point: parse the command line, install the signal
// handlers, run. Everything else is in swept_trainer (train.h), so tests
// drive the same code. SIGTERM and SIGINT only set a flag; the loop notices
// it after the current step, writes a checkpoint and exits 130.
#include <csignal>
#include <cstdlib>
#include <iostream>

#include "common/exit_codes.h"
#include "common/log.h"
#include "trainer/options.h"
#include "trainer/train.h"

namespace {
std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true); }
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
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::ios::sync_with_stdio(false);
  return swept::trainer::run_training(cl->config, std::cout, g_stop);
}
