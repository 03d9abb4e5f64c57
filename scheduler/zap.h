// Who may connect to a keyed scheduler: the authorized keys and the ZAP
// handler that checks every CURVE handshake against them (ZeroMQ RFC 27,
// docs/protocol.md "Security").
//
// The --authorized DIR holds public keys (*.pub, one Z85 key each):
//   DIR/agents/*.pub   may register as agents (and nothing else);
//   DIR/clients/*.pub  may submit, cancel, retry and query (and not register);
//   DIR/*.pub          may do both (a one-person setup); a warning says so.
// An agent key registers one live agent at a time. A NAME.max file beside
// NAME.pub (one integer, 1 to 100000) lets that key hold up to that many
// live agents at once: a pool, for Slurm jobs or a DaemonSet that share one
// Secret (docs/protocol.md, "One agent per key").
// The handler answers 200 for a listed key, with the key as the ZAP
// User-Id, and 400 otherwise. The broker looks up each message's User-Id
// in the same KeyRing, so a key dropped from DIR (reload() on SIGHUP) loses
// its live sessions at its next message, not only its next handshake.
//
// Refusals are logged through a RefusalLog: anyone who reaches the port can
// cause one per connection, so only the first few of each minute get a line
// of their own and a summary counts the rest (issue 26).
//
// Thread safety: KeyRing is safe from any thread (one mutex); ZapHandler
// runs its own thread, started and stopped by its owner; a RefusalLog
// belongs to one thread (the handler's).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <zmq.hpp>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"

namespace swept::scheduler {

enum class KeyRole { kAgent, kClient, kBoth };

class KeyRing {
 public:
  struct Entry {
    KeyRole role;
    std::string label;  // the file it came from, relative to DIR: safe to log
    int max_agents = 1;  // live agents this key may register at once (NAME.max; 1 without)
    bool may_register() const { return role != KeyRole::kClient; }
    bool may_command() const { return role != KeyRole::kAgent; }
  };

  explicit KeyRing(std::string dir) : dir_(std::move(dir)) {}
  // Reads DIR again and replaces the set atomically. On an error (DIR
  // unreadable, a file that is not a key) the previous set stays and the
  // Status names the file. Warnings (keys with both roles) go to the log.
  Status reload();
  // A key that is authorized whatever DIR says, for this process's life: the
  // embedded dashboard's own client key (its cancel link).
  void add_fixed(const std::string& z85, Entry entry);
  // The entry of a Z85 public key (a ZAP User-Id); nullopt when not listed.
  std::optional<Entry> find(const std::string& z85) const;
  size_t size() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  mutable Mutex mu_;
  std::map<std::string, Entry> keys_ SWEPT_GUARDED_BY(mu_);   // by Z85 public key
  std::map<std::string, Entry> fixed_ SWEPT_GUARDED_BY(mu_);  // add_fixed(): kept across reloads
};

// The log of refused handshakes. Within a window of `window_ms` (from the
// first refusal after the previous window), the first `burst` refusals get a
// WARN line each; the rest are only counted. Once the window is over (seen
// by the next refusal or by flush(), which the handler calls every 100 ms
// whether or not requests come), one WARN line sums it up:
//   "12600 refused handshakes from 3 addresses in the last minute (10 shown
//    above; the most, 12000, from 10.1.2.3)"
// It is written only when some refusals went unshown. Distinct addresses
// are counted up to kMaxAddresses (memory stays bounded whatever the flood);
// beyond that the summary says "more than". Times come from the caller's
// clock (tests use a fake one).
class RefusalLog {
 public:
  static constexpr size_t kMaxAddresses = 4096;
  RefusalLog(int burst, int64_t window_ms) : burst_(burst), window_ms_(window_ms) {}
  // One refused handshake from `address` (the peer's IP, as ZAP gives it).
  void refused(int64_t now_ms, const std::string& address, std::string_view reason);
  // Writes the summary of a window that is over.
  void flush(int64_t now_ms);
  // Writes the summary of the window so far, over or not (the handler stops).
  void finish(int64_t now_ms);

 private:
  void summarize(int64_t now_ms);

  int burst_;
  int64_t window_ms_;
  int64_t window_start_ms_ = 0;
  int64_t count_ = 0;   // refusals in this window (0: no window open)
  int64_t shown_ = 0;   // of which had a line of their own
  bool addresses_overflowed_ = false;
  std::map<std::string, int64_t> by_address_;  // at most kMaxAddresses
};

// The ZAP handler: a REP socket on inproc://zeromq.zap.01 in the broker's
// context, answering from a KeyRing. start() before the broker binds: with
// no handler, libzmq lets every CURVE client in. Refusals are logged
// through a RefusalLog of 10 lines a minute on `clock`.
class ZapHandler {
 public:
  ZapHandler(zmq::context_t& context, std::shared_ptr<KeyRing> keys, const Clock& clock = SteadyClock::instance())
      : context_(context), keys_(std::move(keys)), clock_(clock) {}
  ~ZapHandler() { stop(); }
  // Binds the handler's socket and starts its thread. When `reload` is not
  // null, the thread re-reads the KeyRing within 100 ms of it becoming true
  // (set from a SIGHUP handler: a lock-free store) and clears it.
  Status start(std::atomic<bool>* reload = nullptr);
  void stop();
  uint64_t refused() const { return refused_.load(); }

 private:
  void loop(zmq::socket_t socket);

  zmq::context_t& context_;
  std::shared_ptr<KeyRing> keys_;
  const Clock& clock_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool>* reload_ = nullptr;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace swept::scheduler
