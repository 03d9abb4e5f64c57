// Copying a population-based-training member's checkpoint (issue 29): the
// directory an ended segment left behind, copied into the directory of the
// segment about to start (START_TRIAL `checkpoint`, docs/protocol.md).
//
// Why a copy into a fresh directory, verified before it is used:
//  - the source is a segment that has ended (its process exited after
//    SIGTERM, so it saved), and no later segment writes there (each segment
//    has its own directory): the copy never reads a checkpoint being written;
//  - the copy goes to `<dest>.incoming` first and is renamed to `<dest>` only
//    once every file's size and CRC-32 read back from the destination match
//    what was read from the source, so a trial never starts on half a copy,
//    and a member's own directory is never overwritten by one.
// Symbolic links and other non-regular files are refused: a link would make
// two segments share (and write) one file.
// Errors: NotFound when `from` is not a directory; Unavailable for an I/O
// failure on this host (disk full, permissions); Corruption when a file read
// back differs. Thread safety: none needed (no shared state).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace swept::agent {

struct CopyStats {
  int64_t files = 0;
  int64_t bytes = 0;
};

// A file's size and CRC-32 (zlib's), read whole. Unavailable when it
// cannot be read.
struct FileDigest {
  int64_t bytes = 0;
  uint32_t crc = 0;
};
Result<FileDigest> digest_file(const std::string& path);

// Pruning a member's old segments on this host (docs/checkpoints.md, "Old
// segments"): removes every folder of `segments_dir` whose name is a
// segment number other than `keep_a` and `keep_b` (leftover `.incoming` and
// `.pulled` folders of those two stay: their own code replaces them).
// Returns how many folders it removed; Unavailable when one cannot be.
Result<int> prune_segments(const std::string& segments_dir, int keep_a, int keep_b);

// Copies the tree at `from` into a new directory `to` (which must not exist
// yet; a leftover `<to>.incoming` from an interrupted copy is removed first).
Result<CopyStats> copy_checkpoint(const std::string& from, const std::string& to);

}  // namespace swept::agent
