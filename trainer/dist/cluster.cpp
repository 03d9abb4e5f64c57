// TF_CONFIG and SWEPT_ROLE (see cluster.h): JSON parsed here, at the edge,
// into the typed Cluster; nothing after this sees the text.
#include "trainer/dist/cluster.h"

#include <nlohmann/json.hpp>

namespace swept::trainer {
namespace {

Status bad(const std::string& what) { return Status::InvalidArgument(what); }

const char* const kShape =
    "; expected {\"cluster\": {\"worker\": [\"host:port\", ...], \"ps\": [\"host:port\", ...]}, "
    "\"task\": {\"type\": \"worker\", \"index\": 0}} (trainer/README.md, \"Parameter servers\")";

Result<Endpoint> parse_endpoint(const nlohmann::json& j, const std::string& where) {
  if (!j.is_string()) return bad("TF_CONFIG: " + where + " must be a \"host:port\" string" + kShape);
  const std::string text = j.get<std::string>();
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return bad("TF_CONFIG: " + where + " = \"" + text + "\" is not host:port");
  const std::string port = text.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) < 1 ||
      std::stoi(port) > 65535)
    return bad("TF_CONFIG: " + where + " = \"" + text + "\": the port must be a number in [1, 65535]");
  Endpoint e;
  e.host = text.substr(0, colon);
  // "[::1]:2222": the brackets are the address's, not the host's.
  if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']') e.host = e.host.substr(1, e.host.size() - 2);
  e.port = std::stoi(port);
  return e;
}

Result<std::vector<Endpoint>> parse_list(const nlohmann::json& cluster, const std::string& type) {
  if (!cluster.contains(type) || !cluster[type].is_array() || cluster[type].empty())
    return bad("TF_CONFIG: cluster." + type + " lists no processes" +
               (type == "ps" ? std::string(": --strategy=ps needs at least one parameter server") : std::string()) +
               kShape);
  std::vector<Endpoint> out;
  for (size_t i = 0; i < cluster[type].size(); ++i) {
    SWEPT_ASSIGN_OR_RETURN(e, parse_endpoint(cluster[type][i], "cluster." + type + "[" + std::to_string(i) + "]"));
    out.push_back(e);
  }
  return out;
}

Result<Role> role_named(const std::string& type, const std::string& where) {
  if (type == "worker") return Role::kWorker;
  if (type == "ps") return Role::kServer;
  return bad(where + " = \"" + type + "\": swept-train's processes are \"worker\" or \"ps\"");
}

// SWEPT_ROLE and SWEPT_ROLE_INDEX: both or neither.
Result<std::optional<std::pair<Role, int>>> role_from_swept_vars(const EnvLookup& env) {
  const std::optional<std::string> role = env("SWEPT_ROLE"), index = env("SWEPT_ROLE_INDEX");
  if (!role && !index) return std::optional<std::pair<Role, int>>();
  if (!role || !index) return bad("SWEPT_ROLE and SWEPT_ROLE_INDEX are set together or not at all");
  SWEPT_ASSIGN_OR_RETURN(r, role_named(*role, "SWEPT_ROLE"));
  if (index->empty() || index->size() > 5 || index->find_first_not_of("0123456789") != std::string::npos)
    return bad("SWEPT_ROLE_INDEX=" + *index + " is not a whole number >= 0");
  return std::optional<std::pair<Role, int>>(std::make_pair(r, std::stoi(*index)));
}

}  // namespace

Result<Cluster> cluster_from_env(const EnvLookup& env) {
  const std::optional<std::string> text = env("TF_CONFIG");
  if (!text || text->empty())
    return bad("--strategy=ps needs parameter servers, and TF_CONFIG (which lists them) is not set" +
               std::string(kShape));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
  } catch (const std::exception& e) {
    return bad(std::string("TF_CONFIG is not valid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("cluster") || !j["cluster"].is_object())
    return bad(std::string("TF_CONFIG has no \"cluster\" object") + kShape);
  for (const auto& [key, value] : j["cluster"].items())
    if (key != "worker" && key != "ps")
      return bad("TF_CONFIG: cluster." + key + " is not a role of swept-train (worker, ps)" +
                 (key == "chief" ? std::string(": list the chief as worker 0") : std::string()));
  Cluster c;
  SWEPT_ASSIGN_OR_RETURN(workers, parse_list(j["cluster"], "worker"));
  SWEPT_ASSIGN_OR_RETURN(servers, parse_list(j["cluster"], "ps"));
  c.workers = workers;
  c.servers = servers;

  std::optional<std::pair<Role, int>> task;
  if (j.contains("task")) {
    const nlohmann::json& t = j["task"];
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string() || !t.contains("index") ||
        !t["index"].is_number_integer())
      return bad(std::string("TF_CONFIG: task must be {\"type\": \"worker\" | \"ps\", \"index\": i}") + kShape);
    SWEPT_ASSIGN_OR_RETURN(r, role_named(t["type"].get<std::string>(), "TF_CONFIG's task.type"));
    task = std::make_pair(r, t["index"].get<int>());
  }
  SWEPT_ASSIGN_OR_RETURN(swept_role, role_from_swept_vars(env));
  if (task && swept_role && *task != *swept_role)
    return bad("TF_CONFIG's task (" + std::string(task->first == Role::kWorker ? "worker" : "ps") + " " +
               std::to_string(task->second) + ") and SWEPT_ROLE/SWEPT_ROLE_INDEX disagree: set one, or both alike");
  if (!task) task = swept_role;
  if (!task) return bad("neither TF_CONFIG's task nor SWEPT_ROLE/SWEPT_ROLE_INDEX says which process this is");
  c.role = task->first;
  c.index = task->second;
  const size_t count = c.role == Role::kWorker ? c.workers.size() : c.servers.size();
  if (c.index < 0 || static_cast<size_t>(c.index) >= count)
    return bad("this process is " + c.role_name() + " " + std::to_string(c.index) + ", but TF_CONFIG's cluster." +
               c.role_name() + " lists " + std::to_string(count) + ": the index must be below that");
  return c;
}

Status check_ps_config(const TrainConfig& config, const Cluster& cluster) {
  const int workers = static_cast<int>(cluster.workers.size());
  if (config.backup_workers >= workers)
    return bad("--backup_workers=" + std::to_string(config.backup_workers) + " must be below the " +
               std::to_string(workers) + " workers of TF_CONFIG: each step needs at least one gradient");
  if (config.batch_size % workers != 0)
    return bad("--batch_size=" + std::to_string(config.batch_size) + " is not divisible by the " +
               std::to_string(workers) + " workers: each takes an equal share of the global batch");
  return Status::Ok();
}

}  // namespace swept::trainer
