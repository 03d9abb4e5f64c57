// The unprivileged user trials run as (`swept agent --run-as USER`,
// docs/deploy.md, "Trial limits"): resolved once at start-up, because the
// launcher's child may not call into libc's user database (NSS) between its
// clone and its exec; the child only makes the system calls (launcher.h).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace swept::agent {

struct RunAs {
  std::string name;           // for messages, and the trial's USER and LOGNAME
  std::string home;           // the trial's HOME
  uid_t uid = 0;
  gid_t gid = 0;              // the user's primary group
  std::vector<gid_t> groups;  // its supplementary groups, as initgroups() would set them
};

// Looks `user` up (a name, or a number) in the user database. InvalidArgument
// naming the user when there is none, or when it is root (uid 0: running as
// root is what --run-as is there to avoid); FailedPrecondition when this
// process is not root and so cannot become another user.
Result<RunAs> resolve_run_as(const std::string& user);

}  // namespace swept::agent
