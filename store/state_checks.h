// The database's state CHECK constraints, kept equal to common/states.h.
//
// Three tables have a `state` column whose values are the names of one of
// common/states.h's tables: trials (trial states), sweeps (sweep states) and
// agents (agent states). Each column carries a CHECK (state IN (...)) so that
// no other name can be stored, but that list must not be a second spelling
// of the names: store/schema.sql writes every such list empty,
// `CHECK (state IN ())`, and this file fills it in from the table, in two
// places:
//   - schema_sql(): the text the writer executes on a new database, with each
//     list filled, so a new file is right from its first transaction;
//   - sync_state_checks(): run by the writer at every open, inside its
//     migration transaction. For each table whose stored CHECK differs from
//     the current list (a file made by an older release, or before a state
//     was added to common/states.h) it rebuilds the table the way SQLite's
//     ALTER TABLE page describes (create it anew with the new CHECK, copy the
//     rows, drop the old, rename, recreate its indexes), then asks
//     PRAGMA foreign_key_check that every reference still holds. A table
//     whose CHECK already matches is not touched: opening a current file
//     costs one read of sqlite_master.
// So adding a state is one line in common/states.h; the database follows at
// the next open, with no hand-written migration.
//
// The spelling the scan looks for is `CHECK (state IN (` followed by the
// list and its two closing parentheses, as every release of schema.sql wrote
// it. Thread safety: the functions are pure except sync_state_checks, which
// uses the caller's connection (one thread at a time, see sqlite.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace swept::store {

class Connection;

// A table whose `state` column holds the names of one state table.
struct StateColumn {
  std::string_view table;               // trials, sweeps or agents
  std::vector<std::string_view> names;  // the names it accepts, in table order
};

// The three state columns with the names of common/states.h's tables.
const std::vector<StateColumn>& state_columns();

// "CHECK (state IN ('a', 'b'))" for `names` (each quoted for SQL).
std::string state_check_clause(const std::vector<std::string_view>& names);

// store/schema.sql (kSchemaSql) with each state column's empty list filled
// from state_columns(). Computed once; thread-safe.
const std::string& schema_sql();

// Makes the state CHECK of every table in `columns` accept exactly its
// `names`, rebuilding (rows, indexes and references kept) each table whose
// stored CHECK differs; returns how many tables it rebuilt (0 when all
// matched). Must run inside a write transaction the caller owns, on a
// connection that does not enforce foreign keys (the writer's): on an error
// the caller rolls back and the file is as it was. Corruption when a table is
// missing, has no state CHECK (not a swept database), or a reference broke.
Result<int> sync_state_checks(Connection& db, const std::vector<StateColumn>& columns);

}  // namespace swept::store
