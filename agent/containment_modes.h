// What containment's three files give one another (internal to agent/; the
// rest of the agent uses containment.h): containment.cpp holds the shared
// part and chooses the mode, containment_cgroup.cpp the cgroup v2 mode,
// containment_subreaper.cpp the subreaper fallback. Errors are skipped, as
// containment.h says of each caller.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "agent/containment.h"

namespace swept::agent::containment_files {

// strerror(e), for messages.
std::string errno_text(int e);

// Reads `path` whole, up to about `limit` bytes, into `out` (/proc and
// cgroup files, which are small). False when it cannot be opened.
bool read_small_file(const std::string& path, std::string& out, size_t limit = 1 << 20);

// Writes `text` to a cgroup control file (v1 or v2); 0 or the errno.
int write_control(const std::string& path, const std::string& text);

// kCgroup: the pids listed in `cgroup_dir`/cgroup.procs; none when unreadable.
std::vector<pid_t> read_procs(const std::string& cgroup_dir);

// The directories `<base>/swept-agent-PID...` of agents that died: PID is not
// this process and no longer runs (containment's v2 cgroups and the limits'
// v1 ones both name their agent's directory so). None when `base` is unreadable.
std::vector<std::string> dead_agent_dirs(const std::string& base);

// signal_every_trial() for each mode (containment_cgroup.cpp,
// containment_subreaper.cpp).
int signal_every_cgroup(const TrialsView& view, int sig);
int signal_every_tagged(const TrialsView& view, int sig);

}  // namespace swept::agent::containment_files
