#include "cli/sweep_file.h"

#include <algorithm>
#include <fstream>
#include <iostream>

namespace swept::cli {

sweeps::Format format_for_path(const std::string& path) {
  const size_t dot = path.find_last_of('.');
  const size_t slash = path.find_last_of('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return sweeps::Format::kAuto;
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == "yaml" || ext == "yml") return sweeps::Format::kYaml;
  if (ext == "json") return sweeps::Format::kJson;
  return sweeps::Format::kAuto;
}

namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << path << ": cannot open the file (does it exist, and may you read it?)\n";
    return std::nullopt;
  }
  std::string text(sweeps::kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    std::cerr << path << ": cannot read the file (is it a directory?)\n";
    return std::nullopt;
  }
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

std::string position(int line, int column) {
  return line > 0 ? " (line " + std::to_string(line) + ", column " + std::to_string(column) + ")" : "";
}

}  // namespace

std::optional<LoadedSweep> load_sweep_file(const std::string& path, const LoadOptions& options, std::ostream* explain_to) {
  auto text = read_text(path);
  if (!text) return std::nullopt;
  sweeps::ParseOutcome outcome = sweeps::parse_sweep(*text, format_for_path(path));
  if (options.explain && explain_to) {
    for (const auto& r : outcome.readings) {
      *explain_to << path << ": " << (r.path.empty() ? "" : r.path + ": ") << r.spelling << " read as " << r.value << ": "
                  << r.rule << position(r.line, r.column) << "\n";
    }
  }
  for (const auto& w : outcome.warnings) {
    std::cerr << path << ": " << (options.strict ? "" : "warning: ") << w.ToString() << "\n";
  }
  if (!outcome.spec || (options.strict && !outcome.warnings.empty())) {
    for (const auto& p : outcome.problems) std::cerr << path << ": " << p.ToString() << "\n";
    return std::nullopt;
  }
  return LoadedSweep{std::move(*outcome.spec), std::move(*text)};
}

std::optional<std::string> read_sweep_file(const std::string& path) {
  auto loaded = load_sweep_file(path);
  if (!loaded) return std::nullopt;
  return std::move(loaded->text);
}

}  // namespace swept::cli
