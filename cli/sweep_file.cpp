#include "cli/sweep_file.h"

#include <fstream>
#include <iostream>

namespace swept::cli {

std::optional<std::string> read_sweep_file(const std::string& path) {
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

std::optional<sweeps::SweepSpec> load_sweep_file(const std::string& path) {
  auto text = read_sweep_file(path);
  if (!text) return std::nullopt;
  sweeps::ParseOutcome outcome = sweeps::parse_sweep(*text);
  if (!outcome.spec) {
    for (const auto& p : outcome.problems) std::cerr << path << ": " << p.ToString() << "\n";
    return std::nullopt;
  }
  return std::move(outcome.spec);
}

}  // namespace swept::cli
