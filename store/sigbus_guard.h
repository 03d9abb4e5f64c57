// SigbusGuard: a SIGBUS never kills the scheduler silently (issue 15, item 7).
//
// SQLite maps the WAL's shared-memory index (<db>-shm) into memory, and the
// read connections map the database file (mmap_size). When such a file is
// truncated or replaced under the process, or its storage fails, touching the
// mapping raises SIGBUS, which by default ends the process with no word. No
// SQLite setting avoids the -shm mapping while other processes (swept web,
// swept status --db) read the database: only exclusive locking does, and it
// shuts them out.
//
// The guard installs a SIGBUS handler that writes one line to stderr naming
// the file mapped at the faulting address (read from /proc/self/maps), the
// database, what most likely happened and what to do, and ends the process
// with exit code 1 (kExitFailure, docs/exit-codes.md). It cannot resume: the
// faulting access has no value to give. Committed transactions are safe in
// the database and its WAL; the scheduler recovers them on restart.
//
// Thread safety: install() may be called from any thread, several times (the
// last database path wins; the scheduler has one). The handler uses only
// async-signal-safe calls (open, read, write, _exit) and static memory.
#pragma once

#include <string>

namespace swept::store {

void install_sigbus_guard(const std::string& db_path);

}  // namespace swept::store
