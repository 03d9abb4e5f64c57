// See db_lock.h for the contract.
#include "store/db_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace swept::store {

namespace {

std::string read_all(int fd) {
  std::string text;
  char buf[512];
  if (::lseek(fd, 0, SEEK_SET) < 0) return text;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0 || text.size() > 4096) break;
    text.append(buf, static_cast<size_t>(n));
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  for (char& c : text)
    if (c == '\n') c = ' ';
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';  // the file is not trusted text
  return text;
}

}  // namespace

Result<std::unique_ptr<DbLock>> DbLock::acquire(const std::string& db_path) {
  const std::string path = db_path + ".lock";
  struct stat st {};
  if (::stat(db_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::InvalidArgument("'" + db_path + "' is a directory, not a database file: pass a file as --db (e.g. " +
                                   db_path + "/swept.db)");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::IoError("cannot create the lock file " + path + " (" + std::strerror(errno) +
                           "): the scheduler needs a folder it can write beside its --db");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = err == EWOULDBLOCK ? read_all(fd) : std::string();
    ::close(fd);
    if (err != EWOULDBLOCK)
      return Status::IoError("cannot lock " + path + " (" + std::strerror(err) + ")");
    if (holder.empty()) holder = "another process (it has not written its pid yet)";
    return Status::FailedPrecondition("database " + db_path + " is in use by a scheduler: " + holder + " (lock " +
                                      path + "); stop that scheduler first, or pass another --db");
  }
  std::unique_ptr<DbLock> lock(new DbLock(fd, path));
  lock->write_holder("");
  return lock;
}

void DbLock::set_address(const std::string& address) { write_holder(address); }

void DbLock::write_holder(const std::string& address) {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::string text = "pid " + std::to_string(::getpid()) + " on " + host;
  if (!address.empty()) text += " listening on " + address;
  text += "\n";
  // Best effort: the text only informs a refused second scheduler.
  if (::ftruncate(fd_, 0) != 0) return;
  if (::pwrite(fd_, text.data(), text.size(), 0) < 0) return;
}

DbLock::~DbLock() {
  // The lock file stays (unlinking it would race a scheduler starting now);
  // closing the descriptor releases the lock.
  ::close(fd_);
}

}  // namespace swept::store
