// The dashboard over TLS (issue 14): a real Server with --tls-cert/--tls-key
// on a port picked at run time, fetched with httplib's HTTPS client that
// verifies the server against the throwaway self-signed certificate this
// test makes with OpenSSL. Also: plain HTTP to the TLS port gets no answer,
// the token still guards every request, and every bad certificate or key
// (one without the other, missing, not PEM, not the certificate's, behind a
// passphrase) is refused with a message naming the file. And the ciphers
// offered (issue 26): raw handshakes, as `openssl s_client -tls1_2 -cipher X`
// makes them, from a client that offers even what the server must refuse.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <fstream>
#include <memory>
#include <string>

#include "common/testing/temp_dir.h"
#include "web/server.h"

using swept::web::Server;
using swept::web::ServerOptions;

namespace {

// A self-signed certificate for 127.0.0.1 and localhost (subjectAltName, as
// the HTTPS client checks the host against it) and its key, as PEM files.
struct CertFiles {
  std::string cert, key;
};

void write_pem(const std::string& path, const std::function<int(FILE*)>& write) {
  FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  REQUIRE(write(f) == 1);
  std::fclose(f);
  ::chmod(path.c_str(), 0600);
}

// An ECDSA (P-256) key, or an RSA one where `rsa` (RSA key exchange, the kind
// without forward secrecy, needs an RSA certificate to be offered at all).
CertFiles make_self_signed(const swept::testing::TempDir& dir, const std::string& name,
                           const char* passphrase = nullptr, bool rsa = false) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(rsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256"),
                                                          EVP_PKEY_free);
  REQUIRE(key);
  std::unique_ptr<X509, decltype(&X509_free)> x(X509_new(), X509_free);
  REQUIRE(x);
  X509_set_version(x.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 3600);
  X509_set_pubkey(x.get(), key.get());
  X509_NAME* subject = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("127.0.0.1"), -1,
                             -1, 0);
  X509_set_issuer_name(x.get(), subject);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x.get(), x.get(), nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost"},
                            std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    REQUIRE(ext != nullptr);
    X509_add_ext(x.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  REQUIRE(X509_sign(x.get(), key.get(), EVP_sha256()) > 0);
  CertFiles files{dir / (name + ".crt"), dir / (name + ".key")};
  write_pem(files.cert, [&](FILE* f) { return PEM_write_X509(f, x.get()); });
  write_pem(files.key, [&](FILE* f) {
    if (!passphrase) return PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    return PEM_write_PrivateKey(f, key.get(), EVP_aes_256_cbc(), nullptr, 0, nullptr, const_cast<char*>(passphrase));
  });
  return files;
}

ServerOptions tls_options(const swept::testing::TempDir& dir, const CertFiles& files) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir / "swept.db";  // need not exist: pages then show empty lists
  o.tls_cert = files.cert;
  o.tls_key = files.key;
  o.poll_interval_ms = 50;
  return o;
}

// An HTTPS client that trusts only `ca` and checks the host name.
std::unique_ptr<httplib::SSLClient> https_client(int port, const std::string& ca) {
  auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", port);
  c->set_ca_cert_path(ca.c_str());
  c->enable_server_certificate_verification(true);
  c->set_connection_timeout(5);
  c->set_read_timeout(5);
  return c;
}

// What a raw handshake with 127.0.0.1:`port` agreed: the protocol and
// cipher names, or empty ones when it failed. The client offers exactly
// `version` (0: TLS 1.2 and 1.3) and, for TLS 1.2, only `ciphers`, at
// OpenSSL's security level 0 so that it offers even weak ciphers: only the
// server's configuration decides. Certificates are not verified here.
struct Handshake {
  std::string protocol, cipher;
};
Handshake handshake(int port, int version, const char* ciphers = nullptr) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  REQUIRE(ctx);
  SSL_CTX_set_security_level(ctx.get(), 0);
  SSL_CTX_set_min_proto_version(ctx.get(), version ? version : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx.get(), version ? version : TLS1_3_VERSION);
  if (ciphers) REQUIRE(SSL_CTX_set_cipher_list(ctx.get(), ciphers) == 1);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval five{5, 0};  // a server that never answers fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  REQUIRE(ssl);
  SSL_set_fd(ssl.get(), fd);
  Handshake agreed;
  if (SSL_connect(ssl.get()) == 1) {
    agreed = {SSL_get_version(ssl.get()), SSL_get_cipher_name(ssl.get())};
    SSL_shutdown(ssl.get());
  }
  ::close(fd);
  return agreed;
}

std::string start_error(const ServerOptions& o) {
  auto server = Server::start(o);
  REQUIRE_FALSE(server.ok());
  CHECK(server.status().code() == swept::StatusCode::kInvalidArgument);
  return server.status().message();
}

}  // namespace

TEST_CASE("tls: the dashboard serves HTTPS that a client verifies against its certificate") {
  swept::testing::TempDir dir;
  REQUIRE(!dir.path().empty());
  CertFiles files = make_self_signed(dir, "server");
  auto server = Server::start(tls_options(dir, files));
  REQUIRE_MESSAGE(server.ok(), server.status().message());
  CHECK((*server)->url().rfind("https://127.0.0.1:", 0) == 0);

  auto client = https_client((*server)->port(), files.cert);
  auto res = client->Get("/api/info");
  REQUIRE_MESSAGE(res, "HTTPS GET failed: ", httplib::to_string(res.error()), " (verify result ",
                  client->get_openssl_verify_result(), ")");
  CHECK(res->status == 200);
  CHECK(res->body.find("\"database\"") != std::string::npos);
  auto page = client->Get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->body.find("<html") != std::string::npos);
}

TEST_CASE("tls: a client that does not trust the certificate is refused, and plain HTTP gets no answer") {
  swept::testing::TempDir dir;
  REQUIRE(!dir.path().empty());
  CertFiles files = make_self_signed(dir, "server");
  CertFiles other = make_self_signed(dir, "other");
  auto server = Server::start(tls_options(dir, files));
  REQUIRE_MESSAGE(server.ok(), server.status().message());

  // Verification is real: trusting another certificate fails the handshake.
  auto untrusting = https_client((*server)->port(), other.cert);
  auto refused = untrusting->Get("/api/info");
  CHECK_FALSE(refused);
  if (!refused) CHECK(refused.error() == httplib::Error::SSLServerVerification);

  httplib::Client plain("127.0.0.1", (*server)->port());
  plain.set_connection_timeout(5);
  plain.set_read_timeout(5);
  auto res = plain.Get("/api/info");
  CHECK_FALSE(res);  // the server reads no HTTP request before a TLS handshake

  // And the TLS side still serves after the plain attempt.
  auto again = https_client((*server)->port(), files.cert)->Get("/api/info");
  REQUIRE(again);
  CHECK(again->status == 200);
}

TEST_CASE("tls: only ECDHE with AEAD for TLS 1.2 (Mozilla's intermediate profile), and TLS 1.3 preferred") {
  swept::testing::TempDir dir;
  REQUIRE(!dir.path().empty());
  // An RSA certificate: with it a server could agree to RSA key exchange.
  CertFiles rsa = make_self_signed(dir, "rsa", nullptr, /*rsa=*/true);
  auto server = Server::start(tls_options(dir, rsa));
  REQUIRE_MESSAGE(server.ok(), server.status().message());
  const int port = (*server)->port();

  // Refused: RSA key exchange (no forward secrecy), CBC with SHA-1 or SHA-256, DHE.
  for (const char* weak : {"AES128-SHA", "AES256-GCM-SHA384", "AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA",
                           "ECDHE-RSA-AES256-SHA384", "DHE-RSA-AES128-GCM-SHA256"}) {
    INFO(std::string(weak));
    CHECK(handshake(port, TLS1_2_VERSION, weak).cipher.empty());
  }
  // Agreed: ECDHE with AES-GCM or ChaCha20-Poly1305.
  for (const char* strong : {"ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305"}) {
    INFO(std::string(strong));
    const Handshake h = handshake(port, TLS1_2_VERSION, strong);
    CHECK(h.protocol == "TLSv1.2");
    CHECK(h.cipher == strong);
  }
  CHECK(handshake(port, TLS1_3_VERSION).protocol == "TLSv1.3");
  CHECK(handshake(port, 0).protocol == "TLSv1.3");  // offered both, the server picks 1.3
  CHECK(handshake(port, TLS1_1_VERSION, "ALL").protocol.empty());

  // The same with the ECDSA certificate the other tests use.
  CertFiles ec = make_self_signed(dir, "ec");
  auto ec_server = Server::start(tls_options(dir, ec));
  REQUIRE_MESSAGE(ec_server.ok(), ec_server.status().message());
  CHECK(handshake((*ec_server)->port(), TLS1_2_VERSION, "ECDHE-ECDSA-AES128-SHA").cipher.empty());
  CHECK(handshake((*ec_server)->port(), TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256").cipher ==
        "ECDHE-ECDSA-AES128-GCM-SHA256");
}

TEST_CASE("tls: the token guards every request over HTTPS - its cookie is Secure") {
  swept::testing::TempDir dir;
  REQUIRE(!dir.path().empty());
  CertFiles files = make_self_signed(dir, "server");
  ServerOptions o = tls_options(dir, files);
  o.token = "tls-token-123";
  auto server = Server::start(o);
  REQUIRE_MESSAGE(server.ok(), server.status().message());
  auto client = https_client((*server)->port(), files.cert);

  auto anonymous = client->Get("/api/sweeps");
  REQUIRE(anonymous);
  CHECK(anonymous->status == 401);
  auto bearer = client->Get("/api/sweeps", {{"Authorization", "Bearer tls-token-123"}});
  REQUIRE(bearer);
  CHECK(bearer->status == 200);
  auto wrong = client->Get("/api/sweeps", {{"Authorization", "Bearer tls-token-124"}});
  REQUIRE(wrong);
  CHECK(wrong->status == 401);

  auto visit = client->Get("/?token=tls-token-123");
  REQUIRE(visit);
  CHECK(visit->status == 302);
  std::string cookie = visit->get_header_value("Set-Cookie");
  CHECK(cookie.find("swept_token=tls-token-123") != std::string::npos);
  CHECK(cookie.find("; Secure") != std::string::npos);
  auto with_cookie = client->Get("/api/sweeps", {{"Cookie", "swept_token=tls-token-123"}});
  REQUIRE(with_cookie);
  CHECK(with_cookie->status == 200);
}

TEST_CASE("tls: bad certificates and keys are refused with a message naming the file") {
  swept::testing::TempDir dir;
  REQUIRE(!dir.path().empty());
  CertFiles files = make_self_signed(dir, "server");
  CertFiles other = make_self_signed(dir, "other");

  SUBCASE("a certificate without its key, and a key without its certificate") {
    ServerOptions o = tls_options(dir, files);
    o.tls_key.clear();
    CHECK(start_error(o).find("--tls-cert was given without --tls-key") != std::string::npos);
    o = tls_options(dir, files);
    o.tls_cert.clear();
    CHECK(start_error(o).find("--tls-key was given without --tls-cert") != std::string::npos);
  }
  SUBCASE("a missing file") {
    ServerOptions o = tls_options(dir, files);
    o.tls_cert = dir / "nowhere.crt";
    std::string m = start_error(o);
    CHECK(m.find("cannot read --tls-cert " + o.tls_cert) != std::string::npos);
    CHECK(m.find("No such file") != std::string::npos);
  }
  SUBCASE("a file that is not a PEM certificate") {
    ServerOptions o = tls_options(dir, files);
    o.tls_cert = dir / "garbage.crt";
    std::ofstream(o.tls_cert) << "not a certificate\n";
    CHECK(start_error(o).find("--tls-cert " + o.tls_cert + " is not a PEM certificate") != std::string::npos);
    o = tls_options(dir, files);
    o.tls_key = files.cert;  // a certificate where the key belongs
    CHECK(start_error(o).find("--tls-key " + files.cert + " is not an unencrypted PEM private key") !=
          std::string::npos);
  }
  SUBCASE("a key that is not the certificate's") {
    ServerOptions o = tls_options(dir, files);
    o.tls_key = other.key;
    CHECK(start_error(o).find("--tls-key " + other.key + " is not the private key of --tls-cert " + files.cert) !=
          std::string::npos);
  }
  SUBCASE("a key behind a passphrase fails at once instead of prompting") {
    CertFiles locked = make_self_signed(dir, "locked", "secret-passphrase");
    ServerOptions o = tls_options(dir, locked);
    std::string m = start_error(o);
    CHECK(m.find("--tls-key " + locked.key) != std::string::npos);
    CHECK(m.find("passphrase") != std::string::npos);
  }
}
