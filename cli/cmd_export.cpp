// `swept export SWEEP --format csv|json [--output FILE]`: every trial with
// its parameters (flattened: opt.name) and latest metrics, as CSV (RFC 4180
// quoting) or JSON; a pbt sweep's members with their lineage (JSON: each
// trial's "schedule"; CSV: a "schedule" column holding that JSON); a sweep
// with constraints, whether each completed trial is feasible (JSON:
// "feasible" and "violated"; CSV: columns "feasible" and "violated", the
// violated constraints' names joined by ';').
#include <fstream>
#include <map>
#include <set>

#include "cli/client_common.h"
#include "cli/command.h"

namespace swept::cli {
namespace {

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

int run_export(const std::vector<std::string>& args) {
  ClientFlags flags;
  std::string sweep, format = "csv", output;
  po::options_description desc("options");
  desc.add_options()("sweep", po::value(&sweep), "a sweep id")(
      "format", po::value(&format)->default_value("csv"), "csv or json")(
      "output,o", po::value(&output), "write here instead of stdout");
  add_client_flags(desc, flags, true);
  po::positional_options_description pos;
  pos.add("sweep", 1);
  if (auto rc = parse_flags("export", "swept export SWEEP --format csv|json [-o FILE] [--scheduler ADDR | --db FILE]",
                            args, desc, pos))
    return *rc;
  if (format != "csv" && format != "json") {
    std::cerr << "swept export: --format must be csv or json, found \"" << format << "\"\n";
    return kExitUsage;
  }
  auto id = parse_id("SWEEP", sweep);
  if (!id.ok()) return report("export", id.status());
  auto src = ResultSource::open(flags);
  if (!src.ok()) return report("export", src.status());
  auto rows = src->trials(*id);
  if (!rows.ok()) return report("export", rows.status());

  std::ofstream file;
  if (!output.empty()) {
    file.open(output);
    if (!file) {
      std::cerr << "swept export: cannot write " << output << "\n";
      return kExitFailure;
    }
  }
  std::ostream& out = output.empty() ? std::cout : file;
  if (format == "json") {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& t : *rows) a.push_back(protocol::to_json(t));
    out << a.dump(2) << "\n";
  } else {
    std::vector<std::map<std::string, std::string>> params(rows->size());
    std::set<std::string> param_cols, metric_cols;
    bool schedules = false;  // a pbt sweep: its members' lineage as one more column
    bool feasibility = false;  // a sweep with constraints: feasible and the violated constraints' names
    for (size_t i = 0; i < rows->size(); ++i) {
      for (const auto& p : flatten_params((*rows)[i].params)) {
        param_cols.insert(p.name);
        params[i][p.name] = param_value_text(*p.value);
      }
      for (const auto& [k, v] : (*rows)[i].latest) metric_cols.insert(k);
      schedules = schedules || !(*rows)[i].schedule.empty();
      feasibility = feasibility || (*rows)[i].feasible.has_value();
    }
    out << "trial_id,index,state,attempts,agent,exit_code,metric_value,reason";
    for (const auto& c : param_cols) out << "," << csv_cell("param." + c);
    for (const auto& c : metric_cols) out << "," << csv_cell("metric." + c);
    if (schedules) out << ",schedule";
    if (feasibility) out << ",feasible,violated";
    out << "\n";
    for (size_t i = 0; i < rows->size(); ++i) {
      const auto& t = (*rows)[i];
      out << t.id << "," << t.index << "," << name(t.state) << "," << t.attempts << "," << csv_cell(t.agent.value_or(""))
          << "," << (t.exit_code ? std::to_string(*t.exit_code) : "") << ","
          << (t.metric_value ? fmt_num(*t.metric_value) : "") << "," << csv_cell(t.reason.value_or(""));
      for (const auto& c : param_cols) out << "," << csv_cell(params[i].count(c) ? params[i][c] : "");
      for (const auto& c : metric_cols) out << "," << (t.latest.count(c) ? fmt_num(t.latest.at(c)) : "");
      if (schedules) out << "," << csv_cell(t.schedule.empty() ? "" : protocol::to_json(t)["schedule"].dump());
      if (feasibility) {
        // Empty for a trial not judged (not completed); the names joined by ';'.
        std::string violated;
        for (const std::string& v : t.violated) {
          if (!violated.empty()) violated += ';';
          violated += v;
        }
        out << "," << (t.feasible ? (*t.feasible ? "true" : "false") : "") << "," << csv_cell(violated);
      }
      out << "\n";
    }
  }
  out.flush();
  if (!out) {
    std::cerr << "swept export: writing failed\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("export", "export a sweep's trials as CSV or JSON", run_export);
}  // namespace swept::cli
