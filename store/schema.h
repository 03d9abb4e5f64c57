// The schema contract shared by the writer and the read model: its version,
// its text (store/schema.sql, compiled in), and the decoding of the JSON
// columns both sides read.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace swept::store {

class Connection;

// The schema version this code writes; older files are migrated on open
// (Writer::open), newer ones refused.
inline constexpr int kSchemaVersion = 6;
// The text of store/schema.sql (version 1), compiled in, its state CHECK
// lists empty: what a new database gets is state_checks.h's schema_sql().
extern const char* const kSchemaSql;
// Bound of trial_logs.tail.
inline constexpr size_t kLogTailBytes = 64 * 1024;

// meta.schema_version of an open database (0 when the row is missing; an
// error when there is no meta table: not a swept database).
Result<int> read_schema_version(Connection& db);

// trials.gpus / attempts.gpus: a JSON array of GPU indices (empty when NULL
// or not an array).
std::vector<int> parse_gpu_list(const std::optional<std::string>& text);

}  // namespace swept::store
