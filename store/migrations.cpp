// The writer's migrations (Writer::migrate, writer.h's open()): how a
// database written by any older swept becomes one this swept reads.
//
// Version 1 is schema.sql (compiled in) with its state CHECK lists filled
// from common/states.h (state_checks.h); each later version is one step that
// moves a database from N-1 to N in the same transaction that records the
// new version in meta.schema_version. After the steps, the same transaction
// brings every state CHECK to the tables of common/states.h (a no-op when
// they match). A database whose version is newer than kSchemaVersion is
// refused rather than misread. A new version: add its step at the end of
// kSteps, raise kSchemaVersion (schema.h), and test the upgrade from the
// version before (migration_test.cpp).
#include <iterator>
#include <string>

#include "store/schema.h"
#include "store/sqlite.h"
#include "store/state_checks.h"
#include "store/writer.h"

namespace swept::store {

Status Writer::migrate() {
  SWEPT_RETURN_IF_ERROR(conn_->exec("BEGIN IMMEDIATE"));
  auto fail = [&](Status s) {
    (void)conn_->exec("ROLLBACK");
    return s;
  };
  Status s = conn_->exec("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
  if (!s.ok()) return fail(s.WithContext("not a swept database?"));
  auto read = read_schema_version(*conn_);
  if (!read.ok()) return fail(read.status());
  int version = *read;
  if (version > kSchemaVersion)
    return fail(Status::Corruption("schema version " + std::to_string(version) + " is newer than this swept (" +
                                   std::to_string(kSchemaVersion) + "): use a newer swept"));
  // Step v-1 takes a database from version v-1 to v; each runs in this
  // transaction, so a failed upgrade leaves the file as it was.
  static const char* const kSteps[] = {
      // v1: schema.sql, its state CHECKs filled from common/states.h.
      schema_sql().c_str(),
      // v2: the highest stored METRICS batch per attempt, so re-sent batches
      // (at-least-once delivery, docs/protocol.md) are recognised after a
      // scheduler restart.
      "ALTER TABLE attempts ADD COLUMN metrics_seq INTEGER NOT NULL DEFAULT 0",
      // v3: the model state that produced a bayes/tpe trial (why it was chosen).
      "ALTER TABLE trials ADD COLUMN suggestion TEXT",
      // v4 (issue 16): the early-termination decision that stopped a trial
      // (and early_stopped in trials.state's CHECK, synced below).
      "ALTER TABLE trials ADD COLUMN stop_rule TEXT;"
      "ALTER TABLE trials ADD COLUMN stop_at INTEGER;"
      "ALTER TABLE trials ADD COLUMN stop_step INTEGER;"
      "ALTER TABLE trials ADD COLUMN stop_value REAL;"
      "ALTER TABLE trials ADD COLUMN stop_threshold REAL;"
      "ALTER TABLE trials ADD COLUMN stop_reason TEXT;"
      "ALTER TABLE trials ADD COLUMN stop_decided_at REAL;",
      // v5: why an agent is quarantined (host faults); NULL: it may have work.
      "ALTER TABLE agents ADD COLUMN quarantine TEXT",
      // v6: the agent's trial containment mode, as its REGISTER said; NULL: unsaid.
      "ALTER TABLE agents ADD COLUMN containment TEXT",
      // v7 (issue 25): a multi-node trial's nodes, JSON [{"agent", "gpus"}, ...]
      // node 0 first, for the trial's current attempt and for each attempt.
      "ALTER TABLE trials ADD COLUMN nodes TEXT;"
      "ALTER TABLE attempts ADD COLUMN nodes TEXT;",
      // v8 (issue 29): a pbt member's lineage, one row per member and round
      // (round 0: its first parameters): the parameters in force from
      // `from_step` on, and the member whose checkpoint it resumed from
      // (donor_trial_id, donor_segment = that member's attempt; NULL: its own
      // or none). The member's parameter schedule is its rows by round.
      "CREATE TABLE IF NOT EXISTS pbt_lineage ("
      "  trial_id INTEGER NOT NULL REFERENCES trials(id),"
      "  round INTEGER NOT NULL,"
      "  from_step INTEGER NOT NULL,"
      "  donor_trial_id INTEGER REFERENCES trials(id),"
      "  donor_segment INTEGER,"
      "  params TEXT NOT NULL,"
      "  changes TEXT NOT NULL DEFAULT '[]',"
      "  decided_at REAL NOT NULL,"
      "  PRIMARY KEY (trial_id, round)"
      ") WITHOUT ROWID;",
      // v9 (issue 30): a multi-node trial's processes for each attempt, JSON
      // {"worker_nodes", "master_port", "processes": [{"role", "index",
      // "node", "port"}, ...]}, so that a restarted scheduler knows which
      // nodes run workers, which run parameter servers, and the ports held.
      "ALTER TABLE attempts ADD COLUMN gang TEXT;",
  };
  static_assert(std::size(kSteps) == kSchemaVersion, "one migration step per schema version");
  for (; version < kSchemaVersion; ++version) {
    s = conn_->exec(kSteps[version]);
    if (!s.ok()) return fail(s);
  }
  // Every state CHECK (trials, sweeps, agents) is common/states.h's table:
  // a table whose list differs is rebuilt here (state_checks.h).
  auto synced = sync_state_checks(*conn_, state_columns());
  if (!synced.ok()) return fail(synced.status());
  std::string set = "INSERT INTO meta(key, value) VALUES('schema_version', '" + std::to_string(version) +
                    "') ON CONFLICT(key) DO UPDATE SET value=excluded.value";
  s = conn_->exec(set.c_str());
  if (!s.ok()) return fail(s);
  SWEPT_RETURN_IF_ERROR(conn_->exec("COMMIT"));
  schema_version_ = version;
  return Status::Ok();
}

}  // namespace swept::store
