// libFuzzer target for the sweep parser (built with -DSWEPT_FUZZ=ON under
// clang; run by scripts/fuzz-sweep-parser.sh). Any input must give either a
// spec or problems, never a crash, a sanitizer report or a hang; a spec must
// then expand: its first trials, their commands and its summary.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sweeps/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace swept::sweeps;
  const ParseOutcome outcome = parse_sweep(std::string_view(reinterpret_cast<const char*>(data), size));
  if (outcome.spec.has_value() == !outcome.problems.empty()) __builtin_trap();  // the contract
  for (const Problem& p : outcome.problems) (void)p.ToString();
  if (!outcome.spec) return 0;
  const SweepSpec& spec = *outcome.spec;
  (void)describe(spec);
  const auto count = trial_count(spec);
  const int64_t n = count ? (*count < 8 ? *count : 8) : 8;
  CommandContext context;
  context.getenv = [](const std::string&) { return std::optional<std::string>("value"); };
  std::vector<nlohmann::json> tried;
  for (int64_t i = 0; i < n; ++i) {
    Trial t = trial_at(spec, i);
    (void)t.params.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    auto argv = build_command(spec, t.params, context);
    (void)args_json(t.params);
    tried.push_back(t.params);
  }
  if (count) (void)next_untried_trial(spec, tried);
  return 0;
}
