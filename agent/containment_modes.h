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

// ---- an agent in a cgroup of its own (cgroup v2; docs/deploy.md, "Trial limits") ----
// cgroup v2 gives a controller to the children of no cgroup that holds
// processes, but the root's (its no-internal-process rule: EBUSY). An agent
// started in a cgroup of its own (a systemd service, a container) holds that
// cgroup; so, as systemd's DelegateSubgroup= does for its payload, it moves
// itself into a leaf, `<its cgroup>/swept-agent-PID.self`, a sibling of its
// trials' directory `<its cgroup>/swept-agent-PID`, and its cgroup can then
// give the controllers on to the trials.

// "swept-agent-PID.self": the leaf an agent process moves into.
std::string leaf_name(pid_t pid);
// The cgroup an agent's directories go in when this process is in `own`:
// its parent when `own` is the leaf this process moved into (a second agent
// of one process, as `swept run` starts), else `own`.
std::string agent_base(const std::string& own, pid_t self);
// Gives `controller` to the children of cgroup `parent` (`+controller` in
// its cgroup.subtree_control). Where the kernel refuses because `parent`
// holds processes (EBUSY), moves process `self` (all its threads) into the
// leaf `parent/leaf_name(self)`, made if missing, sets *moved_to to it, and
// tries again. "" when the controller is given, else why not, naming the
// processes still in `parent` when there are (they must move too).
std::string enable_for_children(const std::string& parent, const std::string& controller, pid_t self,
                                std::string* moved_to);
// Undoes enable_for_children at a clean stop, best effort, once the trials'
// directory is gone: `controllers` taken back from `parent`, process `self`
// moved back into it, `leaf` removed; so `parent` is as the agent found it
// when a process manager starts the next agent there.
void leave_leaf(const std::string& parent, const std::string& leaf, pid_t self,
                const std::vector<std::string>& controllers);
// Kills what the trials of dead agents (`<base>/swept-agent-PID...`, PID no
// longer running) hold and removes their cgroups, their leaves included.
void clean_dead_agents(const std::string& base);

// signal_every_trial() for each mode (containment_cgroup.cpp,
// containment_subreaper.cpp).
int signal_every_cgroup(const TrialsView& view, int sig);
int signal_every_tagged(const TrialsView& view, int sig);

}  // namespace swept::agent::containment_files
