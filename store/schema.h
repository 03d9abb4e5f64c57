// The schema contract shared by the writer and the read model: its version,
// its text (store/schema.sql, compiled in), and the one codec of the JSON
// columns both sides read (GPU lists, parameters, commands).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/rows.h"
#include "common/status.h"

namespace swept::store {

class Connection;

// The schema version this code writes; older files are migrated on open
// (Writer::open), newer ones refused.
inline constexpr int kSchemaVersion = 9;
// The text of store/schema.sql (version 1), compiled in, its state CHECK
// lists empty: what a new database gets is state_checks.h's schema_sql().
extern const char* const kSchemaSql;
// Bound of trial_logs.tail.
inline constexpr size_t kLogTailBytes = 64 * 1024;

// meta.schema_version of an open database (0 when the row is missing; an
// error when there is no meta table: not a swept database).
Result<int> read_schema_version(Connection& db);

// ---- the JSON columns ----
// trials.gpus / attempts.gpus: a JSON array of GPU indices. Decoding is
// lenient, as the dashboard shows what it can: NULL or text that is not an
// array is no GPUs, and an element that is not an integer is skipped. `Int`
// is the row type's element (int or int64_t; instantiated for both).
std::string encode_gpu_list(const std::vector<int>& gpus);
template <typename Int>
std::vector<Int> decode_gpu_list(const std::optional<std::string>& text);
extern template std::vector<int> decode_gpu_list<int>(const std::optional<std::string>&);
extern template std::vector<int64_t> decode_gpu_list<int64_t>(const std::optional<std::string>&);

// trials.nodes / attempts.nodes (schema 7): a multi-node trial's nodes, a
// JSON array of {"agent": name, "gpus": [indices]}, node 0 first. Decoding
// is lenient as for the GPU lists: what is not such an element is skipped.
std::string encode_nodes(const std::vector<TrialNode>& nodes);
std::vector<TrialNode> decode_nodes(const std::optional<std::string>& text);

// attempts.gang (schema 9): a multi-node trial's processes (GangRecord), a
// JSON object {"worker_nodes": 2, "master_port": 29500, "processes":
// [{"role": "worker", "index": 0, "node": 0, "port": 29501}, ...],
// "slots": [3, 2]}.
// Decoding is lenient: NULL or text that is not such an object is nullopt
// (the scheduler then knows the attempt's processes as an older one did),
// and a process that is not such an element is skipped.
std::string encode_gang(const GangRecord& gang);
std::optional<GangRecord> decode_gang(const std::optional<std::string>& text);

// trials.params: a JSON object, nested as in the sweep file. Corruption,
// naming the trial and the column, when the text is not one.
Result<nlohmann::json> decode_params(int64_t trial_id, const std::string& text);
// trials.command: the argv, a JSON array of strings. Corruption, naming the
// trial and the column, when the text is not one.
Result<std::vector<std::string>> decode_argv(int64_t trial_id, const std::string& text);

}  // namespace swept::store
