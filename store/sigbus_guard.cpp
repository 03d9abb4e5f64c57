// SigbusGuard: see sigbus_guard.h.
#include "store/sigbus_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>

#include "common/exit_codes.h"

namespace swept::store {
namespace {

char g_db_path[1024];  // set before the handler is installed; read in it

void put(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

uintptr_t parse_hex(const char*& p) {
  uintptr_t v = 0;
  for (;; ++p) {
    char c = *p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return v;
    v = v * 16 + static_cast<uintptr_t>(d);
  }
}

// Copies into `out` the path of the mapping holding `addr` ("" if none).
void mapped_file(uintptr_t addr, char* out, size_t out_size) {
  out[0] = '\0';
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  static char buf[8192];
  static char line[4096];
  size_t line_len = 0;
  bool done = false;
  for (ssize_t n; !done && (n = ::read(fd, buf, sizeof buf)) > 0;) {
    for (ssize_t i = 0; i < n && !done; ++i) {
      if (buf[i] != '\n') {
        if (line_len + 1 < sizeof line) line[line_len++] = buf[i];
        continue;
      }
      line[line_len] = '\0';
      line_len = 0;
      const char* p = line;
      uintptr_t lo = parse_hex(p);
      if (*p != '-') continue;
      ++p;
      uintptr_t hi = parse_hex(p);
      if (addr < lo || addr >= hi) continue;
      const char* path = std::strchr(line, '/');
      if (path) {
        std::strncpy(out, path, out_size - 1);
        out[out_size - 1] = '\0';
      }
      done = true;
    }
  }
  ::close(fd);
}

void on_sigbus(int, siginfo_t* info, void*) {
  static char file[1024];
  mapped_file(reinterpret_cast<uintptr_t>(info->si_addr), file, sizeof file);
  put("swept: fatal: SIGBUS: a memory-mapped file went away under this process (");
  put(file[0] ? file : "an anonymous or unknown mapping");
  put("). The database ");
  put(g_db_path);
  put(" has its files (the -shm shared-memory index, the -wal log, the database) mapped: one was truncated or "
      "replaced, or its storage failed or filled up. Stopping without writing more; committed work is in the "
      "database and its -wal file. Restore the storage, leave the files alone while a scheduler runs, and start "
      "the scheduler again: it recovers from the WAL.\n");
  ::_exit(kExitFailure);
}

}  // namespace

void install_sigbus_guard(const std::string& db_path) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::strncpy(g_db_path, db_path.c_str(), sizeof g_db_path - 1);
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, nullptr);
}

}  // namespace swept::store
