// Building the HTTP(S) server and loading its TLS files: see tls_setup.h.
#include "web/tls_setup.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "common/log.h"

namespace swept::web {

namespace {

// The newest OpenSSL error on this thread, as text ("" when none), and the
// queue cleared so that the next failure reports its own.
std::string openssl_error() {
  unsigned long code = ERR_peek_last_error();
  std::string text;
  if (code != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    text = buf;
  }
  ERR_clear_error();
  return text;
}

// A key file that asks for a passphrase must fail, not prompt on the
// terminal of a daemon: this callback supplies none.
extern "C" int no_passphrase(char*, int, int, void*) { return 0; }

// What the server offers: Mozilla's "intermediate" profile (v5.7), less
// its DHE suites. TLS 1.2 at least, and 1.3 (which OpenSSL prefers whenever
// the client offers it). For TLS 1.2 only ECDHE key exchange (forward
// secrecy: a key stolen later decrypts no recorded session) with AEAD
// ciphers (AES-GCM, ChaCha20-Poly1305): no RSA key exchange, no CBC with
// its SHA-1 or SHA-256 MACs. DHE is left out: it would need DH parameters
// of our own, and the clients Mozilla's profile serves all offer ECDHE.
// The client's order wins, as Mozilla advises when every suite is strong.
// TLS 1.3's own suites are all AEAD with forward secrecy; set for clarity.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
constexpr const char* kTls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr const char* kGroups = "X25519:P-256:P-384";

Status offer_intermediate_profile(SSL_CTX& ctx) {
  if (SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION) != 1 || SSL_CTX_set_cipher_list(&ctx, kTls12Ciphers) != 1 ||
      SSL_CTX_set_ciphersuites(&ctx, kTls13Suites) != 1 || SSL_CTX_set1_groups_list(&ctx, kGroups) != 1)
    return Status::Internal("this OpenSSL cannot offer TLS 1.2 with ECDHE and AES-GCM (OpenSSL: " + openssl_error() +
                            "); link swept against OpenSSL 1.1.1 or newer");
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  return Status::Ok();
}

// Loads the certificate chain and its private key into `ctx`, and checks
// that they belong together. InvalidArgument names the file and the fix.
Status load_tls_files(SSL_CTX& ctx, const std::string& cert, const std::string& key) {
  for (const auto& [flag, file] : {std::pair<const char*, const std::string&>{"--tls-cert", cert}, {"--tls-key", key}}) {
    if (::access(file.c_str(), R_OK) != 0)
      return Status::InvalidArgument(std::string("cannot read ") + flag + " " + file + ": " + std::strerror(errno) +
                                     "; give a PEM file this user can read");
  }
  ERR_clear_error();
  if (Status offered = offer_intermediate_profile(ctx); !offered.ok()) return offered;
  SSL_CTX_set_default_passwd_cb(&ctx, no_passphrase);
  if (SSL_CTX_use_certificate_chain_file(&ctx, cert.c_str()) != 1)
    return Status::InvalidArgument("--tls-cert " + cert + " is not a PEM certificate (chain) (OpenSSL: " +
                                   openssl_error() + "); give the server's certificate in PEM form, e.g. the "
                                   "fullchain.pem of your certificate authority");
  if (SSL_CTX_use_PrivateKey_file(&ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    std::string why = openssl_error();
    if (why.find("values mismatch") != std::string::npos)
      return Status::InvalidArgument("--tls-key " + key + " is not the private key of --tls-cert " + cert +
                                     "; give the key the certificate was issued for");
    return Status::InvalidArgument("--tls-key " + key + " is not an unencrypted PEM private key (OpenSSL: " + why +
                                   "); a key with a passphrase cannot be used: decrypt it with "
                                   "'openssl pkey -in KEY -out PLAIN.key'");
  }
  if (SSL_CTX_check_private_key(&ctx) != 1)
    return Status::InvalidArgument("--tls-key " + key + " is not the private key of --tls-cert " + cert +
                                   " (OpenSSL: " + openssl_error() + "); give the key the certificate was issued for");
  if (X509* x = SSL_CTX_get0_certificate(&ctx); x && X509_cmp_current_time(X509_get0_notAfter(x)) < 0)
    log::warn("web: the TLS certificate " + cert + " has expired: browsers will refuse it; renew it");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<GatedServer>> make_http_server(const ServerOptions& options) {
  GateOptions gate;
  gate.max_unauthenticated = options.max_unauthenticated;
  gate.unauthenticated_timeout = std::chrono::milliseconds(options.unauthenticated_timeout_ms);
  if (options.tls_cert.empty() && options.tls_key.empty()) return std::make_unique<GatedServer>(gate, nullptr);
  if (options.tls_cert.empty() || options.tls_key.empty())
    return Status::InvalidArgument(std::string(options.tls_cert.empty() ? "--tls-key" : "--tls-cert") +
                                   " was given without " + (options.tls_cert.empty() ? "--tls-cert" : "--tls-key") +
                                   ": TLS needs both the certificate and its private key");
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) return Status::Internal("cannot create a TLS context (OpenSSL: " + openssl_error() + ")");
  Status loaded = load_tls_files(*ctx, options.tls_cert, options.tls_key);
  if (!loaded.ok()) {
    SSL_CTX_free(ctx);
    return loaded;
  }
  return std::make_unique<GatedServer>(gate, ctx);
}


}  // namespace swept::web
