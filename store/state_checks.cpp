// The state CHECKs filled from common/states.h: see state_checks.h.
#include "store/state_checks.h"

#include <map>

#include "common/states.h"
#include "store/schema.h"
#include "store/sqlite.h"

namespace swept::store {

namespace {

constexpr std::string_view kCheckToken = "CHECK (state IN";

// Index just past the SQL comment or string literal that starts at `i`, or
// `i` itself when none does. Comments and strings are skipped so that a
// parenthesis or the token inside them is not taken for code.
size_t skip_comment_or_string(std::string_view sql, size_t i) {
  if (sql.substr(i, 2) == "--") {
    size_t eol = sql.find('\n', i);
    return eol == std::string_view::npos ? sql.size() : eol + 1;
  }
  if (sql.substr(i, 2) == "/*") {
    size_t end = sql.find("*/", i + 2);
    return end == std::string_view::npos ? sql.size() : end + 2;
  }
  if (sql[i] == '\'') {
    // A quote inside a literal is written twice ('it''s').
    for (size_t j = i + 1; j < sql.size(); ++j) {
      if (sql[j] != '\'') continue;
      if (j + 1 < sql.size() && sql[j + 1] == '\'') {
        ++j;
        continue;
      }
      return j + 1;
    }
    return sql.size();
  }
  return i;
}

// [begin, end) of the first state CHECK clause at or after `from` in code
// (not in a comment or string), from `CHECK` to its closing parenthesis;
// {npos, npos} when there is none.
std::pair<size_t, size_t> find_state_check(std::string_view sql, size_t from) {
  constexpr auto kNone = std::pair<size_t, size_t>{std::string_view::npos, std::string_view::npos};
  size_t begin = std::string_view::npos;
  for (size_t i = from; i < sql.size();) {
    size_t skipped = skip_comment_or_string(sql, i);
    if (skipped != i) {
      i = skipped;
      continue;
    }
    if (sql.substr(i, kCheckToken.size()) == kCheckToken) {
      begin = i;
      break;
    }
    ++i;
  }
  if (begin == std::string_view::npos) return kNone;
  int depth = 0;
  for (size_t i = begin; i < sql.size();) {
    size_t skipped = skip_comment_or_string(sql, i);
    if (skipped != i) {
      i = skipped;
      continue;
    }
    if (sql[i] == '(') ++depth;
    if (sql[i] == ')' && --depth == 0) return {begin, i + 1};
    ++i;
  }
  return kNone;
}

std::vector<std::string_view> trial_state_names() {
  std::vector<std::string_view> out;
  for (const auto& s : kTrialStates) out.push_back(s.name);
  return out;
}

// The CREATE TABLE statement `sql` (as sqlite_master stores it) under the
// name `new_name`, its state CHECK replaced by `check`; empty when it has no
// state CHECK.
std::string with_check(const std::string& sql, const std::string& check, const std::string& new_name) {
  auto [begin, end] = find_state_check(sql, 0);
  if (begin == std::string::npos) return "";
  std::string out = sql.substr(0, begin) + check + sql.substr(end);
  // sqlite_master holds "CREATE TABLE name (...)": the column list is what
  // follows the first parenthesis (table names here have none).
  const size_t paren = out.find('(');
  if (paren == std::string::npos) return "";
  return "CREATE TABLE " + new_name + " " + out.substr(paren);
}

// Rebuilds `table` from `table_sql` with `check` (see state_checks.h).
Status rebuild(Connection& db, const std::string& table, const std::string& table_sql,
               const std::vector<std::string>& index_sql, const std::string& check) {
  const std::string temp = table + "_rebuilt";
  const std::string create = with_check(table_sql, check, temp);
  if (create.empty())
    return Status::Corruption("the " + table + " table has no state CHECK: not a swept database?");
  SWEPT_RETURN_IF_ERROR(db.exec(create.c_str()));
  SWEPT_RETURN_IF_ERROR(db.exec(("INSERT INTO " + temp + " SELECT * FROM " + table).c_str()));
  SWEPT_RETURN_IF_ERROR(db.exec(("DROP TABLE " + table).c_str()));
  SWEPT_RETURN_IF_ERROR(db.exec(("ALTER TABLE " + temp + " RENAME TO " + table).c_str()));
  for (const std::string& sql : index_sql) SWEPT_RETURN_IF_ERROR(db.exec(sql.c_str()));
  return Status::Ok();
}

}  // namespace

const std::vector<StateColumn>& state_columns() {
  static const std::vector<StateColumn> columns = {
      {"trials", trial_state_names()},
      {"sweeps", {kSweepStateNames.begin(), kSweepStateNames.end()}},
      {"agents", {kAgentStateNames.begin(), kAgentStateNames.end()}},
  };
  return columns;
}

std::string state_check_clause(const std::vector<std::string_view>& names) {
  std::string list;
  for (std::string_view n : names) {
    if (!list.empty()) list += ", ";
    list += '\'';
    for (char c : n) {
      list += c;
      if (c == '\'') list += '\'';
    }
    list += '\'';
  }
  return std::string(kCheckToken) + " (" + list + "))";
}

const std::string& schema_sql() {
  static const std::string filled = [] {
    std::string sql = kSchemaSql;
    for (const StateColumn& c : state_columns()) {
      // The table's CREATE statement, then the first state CHECK in it. A
      // table of state_columns() missing from schema.sql is caught by the
      // store's tests (every state column accepts every name).
      const size_t create = sql.find("CREATE TABLE IF NOT EXISTS " + std::string(c.table) + " (");
      if (create == std::string::npos) continue;
      auto [begin, end] = find_state_check(sql, create);
      if (begin == std::string::npos || sql.find(';', create) < begin) continue;
      sql.replace(begin, end - begin, state_check_clause(c.names));
    }
    return sql;
  }();
  return filled;
}

Result<int> sync_state_checks(Connection& db, const std::vector<StateColumn>& columns) {
  // Each table's CREATE TABLE text and its indexes' CREATE INDEX texts (the
  // automatic ones of PRIMARY KEY and UNIQUE have none and come back with
  // the table).
  std::map<std::string, std::string> table_sql;
  std::map<std::string, std::vector<std::string>> index_sql;
  {
    SWEPT_ASSIGN_OR_RETURN(st, db.prepare("SELECT type, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                                          "AND type IN ('table', 'index')"));
    while (true) {
      SWEPT_ASSIGN_OR_RETURN(row, st.step());
      if (!row) break;
      if (st.text(0) == "table") table_sql[st.text(1)] = st.text(2);
      else index_sql[st.text(1)].push_back(st.text(2));
    }
  }
  int rebuilt = 0;
  for (const StateColumn& c : columns) {
    const std::string table(c.table);
    auto it = table_sql.find(table);
    if (it == table_sql.end()) return Status::Corruption("no " + table + " table: not a swept database?");
    const std::string check = state_check_clause(c.names);
    auto [begin, end] = find_state_check(it->second, 0);
    if (begin == std::string::npos)
      return Status::Corruption("the " + table + " table has no state CHECK: not a swept database?");
    if (it->second.compare(begin, end - begin, check) == 0) continue;
    SWEPT_RETURN_IF_ERROR(rebuild(db, table, it->second, index_sql[table], check));
    ++rebuilt;
  }
  if (rebuilt > 0) {
    SWEPT_ASSIGN_OR_RETURN(fk, db.prepare("PRAGMA foreign_key_check"));
    SWEPT_ASSIGN_OR_RETURN(violation, fk.step());
    if (violation)
      return Status::Corruption("rebuilding a table for its state CHECK broke a reference from " + fk.text(0) +
                                ": the upgrade was rolled back; report this with the database file");
  }
  return rebuilt;
}

}  // namespace swept::store
