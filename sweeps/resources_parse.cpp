// The parameter-server keys of a sweep file's `resources` (issue 30):
// resources.ps and resources.ps_nodes, read by parse.cpp's parse_resources.
// What can never run is refused here, each problem naming its field, rather
// than found out by a trial that waits for ever.
#include "sweeps/checks.h"

namespace swept::sweeps {

using json = nlohmann::json;

void parse_parameter_servers(Checker& ck, const json& r, SweepSpec& spec) {
  if (r.contains("ps")) {
    if (auto v = ck.integer(r["ps"], "resources.ps", 0, 64, "a whole number of parameter servers from 0 to 64")) {
      spec.resources.ps = static_cast<int>(*v);
    }
  }
  if (r.contains("ps_nodes")) {
    if (!r["ps_nodes"].is_boolean()) {
      ck.add("resources.ps_nodes", "expected true (each parameter server on an extra node) or false (on the "
                                   "trial's nodes), found " + found(r["ps_nodes"]));
    } else {
      spec.resources.ps_nodes = r["ps_nodes"].get<bool>();
    }
  }
  if (spec.resources.ps_nodes && spec.resources.ps == 0) {
    ck.add("resources.ps_nodes", "ps_nodes: true places parameter servers, but resources.ps is 0; set "
                                 "resources.ps: K (1 to 64) or drop ps_nodes");
  }
  if (spec.resources.ps_nodes && spec.resources.nodes + spec.resources.ps > 1024) {
    ck.add("resources.ps_nodes", "nodes + ps is " + std::to_string(spec.resources.nodes + spec.resources.ps) +
                                     " agents, above the 1024 a trial may span; lower resources.ps or "
                                     "resources.nodes, or drop ps_nodes");
  }
}

}  // namespace swept::sweeps
