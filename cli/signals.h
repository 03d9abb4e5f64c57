// Stop signals for the long-running subcommands (swept agent, scheduler,
// run): one way to install their handlers.
// Thread safety: call from the main thread before starting others.
#pragma once

namespace swept::cli {

// Installs `handler` for SIGINT and SIGTERM (nothing masked while it runs;
// it must be async-signal-safe: an atomic store, a write(2)). With
// `ignore_sigpipe`, writing to a peer that went away is an error return
// (EPIPE) instead of the end of the process.
void on_stop_signals(void (*handler)(int), bool ignore_sigpipe);

}  // namespace swept::cli
