// The parameter servers' wire contract and how the parameters are split
// among them. One ZeroMQ connection per (worker, server): the worker's DEALER
// (routing id "w<index>") to the server's ROUTER, which binds the port of its
// TF_CONFIG "ps" entry. Every message is one request and at most one reply,
// in order on that connection; a reply may be held back (a pull waiting for
// a version, a bounded-staleness wait).
//
// Frames (raw structs: every process runs the same binary on one
// architecture, and the hello checks the wire version and the sizes):
//   request: [PsRequest] [float32 × shard size]   (the second frame only
//            with kPushFlag: this server's slice of the gradient)
//   reply:   [PsReply] [float32 × shard size]     (kParams: the slice of the
//            parameters) | [PsReply] [reason text] (kAbort) | [PsReply] (kOk)
//
// Verbs:
//   kHello  the worker's first message: checks wire version, worker count and
//           shard size against the server's (a mismatch is kAbort with why).
//   kStep   optionally pushes a gradient computed on `pushed_version`, then
//           pulls: the reply waits until the server's version >= min_version
//           (sync), and, in async with --max_staleness=S, while this worker
//           has pushed more than S times more than the slowest unfinished one.
//           With kWantUnitFlag (server 0, async) the reply carries the next
//           unit of work (a shard of a global batch), or -1 when all
//           `total_units` are handed out.
//   kDone   the worker has finished; with kWaitAllFlag (worker 0) the reply
//           (kParams) waits until every worker has, so it holds the final
//           parameters.
//   kStop   worker 0, after its last pull: the server answers kOk and exits 0.
// The server sends kAbort, unasked, to every worker when it ends the
// attempt (a worker's connection dropped before its kDone, or the server
// was told to stop); the worker reads it as the reply to its request.
// Thread safety: plain data and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace swept::trainer {

inline constexpr uint32_t kPsWireVersion = 1;

enum class PsVerb : uint32_t { kHello = 1, kStep = 2, kDone = 3, kStop = 4 };
inline constexpr uint32_t kPushFlag = 1;
inline constexpr uint32_t kWantUnitFlag = 2;
inline constexpr uint32_t kWaitAllFlag = 4;

struct PsRequest {
  uint32_t wire = kPsWireVersion;
  PsVerb verb = PsVerb::kHello;
  int32_t worker = 0;
  uint32_t flags = 0;
  int64_t pushed_version = 0;  // the version the pushed gradient was computed on
  int64_t min_version = 0;     // the pull waits until the server has reached it
  int64_t total_units = 0;     // kWantUnitFlag: units of work in the whole run
  double lr = 0;               // the learning rate the worker's schedule gives the pushed gradient
  int64_t shard_floats = 0;    // kHello: the slice size the worker expects
  int64_t workers = 0;         // kHello: the workers its TF_CONFIG lists
};

enum class PsReplyKind : uint32_t { kOk = 1, kParams = 2, kAbort = 3 };

struct PsReply {
  uint32_t wire = kPsWireVersion;
  PsReplyKind kind = PsReplyKind::kOk;
  int64_t version = 0;  // updates applied to this server's slice
  int64_t unit = -1;    // kWantUnitFlag: the unit handed out, -1 none left
  // Staleness of the gradients applied so far (versions between the one a
  // gradient was computed on and the one it was applied to), and gradients
  // dropped (sync: late for their version), since the server started.
  double staleness_sum = 0;
  int64_t staleness_count = 0;
  int64_t staleness_max = 0;
  int64_t dropped = 0;
};

// The slice [begin, end) of the flat parameter vector (model.h's layout)
// that server `index` of `servers` holds: equal counts of float32, so equal
// bytes, split across tensor boundaries where needed (the optimiser is
// elementwise; weight decay follows each element's tensor).
inline std::pair<size_t, size_t> ps_slice(size_t total, int servers, int index) {
  const size_t n = static_cast<size_t>(servers), i = static_cast<size_t>(index);
  return {total * i / n, total * (i + 1) / n};
}

}  // namespace swept::trainer
