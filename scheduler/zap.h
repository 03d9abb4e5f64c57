// Who may connect to a keyed scheduler: the authorized keys and the ZAP
// handler that checks every CURVE handshake against them (ZeroMQ RFC 27,
// docs/protocol.md "Security").
//
// The --authorized DIR holds public keys (*.pub, one Z85 key each):
//   DIR/agents/*.pub   may register as agents (and nothing else);
//   DIR/clients/*.pub  may submit, cancel, retry and query (and not register);
//   DIR/*.pub          may do both (a one-person setup); a warning says so.
// The handler answers 200 for a listed key, with the key as the ZAP
// User-Id, and 400 otherwise. The broker looks up each message's User-Id
// in the same KeyRing, so a key dropped from DIR (reload() on SIGHUP) loses
// its live sessions at its next message, not only its next handshake.
//
// Thread safety: KeyRing is safe from any thread (one mutex); ZapHandler
// runs its own thread, started and stopped by its owner.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "common/mutex.h"
#include "common/status.h"

namespace swept::scheduler {

enum class KeyRole { kAgent, kClient, kBoth };

class KeyRing {
 public:
  struct Entry {
    KeyRole role;
    std::string label;  // the file it came from, relative to DIR: safe to log
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

// The ZAP handler: a REP socket on inproc://zeromq.zap.01 in the broker's
// context, answering from a KeyRing. start() before the broker binds: with
// no handler, libzmq lets every CURVE client in.
class ZapHandler {
 public:
  ZapHandler(zmq::context_t& context, std::shared_ptr<KeyRing> keys) : context_(context), keys_(std::move(keys)) {}
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
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool>* reload_ = nullptr;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace swept::scheduler
