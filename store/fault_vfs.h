// FaultVfs: a SQLite VFS for tests that injects I/O faults, the way LevelDB's
// fault_injection_test puts a failing Env under the database. It wraps the
// default VFS and forwards every call; once armed, the next writes to the
// write-ahead log fail with SQLITE_IOERR_WRITE, so the COMMIT that carries
// them fails as it would on a full or failing disk. Open a Writer with
// WriterOptions::vfs = FaultVfs::kName to use it.
//
// Test code only (target swept_store_fault_vfs). Thread safety: arm() and
// the counters are atomic; register once per process (FaultVfs::install()).
#pragma once

#include <atomic>

namespace swept::store::testing {

class FaultVfs {
 public:
  static constexpr const char* kName = "swept-fault";
  // Registers the VFS (not as the default) on first use; returns it.
  static FaultVfs& install();

  // The next `n` writes to any WAL file fail (0: none).
  void fail_wal_writes(int n) { wal_writes_to_fail_ = n; }
  // WAL writes failed so far.
  int failed_writes() const { return failed_.load(); }

  // For the VFS's C callbacks.
  bool should_fail_wal_write();

 private:
  FaultVfs() = default;
  std::atomic<int> wal_writes_to_fail_{0};
  std::atomic<int> failed_{0};
};

}  // namespace swept::store::testing
