// ExitJournal: the trial exits an agent has not seen acknowledged, kept in a
// file of its work directory, so that the next agent of that name on this
// host (restarted after SIGKILL, a crash, the OOM killer) reports them: a
// trial that ran to its end is reported, never run again (issue 26;
// docs/protocol.md, "Partitions"). Slurm's step daemons keep theirs alike.
//
// The file `<workdir>/.swept-exits-<agent name>` holds one line per record,
// `KIND BODY`, a message in the protocol's own encoding (common/protocol.h):
// the METRICS batches still unacknowledged when a trial ended, then its
// TRIAL_EXITED; later an EXIT_ACK line once the scheduler acknowledged that
// exit. Lines are only appended (one write(2) each, O_APPEND). open() reads
// what a previous agent left, returns what is still unacknowledged, and
// rewrites the file with only that (written aside, then renamed); once
// nothing is pending and the file has grown past 1 MiB, it is emptied.
// Not synced: it serves an agent that dies on a host that stays up, not a
// host that loses its power. A write that fails (a full disk) is logged
// when failures start; the agent and its trials go on, that exit unkept.
// A line that cannot be read (cut short by the agent's death) is skipped.
//
// Each exit is kept only while its scheduler may still hold the attempt for
// a report (`keep_until`, wall clock: a few leases after it ended, on an
// `UNTIL SECONDS` line before it): an older one would reach a scheduler
// that has long requeued the trial, or another scheduler's database, whose
// trial of the same number is another trial.
//
// Thread safety: none; a journal belongs to the agent's loop.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/protocol.h"

namespace swept::agent {

// One exit a previous agent recorded and never saw acknowledged.
struct PendingExit {
  protocol::TrialExited exit;
  std::vector<protocol::Metrics> unacked;  // its batches not acknowledged then, oldest first
  double keep_until = 0;                   // wall seconds: reported only before then
};

class ExitJournal {
 public:
  ExitJournal() = default;  // keeps nothing (an agent without a work directory)
  ~ExitJournal();
  ExitJournal(const ExitJournal&) = delete;
  ExitJournal& operator=(const ExitJournal&) = delete;
  ExitJournal(ExitJournal&& other) noexcept;
  ExitJournal& operator=(ExitJournal&& other) noexcept;

  // Opens (creating) the journal of agent `agent_name` in `workdir`, and
  // fills `pending` with the exits left unacknowledged there whose
  // keep_until is not before `now_wall` (wall seconds), in the order they
  // were recorded. A journal that cannot be opened is logged and keeps nothing.
  static ExitJournal open(const std::string& workdir, const std::string& agent_name, double now_wall,
                          std::vector<PendingExit>* pending);

  // A trial ended: its exit, after the batches not yet acknowledged, to be
  // reported by a later agent only until `keep_until` (wall seconds).
  void record(const protocol::TrialExited& exit, const std::deque<protocol::Metrics>& unacked, double keep_until);
  // The scheduler acknowledged the exit of (trial, attempt).
  void acknowledged(int64_t trial_id, int attempt);

  const std::string& path() const { return path_; }
  // Exits recorded and not acknowledged.
  size_t pending() const { return pending_.size(); }

 private:
  bool append(const protocol::Message& message);
  bool append_line(const std::string& line);
  void close();

  int fd_ = -1;
  std::string path_;
  std::map<std::pair<int64_t, int>, bool> pending_;  // (trial, attempt) recorded, not acknowledged
  uint64_t bytes_ = 0;    // the file's length, about
  bool failing_ = false;  // the last write failed (said once until one succeeds)
};

}  // namespace swept::agent
