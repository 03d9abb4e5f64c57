#include "cli/command.h"

#include <algorithm>

namespace swept::cli {
namespace {
std::vector<CommandInfo>& registry() {
  static std::vector<CommandInfo> r;
  return r;
}
}  // namespace

Registrar::Registrar(const char* name, const char* summary, CommandFn fn) {
  auto& r = registry();
  r.push_back({name, summary, fn});
  std::sort(r.begin(), r.end(), [](const CommandInfo& a, const CommandInfo& b) { return a.name < b.name; });
}

const std::vector<CommandInfo>& commands() { return registry(); }

}  // namespace swept::cli
