// Moving a population-based-training segment's checkpoint from the agent
// that holds it to the agent about to start the next segment (issue 29;
// docs/protocol.md, CHECKPOINT_PULL and CHECKPOINT_PART; docs/checkpoints.md).
//
// Both sides are pure functions of files and messages, with no socket and no
// clock: the agent's loop (agent_pull.cpp) sends and times the pulls.
//  - The holder answers each pull on its own (serve_pull): the manifest (each
//    file's path, size and CRC-32) or up to kCheckpointPartBytes of one file.
//    It keeps nothing between pulls, so a repeated pull (sent again after a
//    timeout) is answered again, and a holder that restarts loses nothing.
//    It reads only ended segments (nothing writes them any more), only
//    regular files inside `<root>/sweep-S/trial-T/segments/A`.
//  - The recipient (CheckpointFetch) asks for the manifest, then for each
//    file in turn, writes what comes into `<dest>.incoming`, checks each
//    file's size and CRC-32 against the manifest as it arrives and again
//    read back from disk, and renames the folder to `<dest>` only when every
//    file matched: a trial never starts on part of a checkpoint.
// Thread safety: none needed (a CheckpointFetch belongs to the agent's loop).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "agent/checkpoint_copy.h"
#include "common/protocol.h"
#include "common/status.h"

namespace swept::agent {

// The folder of segment `attempt` of trial `trial_id` of sweep `sweep_id`
// under an agent's work root: where that segment's trial saved.
std::string segment_dir(const std::string& root, int64_t sweep_id, int64_t trial_id, int attempt);

// The holder's answer to `pull` (its sweep_id set by the scheduler): the
// manifest for path "", else the bytes of that file from `offset`. A segment
// or file that cannot be read is answered with `error` saying why.
protocol::CheckpointPart serve_pull(const std::string& root, const protocol::CheckpointPull& pull);

class CheckpointFetch {
 public:
  // `first` names the segment to start and its source (path "", offset 0);
  // `dest` is the folder to fill, which must not exist yet.
  CheckpointFetch(protocol::CheckpointPull first, std::string dest);
  CheckpointFetch(CheckpointFetch&&) = default;
  CheckpointFetch& operator=(CheckpointFetch&&) = default;

  // What to ask for next: sent once, and again when no part answered it in time.
  const protocol::CheckpointPull& pull() const { return pull_; }
  // A part that arrived. True when it answered pull() and the fetch moved
  // on (send pull() next, unless done()); false when it answered an earlier
  // pull (a duplicate after a resend): ignored. Errors end the fetch (its
  // incoming folder removed): Unavailable for the holder's error or a write
  // that failed here, Corruption for a file whose size or CRC-32 differs
  // from the manifest's, InvalidArgument for a part that overruns its file.
  Result<bool> take(const protocol::CheckpointPart& part);
  // Every file arrived, matched, and `dest` holds them.
  bool done() const { return done_; }
  const CopyStats& stats() const { return stats_; }
  // Removes what a fetch that will not finish has written.
  void abandon();

 private:
  Status start_next_file();  // opens the next non-empty file, or finishes
  Status finish_file();      // the current file is whole: checked, closed
  Status fail(Status why);   // abandon(), then `why`

  protocol::CheckpointPull pull_;
  std::string dest_;
  std::string incoming_;
  std::vector<protocol::CheckpointFile> files_;
  size_t next_file_ = 0;    // index in files_ of the file being fetched
  bool have_manifest_ = false;
  bool done_ = false;
  std::ofstream out_;
  uint32_t crc_ = 0;        // of the bytes of the current file so far
  CopyStats stats_;
};

}  // namespace swept::agent
