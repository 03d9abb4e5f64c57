// libFuzzer target for the protocol decoder (docs/protocol.md), the code
// that reads every message an agent or a client sends the scheduler: built
// with -DSWEPT_FUZZ=ON under clang, run by scripts/fuzz.sh (CTest:
// common.fuzz.protocol).
//
// An input is one message: when it starts with a byte below 0x20, that
// byte picks a message kind and the rest is its JSON body behind a valid
// kProtocolId frame (so most inputs reach the field readers); otherwise the
// input is split at '\n' into up to 8 raw frames. decode() must either give
// a message or a failure with an error text, never crash, throw or hang; a
// decoded message must encode and decode back to itself.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/protocol.h"

namespace {
constexpr const char* kKinds[] = {"REGISTER",     "REGISTER_ACK", "REGISTER_REJECT", "HEARTBEAT",    "START_TRIAL",
                                  "STOP_TRIAL",   "TRIAL_STARTED", "METRICS",        "TRIAL_EXITED", "EXIT_ACK",
                                  "DISCONNECT",   "ERROR",        "SUBMIT",          "SUBMITTED",    "CANCEL",
                                  "RETRY",        "DONE",         "QUERY_SWEEPS",    "SWEEPS",       "QUERY_TRIALS",
                                  "TRIALS",       "QUERY_AGENTS", "AGENTS"};
constexpr size_t kKindCount = sizeof kKinds / sizeof kKinds[0];
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace swept::protocol;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Frames frames;
  if (!text.empty() && static_cast<unsigned char>(text[0]) < 0x20) {
    frames = {std::string(kProtocolId), kKinds[static_cast<unsigned char>(text[0]) % kKindCount], std::string(text.substr(1))};
  } else {
    size_t start = 0;
    while (frames.size() < 8) {
      size_t end = text.find('\n', start);
      frames.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
  }
  const Decoded d = decode(frames);
  if (d.ok() != d.message.has_value()) __builtin_trap();  // the contract
  if (!d.ok() && d.error.empty()) __builtin_trap();         // every failure says why
  if (d.message) {
    const Decoded again = decode(encode(*d.message));
    if (!again.ok() || !(*again.message == *d.message)) __builtin_trap();
  }
  return 0;
}
