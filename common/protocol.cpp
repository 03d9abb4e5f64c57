// Codec of the swept protocol (docs/protocol.md): the frames, and the
// dispatch from a kind's name to its body's reader. The bodies are written
// and read by the parts protocol_codec.h names (agent messages, client
// messages, rows); every refusal names the offending field, and no
// exception escapes decode().
#include "common/protocol.h"

#include <string>
#include <string_view>
#include <type_traits>

#include "common/protocol_codec.h"

namespace swept::protocol {
namespace {

using nlohmann::json;

// The kind frame of each message type (encoding).
template <typename T>
struct KindOf;
#define SWEPT_KIND_OF(T, name)                 \
  template <>                                  \
  struct KindOf<T> {                           \
    static constexpr const char* kName = name; \
  };
SWEPT_PROTOCOL_KINDS(SWEPT_KIND_OF)
#undef SWEPT_KIND_OF

// The body's reader of each kind frame (decoding): one entry per kind.
struct KindReader {
  std::string_view name;
  Message (*read)(const codec::Reader& body);
};
template <typename T>
Message read_as(const codec::Reader& body) {
  T m;
  codec::read(body, m);
  return m;
}
#define SWEPT_KIND_READER(T, name) {name, read_as<T>},
constexpr KindReader kKindReaders[] = {SWEPT_PROTOCOL_KINDS(SWEPT_KIND_READER)};
#undef SWEPT_KIND_READER

// nullptr for a kind this side does not know.
const KindReader* reader_of(std::string_view kind) {
  for (const KindReader& k : kKindReaders)
    if (k.name == kind) return &k;
  return nullptr;
}

// Frames should be short and printable in messages: quote at most 40 bytes.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 32 && c < 127) ? c : '?';
  if (s.size() > 40) out += "...";
  return out;
}

}  // namespace

const char* kind_name(const Message& message) {
  return std::visit([](const auto& m) { return KindOf<std::decay_t<decltype(m)>>::kName; }, message);
}

Frames encode(const Message& message, std::string_view protocol_id) {
  Frames frames;
  frames.reserve(3);
  frames.emplace_back(protocol_id);
  frames.emplace_back(kind_name(message));
  // Replace invalid UTF-8 (a trial's log may hold any bytes) instead of throwing.
  frames.push_back(std::visit([](const auto& m) { return codec::body(m); }, message)
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  // A checkpoint part's bytes: a frame of their own, never JSON (protocol_checkpoint.cpp).
  if (const auto* part = std::get_if<CheckpointPart>(&message); part && !part->data.empty() && !part->data_in_body)
    frames.push_back(part->data);
  return frames;
}

Decoded decode(const Frames& frames) {
  Decoded d;
  if (frames.empty()) {
    d.failure = DecodeFailure::kNotSwept;
    d.error = "empty message";
    return d;
  }
  if (frames[0] != kProtocolId) {
    bool swept_family = frames[0].rfind("swept/", 0) == 0;
    d.failure = swept_family ? DecodeFailure::kVersion : DecodeFailure::kNotSwept;
    d.error = swept_family ? "protocol version \"" + printable(frames[0]) + "\" is not supported; this peer speaks " +
                                 std::string(kProtocolId) + ": use the same swept version on both sides"
                           : "not a swept message (frame 0 is \"" + printable(frames[0]) + "\")";
    if (frames.size() > 1) d.kind = printable(frames[1]);
    if (frames.size() == 3) {  // so that a client can still be answered
      json j = json::parse(frames[2], nullptr, /*allow_exceptions=*/false);
      if (j.is_object())
        if (auto it = j.find("request_id"); it != j.end() && it->is_string()) d.request_id = it->get<std::string>();
    }
    return d;
  }
  const bool data_frame = frames.size() == 4 && frames[1] == "CHECKPOINT_PART";  // its bytes, a frame of their own
  if (frames.size() != 3 && !data_frame) {
    d.failure = DecodeFailure::kMalformed;
    d.error = "expected 3 frames (protocol, kind, body), got " + std::to_string(frames.size());
    if (frames.size() > 1) d.kind = printable(frames[1]);
    return d;
  }
  d.kind = frames[1];
  json j = json::parse(frames[2], nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    d.failure = DecodeFailure::kMalformed;
    d.kind = printable(frames[1]);
    d.error = printable(frames[1]) + ": the body is not a JSON object";
    return d;
  }
  if (auto it = j.find("request_id"); it != j.end() && it->is_string()) d.request_id = it->get<std::string>();
  const KindReader* reader = reader_of(frames[1]);
  if (!reader) {
    d.failure = DecodeFailure::kUnknownKind;
    d.kind = printable(frames[1]);
    d.error = "unknown message kind \"" + d.kind + "\"";
    return d;
  }
  try {
    d.message = reader->read(codec::Reader(j, frames[1]));
    if (data_frame) codec::take_data_frame(frames[3], std::get<CheckpointPart>(*d.message));
  } catch (const std::exception& e) {
    d.failure = DecodeFailure::kMalformed;
    d.error = e.what();
    d.message.reset();
  }
  return d;
}

}  // namespace swept::protocol
