// The codec's client messages (docs/protocol.md: a client and the
// scheduler): SUBMIT, CANCEL, RETRY, the queries and their replies, DONE
// and ERROR. The rows the replies carry are protocol_rows.cpp's. See
// protocol_codec.h for the parts' contract.
#include <string>

#include "common/protocol_codec.h"

namespace swept::protocol::codec {

// ---- writing ----

json body(const Error& m) { return {{"request_id", m.request_id}, {"code", m.code}, {"message", m.message}}; }
json body(const Submit& m) {
  json j = {{"request_id", m.request_id}, {"spec", m.spec}, {"source", m.source}};
  // Absent unless given: older schedulers read the same message.
  if (m.warm_sweep) j["warm_sweep"] = *m.warm_sweep;
  if (m.warm_trials) {
    json a = json::array();
    for (const auto& t : *m.warm_trials)
      a.push_back({{"params", t.params}, {"value", opt(t.value)}, {"origin", t.origin}, {"text_values", t.text_values}});
    j["warm_trials"] = std::move(a);
  }
  return j;
}
json body(const Submitted& m) {
  json j = {{"request_id", m.request_id}, {"sweep_id", m.sweep_id}, {"total_trials", opt(m.total_trials)}};
  if (m.warm_start) j["warm_start"] = *m.warm_start;
  return j;
}
json body(const Cancel& m) {
  json j = {{"request_id", m.request_id}};
  if (m.sweep_id) j["sweep_id"] = *m.sweep_id;
  if (m.trial_id) j["trial_id"] = *m.trial_id;
  return j;
}
json body(const Retry& m) {
  json j = {{"request_id", m.request_id}, {"sweep_id", m.sweep_id}};
  if (m.early_stopped) j["early_stopped"] = true;  // absent when false: old schedulers read the same message
  return j;
}
json body(const Done& m) { return {{"request_id", m.request_id}, {"message", m.message}, {"count", m.count}}; }
json body(const QuerySweeps& m) {
  json j = {{"request_id", m.request_id}};
  if (m.sweep_id) j["sweep_id"] = *m.sweep_id;
  return j;
}
json body(const Sweeps& m) {
  json a = json::array();
  for (const auto& s : m.sweeps) a.push_back(to_json(s));
  return {{"request_id", m.request_id}, {"sweeps", std::move(a)}};
}
json body(const QueryTrials& m) {
  json j = {{"request_id", m.request_id}, {"sweep_id", m.sweep_id}, {"limit", m.limit}};
  if (m.after_index != kFromFirstTrial) j["after_index"] = m.after_index;
  return j;
}
json body(const Trials& m) {
  json a = json::array();
  for (const auto& t : m.trials) a.push_back(to_json(t));
  json j = {{"request_id", m.request_id}, {"trials", std::move(a)}};
  if (m.next_after_index) j["next_after_index"] = *m.next_after_index;
  return j;
}
json body(const QueryAgents& m) {
  json j = {{"request_id", m.request_id}};
  if (m.all) j["all"] = true;
  return j;
}
json body(const ReleaseAgent& m) { return {{"request_id", m.request_id}, {"name", m.name}}; }
json body(const Agents& m) {
  json a = json::array();
  for (const auto& x : m.agents) a.push_back(to_json(x));
  return {{"request_id", m.request_id}, {"agents", std::move(a)}};
}

// ---- reading ----

void read(const Reader& r, Error& m) {
  m = Error{opt_field_str(r, "request_id"), r.field("code").str(), opt_field_str(r, "message")};
}

void read(const Reader& r, Submit& m) {
  m = Submit{r.field("request_id").str(), r.field("spec").str(), opt_field_str(r, "source"), std::nullopt, std::nullopt};
  if (r.has("warm_sweep")) m.warm_sweep = r.field("warm_sweep").i64();
  if (r.has("warm_trials")) {
    Reader a = r.field("warm_trials");
    m.warm_trials.emplace();
    for (size_t i = 0, n = a.size(); i < n; ++i) {
      Reader t = a.at(i);
      m.warm_trials->push_back(WarmTrial{t.field("params").object(), t.field("value").opt_f64(),
                                         opt_field_str(t, "origin"),
                                         t.has("text_values") ? t.field("text_values").boolean() : false});
    }
  }
}

void read(const Reader& r, Submitted& m) {
  m = Submitted{r.field("request_id").str(), r.field("sweep_id").i64(),
                r.has("total_trials") ? r.field("total_trials").opt_i64() : std::nullopt, std::nullopt};
  if (r.has("warm_start")) m.warm_start = r.field("warm_start").str();
}

void read(const Reader& r, Cancel& m) {
  m.request_id = r.field("request_id").str();
  if (r.has("sweep_id")) m.sweep_id = r.field("sweep_id").i64();
  if (r.has("trial_id")) m.trial_id = r.field("trial_id").i64();
  if (m.sweep_id.has_value() == m.trial_id.has_value())
    throw FieldError(r.path() + ": exactly one of sweep_id and trial_id must be given");
}

void read(const Reader& r, Retry& m) {
  m = Retry{r.field("request_id").str(), r.field("sweep_id").i64(),
            r.has("early_stopped") ? r.field("early_stopped").boolean() : false};
}

void read(const Reader& r, Done& m) {
  m = Done{r.field("request_id").str(), opt_field_str(r, "message"), opt_field_i64(r, "count", 0)};
}

void read(const Reader& r, QuerySweeps& m) {
  m.request_id = r.field("request_id").str();
  if (r.has("sweep_id")) m.sweep_id = r.field("sweep_id").i64();
}

void read(const Reader& r, Sweeps& m) {
  m.request_id = r.field("request_id").str();
  Reader a = r.field("sweeps");
  for (size_t i = 0, n = a.size(); i < n; ++i) m.sweeps.push_back(read_sweep_row(a.at(i)));
}

void read(const Reader& r, QueryTrials& m) {
  m.request_id = r.field("request_id").str();
  m.sweep_id = r.field("sweep_id").i64();
  m.after_index = opt_field_i64(r, "after_index", kFromFirstTrial);
  m.limit = opt_field_i64(r, "limit", kTrialsPageDefault);
  if (m.limit < 1 || m.limit > kTrialsPageMax)
    throw FieldError(r.path() + ".limit: must be 1 to " + std::to_string(kTrialsPageMax));
}

void read(const Reader& r, Trials& m) {
  m.request_id = r.field("request_id").str();
  Reader a = r.field("trials");
  for (size_t i = 0, n = a.size(); i < n; ++i) m.trials.push_back(read_trial_row(a.at(i)));
  if (r.has("next_after_index")) m.next_after_index = r.field("next_after_index").opt_i64();
}

void read(const Reader& r, QueryAgents& m) {
  m = QueryAgents{r.field("request_id").str(), r.has("all") ? r.field("all").boolean() : false};
}

void read(const Reader& r, ReleaseAgent& m) { m = ReleaseAgent{r.field("request_id").str(), r.field("name").str()}; }

void read(const Reader& r, Agents& m) {
  m.request_id = r.field("request_id").str();
  Reader a = r.field("agents");
  for (size_t i = 0, n = a.size(); i < n; ++i) m.agents.push_back(read_agent_row(a.at(i)));
}

}  // namespace swept::protocol::codec
