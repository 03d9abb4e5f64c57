// Stop signals: see signals.h.
#include "cli/signals.h"

#include <signal.h>

namespace swept::cli {

void on_stop_signals(void (*handler)(int), bool ignore_sigpipe) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  if (ignore_sigpipe) signal(SIGPIPE, SIG_IGN);
}

}  // namespace swept::cli
