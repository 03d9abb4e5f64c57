// `swept cancel SWEEP` / `swept cancel --trial ID`: stops a sweep (queued
// trials stopped, running ones sent SIGTERM then SIGKILL by their agents) or
// one trial. Needs the scheduler.
#include "cli/client_common.h"
#include "cli/command.h"

namespace swept::cli {
namespace {

int run_cancel(const std::vector<std::string>& args) {
  ClientFlags flags;
  std::string sweep, trial;
  po::options_description desc("options");
  desc.add_options()("sweep", po::value(&sweep), "a sweep id")("trial", po::value(&trial), "a trial id instead");
  add_client_flags(desc, flags, false);
  po::positional_options_description pos;
  pos.add("sweep", 1);
  if (auto rc = parse_flags("cancel", "swept cancel SWEEP | swept cancel --trial ID", args, desc, pos)) return *rc;
  if (sweep.empty() == trial.empty()) {
    std::cerr << "swept cancel: give either a sweep id or --trial ID\n";
    return kExitUsage;
  }
  protocol::Cancel req;
  auto id = parse_id(sweep.empty() ? "--trial" : "SWEEP", sweep.empty() ? trial : sweep);
  if (!id.ok()) return report("cancel", id.status());
  (sweep.empty() ? req.trial_id : req.sweep_id) = *id;
  auto client = connect_client(flags);
  if (!client.ok()) return report("cancel", client.status());
  auto reply = (*client)->call(req);
  if (!reply.ok()) return report("cancel", reply.status());
  if (auto* d = std::get_if<protocol::Done>(&*reply)) std::cout << d->message << "\n";
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("cancel", "stop a sweep, or one trial with --trial", run_cancel);
}  // namespace swept::cli
