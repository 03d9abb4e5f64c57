// libFuzzer target for the sweep parser (built with -DSWEPT_FUZZ=ON under
// clang; run by scripts/fuzz.sh). Every input goes through both
// readers, JSON and YAML (and the content-sniffing kAuto), and must give
// either a spec or problems, never a crash, a sanitizer report or a hang; a
// spec must then expand: its first trials, their commands and its summary.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace {
void expand_some(const swept::sweeps::SweepSpec& spec);
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace swept::sweeps;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (Format format : {Format::kJson, Format::kYaml, Format::kAuto}) {
    const ParseOutcome outcome = parse_sweep(text, format);
    if (outcome.spec.has_value() == !outcome.problems.empty()) __builtin_trap();  // the contract
    for (const Problem& p : outcome.problems) (void)p.ToString();
    for (const Problem& p : outcome.warnings) (void)p.ToString();
    if (outcome.spec) expand_some(*outcome.spec);
  }
  return 0;
}

namespace {
void expand_some(const swept::sweeps::SweepSpec& spec) {
  using namespace swept::sweeps;
  (void)describe(spec);
  const auto count = trial_count(spec);
  const int64_t n = count ? (*count < 8 ? *count : 8) : 8;
  CommandContext context;
  context.getenv = [](const std::string&) { return std::optional<std::string>("value"); };
  for (int64_t i = 0; i < n; ++i) {
    Trial t = trial_at(spec, i);
    (void)t.params.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    auto argv = build_command(spec, t.params, context);
    (void)args_json(t.params);
  }
}
}  // namespace
