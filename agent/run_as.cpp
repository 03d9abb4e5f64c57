// resolve_run_as (run_as.h): the user database read once, at start-up.
#include "agent/run_as.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

namespace swept::agent {

Result<RunAs> resolve_run_as(const std::string& user) {
  if (user.empty()) return Status::InvalidArgument("--run-as: the user name is empty; name an unprivileged user");
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  ::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
  if (!found && user.find_first_not_of("0123456789") == std::string::npos) {
    ::getpwuid_r(static_cast<uid_t>(std::strtoul(user.c_str(), nullptr, 10)), &pw, buf.data(), buf.size(), &found);
  }
  if (!found) {
    return Status::InvalidArgument("--run-as " + user + ": no such user; create one (useradd --system swept-trial) or "
                                   "name an existing one");
  }
  if (pw.pw_uid == 0) {
    return Status::InvalidArgument("--run-as " + user + ": that is root; name an unprivileged user, whom the trials' "
                                   "cgroups do not let out");
  }
  if (::geteuid() != 0) {
    return Status::FailedPrecondition("--run-as " + user + " needs the agent to run as root (it is uid " +
                                      std::to_string(::geteuid()) + "): only root may start trials as another user");
  }
  RunAs r;
  r.name = pw.pw_name;
  r.home = pw.pw_dir ? pw.pw_dir : "/";
  r.uid = pw.pw_uid;
  r.gid = pw.pw_gid;
  int n = 64;
  r.groups.resize(static_cast<size_t>(n));
  while (::getgrouplist(pw.pw_name, pw.pw_gid, r.groups.data(), &n) < 0) r.groups.resize(static_cast<size_t>(n));
  r.groups.resize(static_cast<size_t>(n));
  return r;
}

}  // namespace swept::agent
