// CurveZMQ keys and the client side of an authenticated connection
// (docs/protocol.md, "Security"). Built on libzmq's own CURVE support:
// zmq_curve_keypair makes keys, zmq_z85_* encodes them, the socket options
// ZMQ_CURVE_* turn a socket into a CURVE client or server.
//
// Key files (`swept keygen --out PREFIX`):
//   PREFIX.key  the secret key, Z85 (40 characters), mode 0600;
//   PREFIX.pub  the public key, Z85.
// Lines starting with '#' are comments. The public key is derived from the
// secret one (zmq_curve_public), so a .key file is all a peer needs of its own.
//
// Keys are never logged: error messages name files, never their contents.
// Thread safety: free functions are thread-safe; a HandshakeWatch belongs to
// the thread that owns its socket.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace swept::curvezmq {

constexpr size_t kZ85KeyLength = 40;

struct KeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85
};

// A fresh key pair from libzmq (libsodium's randomness).
Result<KeyPair> generate();
// Writes PREFIX.key (mode 0600) and PREFIX.pub. Refuses (InvalidArgument)
// when either exists: a key is never overwritten.
Status write_key_files(const std::string& prefix, const KeyPair& keys);
// Reads a .key file; the public half is derived. InvalidArgument naming the
// file when it is missing or not a Z85 key, when others may read it (chmod
// 600), or when it is a public key (a .pub name, or the key of its own
// PREFIX.pub): then it names the .key file to pass instead.
Result<KeyPair> read_secret_key_file(const std::string& path);
// Reads a .pub file (one Z85 key).
Result<std::string> read_public_key_file(const std::string& path);

// What a client or an agent needs to talk to a keyed scheduler.
struct ClientKeys {
  KeyPair own;
  std::string server_public;  // Z85
  bool enabled() const { return !own.secret_key.empty(); }
};

// From --key/--scheduler-pub, each falling back to SWEPT_KEY /
// SWEPT_SCHEDULER_PUB. Both or neither: one without the other is an
// InvalidArgument saying which is missing. Neither: keys disabled.
Result<ClientKeys> client_keys(const std::string& key_flag, const std::string& scheduler_pub_flag);

// How long a CURVE handshake may take before the connection is dropped.
constexpr int kHandshakeTimeoutMs = 5000;

// Makes `socket` (a raw void* ZeroMQ socket, before connect) a CURVE
// client of the scheduler when keys are enabled; sets the handshake timeout
// either way.
Status apply_client(void* socket, const ClientKeys& keys);
// Makes `socket` (before bind) a CURVE server with this key pair; its peers
// are then checked by the ZAP handler of the socket's context.
Status apply_server(void* socket, const KeyPair& keys, const std::string& zap_domain);

// Watches a client socket's handshakes (zmq_socket_monitor) so that a
// refused key, a wrong scheduler key, or a keyed/unkeyed mismatch fails at
// once with a message saying which, instead of looking like silence.
class HandshakeWatch {
 public:
  HandshakeWatch() = default;
  ~HandshakeWatch();
  HandshakeWatch(const HandshakeWatch&) = delete;
  HandshakeWatch& operator=(const HandshakeWatch&) = delete;

  // Starts monitoring `socket` (call before connect). `keyed`: whether the
  // socket uses CURVE (it changes what a failure means).
  Status start(void* context, void* socket, bool keyed);
  // Reads the events so far, never blocking. A message saying what is wrong
  // and what to do once a handshake has failed; nullopt otherwise.
  std::optional<std::string> failure();
  // For zmq_poll: the monitor's socket (null before start).
  void* socket() const { return monitor_; }

 private:
  void* monitor_ = nullptr;
  bool keyed_ = false;
  bool succeeded_ = false;
  std::optional<std::string> failure_;
};

}  // namespace swept::curvezmq
