// DbLock: one scheduler per database, for the scheduler's whole life.
//
// Two schedulers writing one database steal each other's running trials
// (issue 15, defect 1). The scheduler therefore takes an exclusive flock(2)
// on a lock file beside the database, `<db>.lock`, before it opens the
// database, and keeps it until it exits. The lock is the kernel's: when the
// holder dies, even by SIGKILL, the lock goes with its file descriptor, so a
// stale lock file never blocks a restart. The file's text only says who
// holds it (pid, host, address) so that a refused second scheduler can name
// the holder; it is never trusted for the decision itself.
//
// Only the writer (`swept scheduler`, `swept run`) takes it; readers (`swept
// status --db`, `swept web`) do not. Thread safety: one owner.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace swept::store {

class DbLock {
 public:
  // Takes the lock for database `db_path`. FailedPrecondition naming the
  // holder if another process holds it; IoError if the lock file cannot be
  // created (an unwritable folder).
  static Result<std::unique_ptr<DbLock>> acquire(const std::string& db_path);
  ~DbLock();
  DbLock(const DbLock&) = delete;
  DbLock& operator=(const DbLock&) = delete;

  // Records where this scheduler listens (shown to a refused second one).
  void set_address(const std::string& address);
  const std::string& path() const { return path_; }

 private:
  DbLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void write_holder(const std::string& address);
  int fd_;
  std::string path_;
};

}  // namespace swept::store
