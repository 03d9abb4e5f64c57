// What the client subcommands (submit, status, wait, trials, best, cancel,
// retry, export, agents) share: where the answers come from (a scheduler
// over the protocol, or a database file read-only with --db), how a Status
// becomes an exit code, and small text-formatting helpers.
// Header-only so that each subcommand stays one cli/cmd_<name>.cpp file.
// Thread safety: single-threaded CLI use.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/flags.h"
#include "common/curvezmq.h"
#include "common/exit_codes.h"
#include "common/params.h"
#include "common/protocol.h"
#include "common/states.h"
#include "common/status.h"
#include "scheduler/client.h"
#include "store/reader.h"

namespace swept::cli {

// The options every client command takes.
struct ClientFlags {
  std::string scheduler;  // --scheduler; empty: SWEPT_SCHEDULER or the default
  std::string db;         // --db: read a database file instead (read-only commands)
  int timeout_ms = 5000;  // --timeout-ms: per request
  std::string key;            // --key: this client's secret key file (else $SWEPT_KEY)
  std::string scheduler_pub;  // --scheduler-pub: the scheduler's public key file (else $SWEPT_SCHEDULER_PUB)
};

inline void add_client_flags(po::options_description& d, ClientFlags& f, bool allow_db) {
  d.add_options()("scheduler", po::value(&f.scheduler),
                  "scheduler address (default: $SWEPT_SCHEDULER, else tcp://127.0.0.1:5555)")(
      "timeout-ms",
      po::value(&f.timeout_ms)->default_value(5000)->notifier([](int ms) {
        if (ms < 1) throw po::error("--timeout-ms must be at least 1 (milliseconds), got " + std::to_string(ms));
      }),
      "give up on a request after this long")(
      "key", po::value(&f.key), "this client's secret key file, for a keyed scheduler (default: $SWEPT_KEY)")(
      "scheduler-pub", po::value(&f.scheduler_pub),
      "the scheduler's public key file (default: $SWEPT_SCHEDULER_PUB)");
  if (allow_db)
    d.add_options()("db", po::value(&f.db), "read this database file directly (no scheduler needed)");
}

// A connection to the scheduler, with CURVE keys when --key/--scheduler-pub
// (or SWEPT_KEY/SWEPT_SCHEDULER_PUB) name them.
inline Result<std::unique_ptr<scheduler::Client>> connect_client(const ClientFlags& f) {
  auto keys = curvezmq::client_keys(f.key, f.scheduler_pub);
  if (!keys.ok()) return keys.status();
  return scheduler::Client::connect(scheduler::scheduler_endpoint(f.scheduler), f.timeout_ms, *keys);
}

// Maps a Status to the documented exit codes (docs/exit-codes.md).
inline int exit_code_for(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kUnavailable: return kExitUnavailable;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kCorruption: return kExitUsage;  // a --db that is not a (readable) swept database
    case StatusCode::kInternal: return kExitInternal;
    default: return kExitFailure;
  }
}

inline int report(const std::string& command, const Status& s) {
  std::cerr << "swept " << command << ": " << s.message() << "\n";
  return exit_code_for(s);
}


// Where answers come from: the scheduler, or a database file read-only.
class ResultSource {
 public:
  static Result<ResultSource> open(const ClientFlags& f) {
    ResultSource s;
    if (!f.db.empty()) {
      auto db = store::open_reader(f.db);
      if (!db.ok()) return db.status();
      s.db_ = std::move(*db);
      return s;
    }
    auto c = connect_client(f);
    if (!c.ok()) return c.status();
    s.client_ = std::move(*c);
    return s;
  }

  Result<std::vector<SweepRow>> sweeps(std::optional<int64_t> id) {
    if (db_) return store::sweep_summaries(*db_, id);
    auto r = client_->call(protocol::QuerySweeps{"", id});
    if (!r.ok()) return r.status();
    if (auto* s = std::get_if<protocol::Sweeps>(&*r)) return std::move(s->sweeps);
    return unexpected(*r);
  }
  Result<std::vector<TrialRow>> trials(int64_t sweep_id) {
    if (db_) return store::trial_rows(*db_, sweep_id);
    // Page by page (QUERY_TRIALS is paged): the whole sweep for the caller.
    std::vector<TrialRow> all;
    protocol::QueryTrials q{"", sweep_id, protocol::kFromFirstTrial, protocol::kTrialsPageDefault};
    while (true) {
      auto r = client_->call(q);
      if (!r.ok()) return r.status();
      auto* t = std::get_if<protocol::Trials>(&*r);
      if (!t) return unexpected(*r);
      for (auto& row : t->trials) all.push_back(std::move(row));
      if (!t->next_after_index || *t->next_after_index <= q.after_index) return all;
      q.after_index = *t->next_after_index;
    }
  }
  // `all`: every agent kept; else the live view (docs/protocol.md, QUERY_AGENTS).
  Result<std::vector<AgentRow>> agents(bool all = false) {
    if (db_) {
      std::optional<double> since;
      if (!all) since = double(::time(nullptr)) - protocol::kAgentDisplaySeconds;
      return store::list_agents(*db_, since);
    }
    auto r = client_->call(protocol::QueryAgents{"", all});
    if (!r.ok()) return r.status();
    if (auto* a = std::get_if<protocol::Agents>(&*r)) return std::move(a->agents);
    return unexpected(*r);
  }
  scheduler::Client* client() { return client_.get(); }

 private:
  static Status unexpected(const protocol::Message& m) {
    return Status::Internal(std::string("unexpected reply ") + protocol::kind_name(m));
  }
  std::unique_ptr<scheduler::Client> client_;
  std::unique_ptr<store::Connection> db_;
};

// A sweep or trial id from the command line.
inline Result<int64_t> parse_id(const std::string& what, const std::string& text) {
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size() && v > 0) return static_cast<int64_t>(v);
  } catch (...) {
  }
  return Status::InvalidArgument(what + " must be a positive integer id, found \"" + text + "\"");
}

// Numbers as people read them: 0.1234, 1.5e-05, 12.
inline std::string fmt_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
inline std::string fmt_opt(const std::optional<double>& v) { return v ? fmt_num(*v) : "-"; }

// A parameter's value as people read it: text bare, numbers short, the rest JSON.
inline std::string param_value_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.is_number_float() ? fmt_num(v.get<double>()) : v.dump();
}
// {"lr": 0.1, "opt": {"name": "adam"}} -> "lr=0.1 opt.name=adam" (names: common/params.h)
inline std::string params_text(const nlohmann::json& j) {
  std::string s;
  for (const auto& p : flatten_params(j)) s += (s.empty() ? "" : " ") + p.name + "=" + param_value_text(*p.value);
  return s;
}

// "14 completed, 1 failed, 0 stopped, 0 lost, 0 early-stopped": every final
// state's count, in the order of common/states.h, by its display name.
inline std::string final_counts_text(const StateCounts& c) {
  std::string s;
  for (const auto& st : kTrialStates) {
    if (!st.final) continue;
    if (!s.empty()) s += ", ";
    s += std::to_string(c[st.state]);
    s += ' ';
    s += display_name(st.state);
  }
  return s;
}

// Trials not in a final state (queued or running).
inline int64_t unfinished_count(const StateCounts& c) { return c.total() - c.done(); }
// The final trials counted against total_trials: a warm start's imported
// trials (issue 28) are points of a grid, so in its total, but no work of any
// other method's sweep (its run_cap counts its own trials).
inline int64_t done_of_total(const SweepRow& s) {
  return s.counts.done() - (s.method == "grid" ? 0 : s.counts[TrialState::kImported]);
}

// Text from the database or a peer (sweep names, parameter values, agent
// names, reasons) made safe to print on a terminal: C0 controls (ESC, CR,
// BEL, newlines...), DEL and the C1 controls (U+0080 to U+009F, which some
// terminals obey too) are written as \xNN or \u00NN, and a backslash as \\,
// so that no value can move the cursor, retitle the window or hide text.
// JSON output needs none of this: the JSON writer escapes control characters.
inline std::string terminal_safe(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      const auto d = static_cast<unsigned char>(text[++i]);
      out += "\\u00";
      out += hex[d >> 4];
      out += hex[d & 15];
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// A plain text table with columns padded to their widest cell; every cell is
// printed through terminal_safe.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) {
    for (auto& cell : row) cell = terminal_safe(cell);
    rows_.push_back(std::move(row));
  }
  void print(std::ostream& out) const {
    std::vector<size_t> width;
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) {
        if (width.size() <= i) width.push_back(0);
        width[i] = std::max(width[i], r[i].size());
      }
    for (const auto& r : rows_) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
      }
      out << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

// A trial's GPUs, "2,3" or "0@0.4" ("-" for none); a multi-node trial's per
// node, node 0 first: "0,1+2,3".
inline std::string gpus_text(const std::vector<int>& gpus, std::optional<double> fraction) {
  if (gpus.empty()) return "-";
  std::string s;
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive)
  // about `const char* + std::string&&` here.
  for (int g : gpus) {
    if (!s.empty()) s += ',';
    s += std::to_string(g);
  }
  if (fraction) {
    s += '@';
    s += fmt_num(*fraction);
  }
  return s;
}
inline std::string gpus_text(const TrialRow& t) {
  bool any = false;
  for (const TrialNode& n : t.nodes) any = any || !n.gpus.empty();
  if (!any) return gpus_text(t.gpus, t.gpu_fraction);
  std::string s;
  for (const TrialNode& n : t.nodes) s.append(s.empty() ? "" : "+").append(gpus_text(n.gpus, t.gpu_fraction));
  return s;
}
// Where a trial runs: its agent, or a multi-node trial's agents "a+b".
inline std::string agents_text(const TrialRow& t) {
  if (t.nodes.empty()) return t.agent.value_or("-");
  std::string s;
  for (const TrialNode& n : t.nodes) s.append(s.empty() ? "" : "+").append(n.agent);
  return s;
}

// The sweep's best trial: the row of summary.best, which the store
// computes (store/reader.h, "Best": one definition for the dashboard,
// `swept status` and `swept best`), never recomputed here.
inline std::optional<TrialRow> best_trial(const SweepRow& s, const std::vector<TrialRow>& trials) {
  if (!s.best) return std::nullopt;
  for (const auto& t : trials)
    if (t.id == s.best->trial_id) return t;
  return std::nullopt;
}

// A sweep with several objectives: its objective names joined, "loss, latency".
inline std::string objective_names(const ParetoFront& f) {
  std::string s;
  for (const auto& o : f.objectives) s.append(s.empty() ? "" : ", ").append(o.name);
  return s;
}
// A trial's final value of each objective, "loss=0.1 latency=12" ("-" for one
// it never reported).
inline std::string objective_values_text(const ParetoFront& f, const TrialRow& t) {
  std::string s;
  for (const auto& o : f.objectives) {
    auto it = t.latest.find(o.name);
    s.append(s.empty() ? "" : " ").append(o.name).append("=").append(it == t.latest.end() ? "-" : fmt_num(it->second));
  }
  return s;
}
// A sweep's constraints as people read them: "memory <= 8, accuracy >= 0.5".
inline std::string constraints_text(const std::vector<ConstraintBound>& constraints) {
  std::string s;
  for (const auto& c : constraints) {
    if (c.min) s.append(s.empty() ? "" : ", ").append(c.name).append(" >= ").append(fmt_num(*c.min));
    if (c.max) s.append(s.empty() ? "" : ", ").append(c.name).append(" <= ").append(fmt_num(*c.max));
  }
  return s;
}
// A trial's state as the tables print it: "stopping" for a stopped trial
// still ending, and an infeasible completed trial marked with what it violates.
inline std::string trial_state_text(const TrialRow& t) {
  std::string s = stopping(t) ? "stopping" : display_name(t.state);
  if (t.feasible && !*t.feasible) {
    s += " (infeasible:";
    for (const auto& name : t.violated) s.append(" ").append(name);
    s += ")";
  }
  return s;
}

}  // namespace swept::cli
