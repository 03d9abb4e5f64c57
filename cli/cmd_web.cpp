// `swept web`: the dashboard alone, over a database file, with no scheduler
// (so no cancel button). Runs until SIGINT/SIGTERM, then stops cleanly.
//
//   swept web --db swept.db [--listen 127.0.0.1:8080] [--token T] [--tls-cert FILE --tls-key FILE]
//             [--max-unauthenticated N]
//
// Prints "swept web: serving http://HOST:PORT/" (https:// with TLS) on stdout once listening
// (tests start it with port 0 and read the address back from that line).
#include <signal.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <iostream>

#include "cli/command.h"
#include "cli/dashboard.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "store/integrity.h"
#include "web/server.h"

namespace po = boost::program_options;

namespace {

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int run_web(const std::vector<std::string>& args) {
  swept::web::ServerOptions options;
  po::options_description desc("swept web: the results dashboard over a swept database (read-only)");
  desc.add_options()
      ("help,h", "show this help")
      ("db", po::value<std::string>(&options.db_path)->default_value("swept.db"), "the scheduler's database file")
      ("listen", po::value<std::string>(&options.listen)->default_value("127.0.0.1:8080"),
       "HOST:PORT to serve on (port 0 picks a free one)")
      ("token", po::value<std::string>(&options.token),
       "require this bearer token on every request (default: $SWEPT_WEB_TOKEN); needed on any non-loopback address")
      ("tls-cert", po::value<std::string>(&options.tls_cert), swept::cli::kTlsCertHelp)
      ("tls-key", po::value<std::string>(&options.tls_key), swept::cli::kTlsKeyHelp)
      ("insecure", po::bool_switch(&options.insecure),
       "serve a non-loopback address without a token (only on a network you trust)")
      ("max-unauthenticated", po::value<int>(&options.max_unauthenticated)->default_value(options.max_unauthenticated),
       swept::cli::kMaxUnauthenticatedHelp);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "swept web: " << e.what() << "; see swept web --help\n";
    return swept::kExitUsage;
  }
  if (vm.count("help")) {
    std::cout << desc << "\nOpen the printed URL in a browser. With a token, open it once as URL?token=TOKEN\n"
              << "(a cookie keeps it) or send 'Authorization: Bearer TOKEN' to the API (docs/api.md).\n"
              << "Off this machine, serve it with a token and over HTTPS (--tls-cert/--tls-key), or keep it on\n"
              << "127.0.0.1 behind an SSH tunnel (docs/deploy.md). A bad certificate or key exits 2.\n";
    return swept::kExitOk;
  }
  if (!vm.count("token")) {
    if (const char* env = std::getenv("SWEPT_WEB_TOKEN")) options.token = env;
  }
  auto address = swept::web::parse_listen_address(options.listen);
  if (!address.ok()) {
    std::cerr << "swept web: " << address.status().message() << "\n";
    return swept::kExitUsage;
  }
  if (!is_loopback(address->first) && options.token.empty() && options.insecure) {
    swept::log::warn("swept web: listening on " + options.listen +
                     " without a token (--insecure): anyone who can reach it sees and can cancel your sweeps");
  }

  // Block the stop signals in every thread; this one waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // A damaged database is refused at once (exit 2), as the scheduler and the
  // --db commands refuse it; one that does not exist yet is served empty.
  if (auto sound = swept::store::check_database_file(options.db_path); !sound.ok()) {
    std::cerr << "swept web: " << sound.message() << "\n";
    return sound.code() == swept::StatusCode::kCorruption ? swept::kExitUsage : swept::kExitFailure;
  }
  auto server = swept::web::Server::start(options);
  if (!server.ok()) {
    std::cerr << "swept web: " << server.status().message() << "\n";
    return server.status().code() == swept::StatusCode::kInvalidArgument ? swept::kExitUsage : swept::kExitFailure;
  }
  std::cout << "swept web: serving " << (*server)->url() << " (database " << options.db_path << ")" << std::endl;
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  (*server)->stop();
  return swept::kExitInterrupted;
}

}  // namespace

SWEPT_COMMAND("web", "serve the results dashboard over a database (read-only)", run_web);
