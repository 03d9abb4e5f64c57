// The dashboard's HTTP(S) server as ServerOptions configure it: plain, or
// TLS with the operator's certificate and key, each checked so that every
// mistake (a missing or unreadable file, a key with a passphrase, a key that
// is not the certificate's) has its own message naming the file and the fix.
// OpenSSL is used directly (not httplib's SSLServer) because
// web/gated_server.h serves each connection itself.
// What is offered: Mozilla's "intermediate" profile less DHE: TLS 1.2 and
// 1.3 (1.3 preferred), and for TLS 1.2 only ECDHE with AES-GCM or
// ChaCha20-Poly1305 (docs/deploy.md, "5. The dashboard").
//
// Thread safety: call from one thread before serving; OpenSSL's error queue
// read here is per thread.
#pragma once

#include <memory>

#include "common/status.h"
#include "web/gated_server.h"
#include "web/server.h"

namespace swept::web {

// The GatedServer for `options` (its gate limits and, with tls_cert and
// tls_key, an SSL_CTX holding both). InvalidArgument names the flag and the
// file for a bad TLS setup (one file without the other included); Internal
// when OpenSSL cannot make a context or offer that profile.
Result<std::unique_ptr<GatedServer>> make_http_server(const ServerOptions& options);

}  // namespace swept::web
