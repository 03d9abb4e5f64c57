// The schema contract's shared pieces: see schema.h.
#include "store/schema.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "store/sqlite.h"

namespace swept::store {

Result<int> read_schema_version(Connection& db) {
  SWEPT_ASSIGN_OR_RETURN(st, db.prepare("SELECT value FROM meta WHERE key='schema_version'"));
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  return row ? std::atoi(st.text(0).c_str()) : 0;
}

std::string encode_gpu_list(const std::vector<int>& gpus) { return nlohmann::json(gpus).dump(); }

template <typename Int>
std::vector<Int> decode_gpu_list(const std::optional<std::string>& text) {
  std::vector<Int> out;
  if (!text) return out;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& v : j)
    if (v.is_number_integer()) out.push_back(v.get<Int>());
  return out;
}
template std::vector<int> decode_gpu_list<int>(const std::optional<std::string>&);
template std::vector<int64_t> decode_gpu_list<int64_t>(const std::optional<std::string>&);

std::string encode_nodes(const std::vector<TrialNode>& nodes) { return nodes_json(nodes).dump(); }

std::vector<TrialNode> decode_nodes(const std::optional<std::string>& text) {
  std::vector<TrialNode> out;
  if (!text) return out;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& n : j) {
    if (!n.is_object() || !n.contains("agent") || !n["agent"].is_string()) continue;
    TrialNode node;
    node.agent = n["agent"].get<std::string>();
    if (n.contains("gpus")) node.gpus = decode_gpu_list<int>(n["gpus"].dump());
    out.push_back(std::move(node));
  }
  return out;
}

std::string encode_gang(const GangRecord& gang) {
  // Written with every gang's dispatch: plain appends, no JSON tree (the
  // roles are the two fixed names, the rest integers).
  std::string out = "{\"worker_nodes\":" + std::to_string(gang.worker_nodes) +
                    ",\"master_port\":" + std::to_string(gang.master_port) + ",\"processes\":[";
  for (size_t i = 0; i < gang.processes.size(); ++i) {
    const StoredGangProcess& p = gang.processes[i];
    if (i) out += ',';
    out += p.role == "ps" ? "{\"role\":\"ps\",\"index\":" : "{\"role\":\"worker\",\"index\":";
    out += std::to_string(p.index) + ",\"node\":" + std::to_string(p.node) + ",\"port\":" + std::to_string(p.port) + "}";
  }
  out += "],\"slots\":[";
  for (size_t i = 0; i < gang.slots.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(gang.slots[i]);
  }
  return out + "]}";
}

std::optional<GangRecord> decode_gang(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("worker_nodes") || !j["worker_nodes"].is_number_integer()) return std::nullopt;
  GangRecord g;
  g.worker_nodes = j["worker_nodes"].get<int>();
  if (j.contains("master_port") && j["master_port"].is_number_integer()) g.master_port = j["master_port"].get<int>();
  if (j.contains("slots") && j["slots"].is_array())
    for (const auto& n : j["slots"]) g.slots.push_back(n.is_number_integer() ? n.get<int>() : 0);
  if (!j.contains("processes") || !j["processes"].is_array()) return g;
  auto integer = [](const nlohmann::json& p, const char* key) {
    return p.contains(key) && p[key].is_number_integer();
  };
  for (const auto& p : j["processes"]) {
    if (!p.is_object() || !p.contains("role") || !p["role"].is_string() || !integer(p, "index") || !integer(p, "node"))
      continue;
    const std::string role = p["role"].get<std::string>();
    if (role != "worker" && role != "ps") continue;
    g.processes.push_back({role, p["index"].get<int>(), p["node"].get<int>(), integer(p, "port") ? p["port"].get<int>() : 0});
  }
  return g;
}

namespace {

// What a bad row says: which trial, which column, what was expected, so
// that an operator can find it (swept's own writes never produce one).
Status bad_column(int64_t trial_id, const char* column, const char* what, const char* expected) {
  return Status::Corruption("trial " + std::to_string(trial_id) + ": its stored " + what + " (trials." + column +
                            ") is not " + expected + "; the database is damaged");
}

}  // namespace

Result<nlohmann::json> decode_params(int64_t trial_id, const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return bad_column(trial_id, "params", "parameters", "a JSON object");
  return j;
}

Result<std::vector<std::string>> decode_argv(int64_t trial_id, const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) return bad_column(trial_id, "command", "command", "a JSON array of strings");
  std::vector<std::string> argv;
  argv.reserve(j.size());
  for (const auto& a : j) {
    if (!a.is_string()) return bad_column(trial_id, "command", "command", "a JSON array of strings");
    argv.push_back(a.get<std::string>());
  }
  return argv;
}

}  // namespace swept::store
