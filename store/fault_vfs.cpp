// FaultVfs: see fault_vfs.h. Each file the wrapper opens is a FaultFile: our
// sqlite3_file header followed by the default VFS's own file structure, to
// which every method forwards.
#include "store/fault_vfs.h"

#include <sqlite3.h>

#include <cstring>

namespace swept::store::testing {
namespace {

struct FaultFile {
  sqlite3_file base;  // must be first: SQLite sees this
  bool is_wal;
  sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};

sqlite3_vfs* g_real = nullptr;
sqlite3_vfs g_vfs;
FaultVfs* g_fault = nullptr;

FaultFile* ff(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f); }
sqlite3_file* real(sqlite3_file* f) { return ff(f)->real(); }

int x_close(sqlite3_file* f) { return real(f)->pMethods->xClose(real(f)); }
int x_read(sqlite3_file* f, void* b, int n, sqlite3_int64 o) { return real(f)->pMethods->xRead(real(f), b, n, o); }
int x_write(sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
  if (ff(f)->is_wal && g_fault->should_fail_wal_write()) return SQLITE_IOERR_WRITE;
  return real(f)->pMethods->xWrite(real(f), b, n, o);
}
int x_truncate(sqlite3_file* f, sqlite3_int64 s) { return real(f)->pMethods->xTruncate(real(f), s); }
int x_sync(sqlite3_file* f, int flags) { return real(f)->pMethods->xSync(real(f), flags); }
int x_size(sqlite3_file* f, sqlite3_int64* s) { return real(f)->pMethods->xFileSize(real(f), s); }
int x_lock(sqlite3_file* f, int l) { return real(f)->pMethods->xLock(real(f), l); }
int x_unlock(sqlite3_file* f, int l) { return real(f)->pMethods->xUnlock(real(f), l); }
int x_check(sqlite3_file* f, int* r) { return real(f)->pMethods->xCheckReservedLock(real(f), r); }
int x_control(sqlite3_file* f, int op, void* a) { return real(f)->pMethods->xFileControl(real(f), op, a); }
int x_sector(sqlite3_file* f) { return real(f)->pMethods->xSectorSize(real(f)); }
int x_caps(sqlite3_file* f) { return real(f)->pMethods->xDeviceCharacteristics(real(f)); }
int x_shm_map(sqlite3_file* f, int i, int sz, int ext, void volatile** p) {
  return real(f)->pMethods->xShmMap(real(f), i, sz, ext, p);
}
int x_shm_lock(sqlite3_file* f, int off, int n, int flags) { return real(f)->pMethods->xShmLock(real(f), off, n, flags); }
void x_shm_barrier(sqlite3_file* f) { real(f)->pMethods->xShmBarrier(real(f)); }
int x_shm_unmap(sqlite3_file* f, int del) { return real(f)->pMethods->xShmUnmap(real(f), del); }

// Version 2 (WAL needs the shared-memory methods); memory-mapped I/O
// (version 3) is left to the default VFS's files by not offering it here.
const sqlite3_io_methods kMethods = {
    2,         x_close,     x_read,  x_write,   x_truncate,     x_sync,     x_size,      x_lock,
    x_unlock,  x_check,     x_control, x_sector, x_caps,        x_shm_map,  x_shm_lock,  x_shm_barrier,
    x_shm_unmap, nullptr, nullptr};

int x_open(sqlite3_vfs*, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  FaultFile* file = ff(f);
  std::memset(file, 0, sizeof(FaultFile));
  int rc = g_real->xOpen(g_real, name, file->real(), flags, out_flags);
  if (rc != SQLITE_OK) return rc;
  file->is_wal = (flags & SQLITE_OPEN_WAL) != 0;
  file->base.pMethods = file->real()->pMethods ? &kMethods : nullptr;
  return SQLITE_OK;
}

int x_delete(sqlite3_vfs*, const char* name, int sync) { return g_real->xDelete(g_real, name, sync); }
int x_access(sqlite3_vfs*, const char* name, int flags, int* out) { return g_real->xAccess(g_real, name, flags, out); }
int x_full(sqlite3_vfs*, const char* name, int n, char* out) { return g_real->xFullPathname(g_real, name, n, out); }
void* x_dlopen(sqlite3_vfs*, const char* name) { return g_real->xDlOpen(g_real, name); }
void x_dlerror(sqlite3_vfs*, int n, char* msg) { g_real->xDlError(g_real, n, msg); }
void (*x_dlsym(sqlite3_vfs*, void* h, const char* sym))(void) { return g_real->xDlSym(g_real, h, sym); }
void x_dlclose(sqlite3_vfs*, void* h) { g_real->xDlClose(g_real, h); }
int x_random(sqlite3_vfs*, int n, char* out) { return g_real->xRandomness(g_real, n, out); }
int x_sleep(sqlite3_vfs*, int us) { return g_real->xSleep(g_real, us); }
int x_time(sqlite3_vfs*, double* t) { return g_real->xCurrentTime(g_real, t); }
int x_last_error(sqlite3_vfs*, int n, char* msg) { return g_real->xGetLastError(g_real, n, msg); }
int x_time64(sqlite3_vfs*, sqlite3_int64* t) { return g_real->xCurrentTimeInt64(g_real, t); }

}  // namespace

bool FaultVfs::should_fail_wal_write() {
  int left = wal_writes_to_fail_.load();
  while (left > 0) {
    if (wal_writes_to_fail_.compare_exchange_weak(left, left - 1)) {
      ++failed_;
      return true;
    }
  }
  return false;
}

FaultVfs& FaultVfs::install() {
  static FaultVfs* instance = [] {
    auto* f = new FaultVfs();
    g_fault = f;
    g_real = sqlite3_vfs_find(nullptr);
    g_vfs = sqlite3_vfs{};
    g_vfs.iVersion = 2;
    g_vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + g_real->szOsFile;
    g_vfs.mxPathname = g_real->mxPathname;
    g_vfs.zName = kName;
    g_vfs.xOpen = x_open;
    g_vfs.xDelete = x_delete;
    g_vfs.xAccess = x_access;
    g_vfs.xFullPathname = x_full;
    g_vfs.xDlOpen = x_dlopen;
    g_vfs.xDlError = x_dlerror;
    g_vfs.xDlSym = x_dlsym;
    g_vfs.xDlClose = x_dlclose;
    g_vfs.xRandomness = x_random;
    g_vfs.xSleep = x_sleep;
    g_vfs.xCurrentTime = x_time;
    g_vfs.xGetLastError = x_last_error;
    g_vfs.xCurrentTimeInt64 = x_time64;
    sqlite3_vfs_register(&g_vfs, /*makeDflt=*/0);
    return f;
  }();
  return *instance;
}

}  // namespace swept::store::testing
