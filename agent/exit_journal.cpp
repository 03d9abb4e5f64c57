// ExitJournal: see exit_journal.h for what the file holds and why.
#include "agent/exit_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "common/log.h"

namespace swept::agent {

namespace pr = protocol;

namespace {

// Past this, a journal with nothing pending is emptied.
constexpr uint64_t kCompactBytes = uint64_t{1} << 20;

std::string line_of(const pr::Message& message) {
  pr::Frames frames = pr::encode(message);
  return frames[1] + " " + frames[2] + "\n";  // the body is one line: JSON escapes its newlines
}

std::string until_line(double keep_until) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "UNTIL %.3f\n", keep_until);
  return buf;
}

// What the journal at `path` still holds unacknowledged, in recorded order.
std::vector<PendingExit> read_pending(const std::string& path) {
  std::vector<PendingExit> out;
  std::map<std::pair<int64_t, int>, std::vector<pr::Metrics>> batches;  // waiting for their exit
  double until = 0;  // the bound of the next exit
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;  // cut short
    if (line.compare(0, space, "UNTIL") == 0) {
      until = std::strtod(line.c_str() + space + 1, nullptr);
      continue;
    }
    pr::Decoded d = pr::decode({std::string(pr::kProtocolId), line.substr(0, space), line.substr(space + 1)});
    if (!d.ok()) continue;  // cut short when the agent died mid-write
    if (auto* m = std::get_if<pr::Metrics>(&*d.message)) {
      batches[{m->trial_id, m->attempt}].push_back(std::move(*m));
    } else if (auto* e = std::get_if<pr::TrialExited>(&*d.message)) {
      auto key = std::make_pair(e->trial_id, e->attempt);
      std::erase_if(out, [&](const PendingExit& p) { return p.exit.trial_id == key.first && p.exit.attempt == key.second; });
      out.push_back({std::move(*e), std::move(batches[key]), until});
      until = 0;
      batches.erase(key);
    } else if (auto* a = std::get_if<pr::ExitAck>(&*d.message)) {
      std::erase_if(out, [&](const PendingExit& p) { return p.exit.trial_id == a->trial_id && p.exit.attempt == a->attempt; });
    }
  }
  return out;
}

}  // namespace

ExitJournal::~ExitJournal() { close(); }

ExitJournal::ExitJournal(ExitJournal&& other) noexcept { *this = std::move(other); }

ExitJournal& ExitJournal::operator=(ExitJournal&& other) noexcept {
  if (this == &other) return *this;
  close();
  fd_ = std::exchange(other.fd_, -1);
  path_ = std::move(other.path_);
  pending_ = std::move(other.pending_);
  bytes_ = other.bytes_;
  failing_ = other.failing_;
  return *this;
}

void ExitJournal::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

ExitJournal ExitJournal::open(const std::string& workdir, const std::string& agent_name, double now_wall,
                              std::vector<PendingExit>* pending) {
  ExitJournal j;
  j.path_ = workdir + "/.swept-exits-" + agent_name;
  *pending = read_pending(j.path_);
  const size_t before = pending->size();
  std::erase_if(*pending, [&](const PendingExit& p) { return p.keep_until < now_wall; });
  if (pending->size() < before)
    log::info("exit journal " + j.path_ + ": " + std::to_string(before - pending->size()) +
              " unacknowledged exits are too old to report (their scheduler has requeued those trials): dropped");
  // Rewritten with only what is pending: written aside, then renamed, so
  // that a death meanwhile leaves the old journal whole.
  std::string body;
  for (const PendingExit& p : *pending) {
    for (const pr::Metrics& m : p.unacked) body += line_of(m);
    body += until_line(p.keep_until);
    body += line_of(p.exit);
    j.pending_[{p.exit.trial_id, p.exit.attempt}] = true;
  }
  const std::string aside = j.path_ + ".new";
  int fd = ::open(aside.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  bool written = fd >= 0 && ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size());
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!written || ::rename(aside.c_str(), j.path_.c_str()) != 0) {
    log::warn("exit journal " + j.path_ + ": cannot write it (" + std::strerror(written ? errno : err) +
              "): the exits of trials that end while the agent is away from its scheduler are lost if it dies");
    ::unlink(aside.c_str());
    return j;
  }
  j.fd_ = ::open(j.path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  j.bytes_ = body.size();
  if (!pending->empty())
    log::info("exit journal " + j.path_ + ": " + std::to_string(pending->size()) +
              " trial exits a previous agent did not see acknowledged, reported on registering");
  return j;
}

bool ExitJournal::append(const pr::Message& message) { return append_line(line_of(message)); }

bool ExitJournal::append_line(const std::string& line) {
  if (fd_ < 0) return false;
  ssize_t n = ::write(fd_, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) {
    if (!failing_)
      log::warn("exit journal " + path_ + ": a write failed (" + std::string(n < 0 ? std::strerror(errno) : "short") +
                "): an exit is not kept for the next agent should this one die");
    failing_ = true;
    return false;
  }
  failing_ = false;
  bytes_ += line.size();
  return true;
}

void ExitJournal::record(const pr::TrialExited& exit, const std::deque<pr::Metrics>& unacked, double keep_until) {
  if (fd_ < 0) return;
  for (const pr::Metrics& m : unacked) append(m);
  // The bound and the exit in one write: a death between them leaves neither.
  if (append_line(until_line(keep_until) + line_of(exit))) pending_[{exit.trial_id, exit.attempt}] = true;
}

void ExitJournal::acknowledged(int64_t trial_id, int attempt) {
  if (fd_ < 0 || !pending_.erase({trial_id, attempt})) return;
  if (pending_.empty() && bytes_ > kCompactBytes) {
    // Nothing pending: what the file holds is all acknowledged.
    if (::ftruncate(fd_, 0) == 0) bytes_ = 0;
    return;
  }
  append(pr::ExitAck{trial_id, attempt});
}

}  // namespace swept::agent
