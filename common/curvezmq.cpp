// CurveZMQ keys and handshakes: see curvezmq.h.
#include "common/curvezmq.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

#include "common/random_id.h"

namespace swept::curvezmq {
namespace {

constexpr const char* kNeedsKeys =
    "the scheduler requires keys: pass --key FILE --scheduler-pub FILE (or set SWEPT_KEY and SWEPT_SCHEDULER_PUB); "
    "swept keygen --out PREFIX makes a key";

std::string zmq_error(const char* call) { return std::string(call) + " failed: " + zmq_strerror(zmq_errno()); }

bool is_z85_key(const std::string& s) {
  if (s.size() != kZ85KeyLength) return false;
  uint8_t raw[32];
  return zmq_z85_decode(raw, s.c_str()) != nullptr;
}

// The one key a key file holds: its first line that is neither empty nor a comment.
Result<std::string> read_key_line(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("cannot read " + std::string(what) + " file " + path + ": " + std::strerror(errno));
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    line = line.substr(start);
    if (!is_z85_key(line))
      return Status::InvalidArgument(path + " is not a " + what +
                                     " file: expected one 40-character Z85 key (made by swept keygen --out PREFIX)");
    return line;
  }
  return Status::InvalidArgument(path + " holds no key: expected one 40-character Z85 key (swept keygen --out PREFIX)");
}

Status write_new_file(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST)
      return Status::InvalidArgument(path + " already exists: swept keygen never overwrites a key; choose another --out");
    return Status::IoError("cannot create " + path + ": " + std::strerror(errno));
  }
  // O_CREAT's mode passes through the umask; the secret must end up 0600 whatever it is.
  bool ok = ::fchmod(fd, mode) == 0;
  size_t done = 0;
  while (ok && done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ok = false;
    else done += static_cast<size_t>(n);
  }
  ok = ::fsync(fd) == 0 && ok;
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    ::unlink(path.c_str());
    return Status::IoError("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

// Where a public key was given as the secret one (--key alice.pub), says so
// and names the secret key; nullopt otherwise. It runs before the mode check,
// which would otherwise advise chmod 600 on the .pub, after which the client
// used the public key as its secret (issue 26). Two signs, each sure: the
// .pub name keygen gives public keys, or the very key of the file's own
// PREFIX.pub (alice.key overwritten by a copy of alice.pub).
std::optional<Status> public_key_as_secret(const std::string& path) {
  const std::string pub_ext = ".pub";
  if (path.size() > pub_ext.size() && path.compare(path.size() - pub_ext.size(), pub_ext.size(), pub_ext) == 0)
    return Status::InvalidArgument(path + " is a public key: --key and SWEPT_KEY take this peer's secret key, " +
                                   path.substr(0, path.size() - pub_ext.size()) +
                                   ".key (written with it by swept keygen; keep it private)");
  size_t base = path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1;
  size_t dot = path.rfind('.');
  std::string own_pub = (dot != std::string::npos && dot > base ? path.substr(0, dot) : path) + pub_ext;
  auto key = read_key_line(path, "secret key");
  auto pub = read_key_line(own_pub, "public key");
  if (key.ok() && pub.ok() && *key == *pub)
    return Status::InvalidArgument(path + " holds the public key of " + own_pub +
                                   ", not a secret key: pass the secret key made with it by swept keygen (if it "
                                   "is lost, make a new pair and authorize its .pub)");
  return std::nullopt;
}

std::string from_env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

Result<KeyPair> generate() {
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0)
    return Status::MissingDependency(zmq_error("zmq_curve_keypair") +
                                     " (this libzmq was built without CURVE; install Debian's libzmq5)");
  return KeyPair{pub, sec};
}

Status write_key_files(const std::string& prefix, const KeyPair& keys) {
  const std::string key_path = prefix + ".key", pub_path = prefix + ".pub";
  struct stat st;
  for (const std::string& p : {key_path, pub_path})
    if (::lstat(p.c_str(), &st) == 0)
      return Status::InvalidArgument(p + " already exists: swept keygen never overwrites a key; choose another --out");
  SWEPT_RETURN_IF_ERROR(write_new_file(
      key_path, "# swept CURVE secret key: keep it private (mode 0600); its public half is " + prefix + ".pub\n" +
                    keys.secret_key + "\n",
      0600));
  Status s = write_new_file(pub_path, keys.public_key + "\n", 0644);
  if (!s.ok()) ::unlink(key_path.c_str());
  return s;
}

Result<KeyPair> read_secret_key_file(const std::string& path) {
  if (std::optional<Status> wrong = public_key_as_secret(path)) return *wrong;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077))
    return Status::InvalidArgument(path + " is readable by other users (mode " +
                                   std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
                                   std::to_string(st.st_mode & 7) + "): run chmod 600 " + path);
  auto secret = read_key_line(path, "secret key");
  if (!secret.ok()) return secret.status();
  char pub[41];
  if (zmq_curve_public(pub, secret->c_str()) != 0)
    return Status::InvalidArgument(path + ": cannot derive the public key: " + zmq_error("zmq_curve_public"));
  return KeyPair{pub, *secret};
}

Result<std::string> read_public_key_file(const std::string& path) { return read_key_line(path, "public key"); }

Result<ClientKeys> client_keys(const std::string& key_flag, const std::string& scheduler_pub_flag) {
  std::string key = key_flag.empty() ? from_env("SWEPT_KEY") : key_flag;
  std::string pub = scheduler_pub_flag.empty() ? from_env("SWEPT_SCHEDULER_PUB") : scheduler_pub_flag;
  ClientKeys out;
  if (key.empty() && pub.empty()) return out;
  if (key.empty())
    return Status::InvalidArgument("--scheduler-pub given without --key: pass this peer's secret key too "
                                   "(--key FILE or SWEPT_KEY)");
  if (pub.empty())
    return Status::InvalidArgument("--key given without --scheduler-pub: pass the scheduler's public key too "
                                   "(--scheduler-pub FILE or SWEPT_SCHEDULER_PUB)");
  auto own = read_secret_key_file(key);
  if (!own.ok()) return own.status();
  auto server = read_public_key_file(pub);
  if (!server.ok()) return server.status();
  out.own = std::move(*own);
  out.server_public = std::move(*server);
  return out;
}

Status apply_client(void* socket, const ClientKeys& keys) {
  int ivl = kHandshakeTimeoutMs;
  if (zmq_setsockopt(socket, ZMQ_HANDSHAKE_IVL, &ivl, sizeof ivl) != 0)
    return Status::Unavailable(zmq_error("zmq_setsockopt(ZMQ_HANDSHAKE_IVL)"));
  if (!keys.enabled()) return Status::Ok();
  if (zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, keys.server_public.c_str(), kZ85KeyLength + 1) != 0 ||
      zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, keys.own.public_key.c_str(), kZ85KeyLength + 1) != 0 ||
      zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, keys.own.secret_key.c_str(), kZ85KeyLength + 1) != 0)
    return Status::Unavailable(zmq_error("zmq_setsockopt(ZMQ_CURVE_*)"));
  return Status::Ok();
}

Status apply_server(void* socket, const KeyPair& keys, const std::string& zap_domain) {
  int one = 1, ivl = kHandshakeTimeoutMs;
  if (zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
      zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, keys.secret_key.c_str(), kZ85KeyLength + 1) != 0 ||
      zmq_setsockopt(socket, ZMQ_ZAP_DOMAIN, zap_domain.data(), zap_domain.size()) != 0 ||
      zmq_setsockopt(socket, ZMQ_HANDSHAKE_IVL, &ivl, sizeof ivl) != 0)
    return Status::Unavailable(zmq_error("zmq_setsockopt(ZMQ_CURVE_SERVER ...)"));
  return Status::Ok();
}

HandshakeWatch::~HandshakeWatch() {
  if (monitor_) {
    int zero = 0;
    zmq_setsockopt(monitor_, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(monitor_);
  }
}

Status HandshakeWatch::start(void* context, void* socket, bool keyed) {
  keyed_ = keyed;
  std::string address = "inproc://swept-handshake-" + random_hex(16);
  int events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_DISCONNECTED;
  if (zmq_socket_monitor(socket, address.c_str(), events) != 0)
    return Status::Unavailable(zmq_error("zmq_socket_monitor"));
  monitor_ = zmq_socket(context, ZMQ_PAIR);
  if (!monitor_) return Status::Unavailable(zmq_error("zmq_socket(ZMQ_PAIR)"));
  if (zmq_connect(monitor_, address.c_str()) != 0) return Status::Unavailable(zmq_error("zmq_connect(monitor)"));
  return Status::Ok();
}

std::optional<std::string> HandshakeWatch::failure() {
  while (monitor_ && !failure_) {
    zmq_msg_t event, endpoint;
    zmq_msg_init(&event);
    if (zmq_msg_recv(&event, monitor_, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&event);
      break;
    }
    uint16_t id = 0;
    uint32_t value = 0;
    if (zmq_msg_size(&event) >= 6) {
      std::memcpy(&id, zmq_msg_data(&event), 2);
      std::memcpy(&value, static_cast<char*>(zmq_msg_data(&event)) + 2, 4);
    }
    bool more = zmq_msg_more(&event);
    zmq_msg_close(&event);
    if (more) {  // the second frame, the endpoint: not needed
      zmq_msg_init(&endpoint);
      zmq_msg_recv(&endpoint, monitor_, 0);
      zmq_msg_close(&endpoint);
    }
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      succeeded_ = true;
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      failure_ = "the scheduler refused this key (ZAP status " + std::to_string(value) +
                 "): its .pub file is not in the scheduler's --authorized directory for this role "
                 "(agents/ for swept agent, clients/ for the other commands), or it was revoked";
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
      failure_ = keyed_ ? "the scheduler does not use keys but this command does: drop --key/--scheduler-pub "
                          "(SWEPT_KEY/SWEPT_SCHEDULER_PUB), or start the scheduler with --key and --authorized"
                        : kNeedsKeys;
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
               (id == ZMQ_EVENT_DISCONNECTED && keyed_ && !succeeded_)) {
      // Without keys nothing but a keyed scheduler fails a handshake (the
      // mismatch is not always reported as such: it may be a plain close).
      failure_ = keyed_ ? "the secure handshake with the scheduler failed: is --scheduler-pub (SWEPT_SCHEDULER_PUB) "
                          "the public half of the scheduler's --key?"
                        : kNeedsKeys;
    }
  }
  return failure_;
}

}  // namespace swept::curvezmq
