// The warm start's file: see warm_file.h. The two forms are those
// cmd_export.cpp writes; a change there is a change here.
#include "cli/warm_file.h"

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/states.h"

namespace swept::cli {
namespace {

using nlohmann::json;

Status bad(const std::string& path, const std::string& what) {
  return Status::InvalidArgument("warm_start.file: " + path + ": " + what);
}

bool has_value(TrialState s) { return s == TrialState::kCompleted || s == TrialState::kImported; }

// One CSV record (RFC 4180) from `text` at `pos`; false at the end.
bool csv_record(const std::string& text, size_t& pos, std::vector<std::string>& cells, bool& ok) {
  cells.clear();
  if (pos >= text.size()) return false;
  std::string cell;
  bool quoted = false;
  while (pos < text.size()) {
    const char c = text[pos++];
    if (quoted) {
      if (c != '"') cell += c;
      else if (pos < text.size() && text[pos] == '"') cell += '"', ++pos;
      else quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(std::move(cell));
      cell.clear();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && pos < text.size() && text[pos] == '\n') ++pos;
      break;
    } else {
      cell += c;
    }
  }
  ok = !quoted;
  cells.push_back(std::move(cell));
  return true;
}

// A CSV cell as the export wrote a value (param_value_text): text bare,
// anything else as JSON; so what reads as JSON other than a string is that.
json cell_value(const std::string& cell) {
  json v = json::parse(cell, nullptr, false);
  if (!v.is_discarded() && !v.is_string()) return v;
  return json(cell);
}

// "opt.lr" -> {"opt": {"lr": ...}}: the export's flat names (common/params.h) nested again.
void set_flat(json& params, const std::string& name, json value) {
  json* at = &params;
  size_t start = 0;
  for (size_t dot; (dot = name.find('.', start)) != std::string::npos; start = dot + 1) {
    json& next = (*at)[name.substr(start, dot - start)];
    if (!next.is_object()) next = json::object();
    at = &next;
  }
  (*at)[name.substr(start)] = std::move(value);
}

Result<std::vector<protocol::WarmTrial>> from_json(const std::string& path, const std::string& text,
                                                   const std::string& metric) {
  json all = json::parse(text, nullptr, false);
  if (!all.is_array()) return bad(path, "expected a JSON array of trials as `swept export --format json` writes it");
  std::vector<protocol::WarmTrial> out;
  for (size_t i = 0; i < all.size(); ++i) {
    const json& t = all[i];
    const std::string at = "element " + std::to_string(i);
    if (!t.is_object() || !t.contains("params") || !t["params"].is_object() || !t.contains("state") ||
        !t["state"].is_string())
      return bad(path, at + ": expected a trial object with \"state\" and \"params\"");
    protocol::WarmTrial w;
    w.params = t["params"];
    w.origin = path + ", trial " + (t.contains("id") ? t["id"].dump() : std::to_string(i));
    auto state = trial_state_named(t["state"].get<std::string>());
    if (state && has_value(*state) && t.contains("latest") && t["latest"].is_object() && t["latest"].contains(metric) &&
        t["latest"][metric].is_number())
      w.value = t["latest"][metric].get<double>();
    out.push_back(std::move(w));
  }
  return out;
}

Result<std::vector<protocol::WarmTrial>> from_csv(const std::string& path, const std::string& text,
                                                  const std::string& metric) {
  size_t pos = 0;
  std::vector<std::string> header, cells;
  bool ok = true;
  if (!csv_record(text, pos, header, ok) || !ok)
    return bad(path, "expected a CSV header (trial_id,index,state,...) as `swept export --format csv` writes it");
  std::map<std::string, size_t> column;
  for (size_t i = 0; i < header.size(); ++i) column[header[i]] = i;
  if (!column.count("state"))
    return bad(path, "expected a CSV with a `state` column as `swept export` writes it, or a JSON array of trials");
  const auto metric_column = column.find("metric." + metric);
  std::vector<protocol::WarmTrial> out;
  for (int64_t row = 2; csv_record(text, pos, cells, ok); ++row) {
    if (!ok) return bad(path, "row " + std::to_string(row) + ": a quoted cell is not closed");
    if (cells.size() == 1 && cells[0].empty()) continue;  // a blank line
    if (cells.size() != header.size())
      return bad(path, "row " + std::to_string(row) + ": expected " + std::to_string(header.size()) + " cells, found " +
                           std::to_string(cells.size()));
    protocol::WarmTrial w;
    w.params = json::object();
    w.text_values = true;
    w.origin = path + ", row " + std::to_string(row);
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i].rfind("param.", 0) == 0 && !cells[i].empty()) set_flat(w.params, header[i].substr(6), cell_value(cells[i]));
    auto state = trial_state_named(cells[column["state"]]);
    if (state && has_value(*state) && metric_column != column.end() && !cells[metric_column->second].empty()) {
      json v = cell_value(cells[metric_column->second]);
      if (v.is_number()) w.value = v.get<double>();
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

std::string warm_file_path(const std::string& sweep_file, const std::string& file) {
  if (!file.empty() && file[0] == '/') return file;
  const size_t slash = sweep_file.find_last_of('/');
  return slash == std::string::npos ? file : sweep_file.substr(0, slash + 1) + file;
}

Result<std::vector<protocol::WarmTrial>> read_warm_file(const std::string& path, const std::string& metric) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad(path, "cannot open the file (does it exist, and may you read it?)");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return bad(path, "cannot read the file (is it a directory?)");
  const std::string text = buf.str();
  const size_t first = text.find_first_not_of(" \t\r\n");
  const bool as_json = (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0) ||
                       (first != std::string::npos && text[first] == '[');
  auto trials = as_json ? from_json(path, text, metric) : from_csv(path, text, metric);
  if (!trials.ok()) return trials.status();
  bool any = false;
  for (const auto& t : *trials) any = any || t.value.has_value();
  if (!trials->empty() && !any)
    return bad(path, "no completed trial in it has a value of the sweep's metric '" + metric +
                         "'; export a sweep whose trials reported it, or change metric.name");
  return trials;
}

Result<std::optional<std::vector<protocol::WarmTrial>>> read_warm_start(const std::string& sweep_file,
                                                                        const sweeps::SweepSpec& spec) {
  using Trials = std::optional<std::vector<protocol::WarmTrial>>;
  if (!spec.warm_start || !spec.warm_start->file || !spec.metric) return Trials();
  SWEPT_ASSIGN_OR_RETURN(trials, read_warm_file(warm_file_path(sweep_file, *spec.warm_start->file), spec.metric->name));
  return Trials(std::move(trials));
}

}  // namespace swept::cli
