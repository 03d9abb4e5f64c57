// Codec of the two messages that move a pbt segment's checkpoint between
// agents (protocol.h, CheckpointPull and CheckpointPart; docs/protocol.md).
// A part's bytes travel as a fourth frame of their own (protocol.cpp adds
// and takes it), so that nobody encodes, parses or decodes them on the way:
// the scheduler only moves the frame. Base64 in the body stays for agents
// that do not list kFeatureCheckpointFrames (both ways: such a holder sends
// it, such a puller is sent it). Every path is checked here, once, so that
// no agent ever opens a file outside the segment's folder because a peer
// said so.
#include <array>
#include <string>
#include <vector>

#include "common/protocol_codec.h"

namespace swept::protocol {
namespace codec {
namespace {

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) |
                       uint32_t(uint8_t(bytes[i + 2]));
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += kBase64[(v >> 6) & 63];
    out += kBase64[v & 63];
  }
  if (i < bytes.size()) {
    const bool two = i + 1 < bytes.size();
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (two ? uint32_t(uint8_t(bytes[i + 1])) << 8 : 0);
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += two ? kBase64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Strict: the length a multiple of 4, padding only at the end, no other bytes.
std::string base64_decode(const Reader& r) {
  const std::string text = r.str();
  static const std::array<int8_t, 256> value = [] {
    std::array<int8_t, 256> v{};
    v.fill(-1);
    for (int i = 0; i < 64; ++i) v[uint8_t(kBase64[i])] = static_cast<int8_t>(i);
    return v;
  }();
  if (text.size() % 4 != 0) r.fail("base64 text (its length a multiple of 4)");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last && text[i + 3] == '=' ? 1 + (text[i + 2] == '=') : 0;
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + static_cast<size_t>(k)];
      const int8_t d = (k >= 4 - pad) ? 0 : value[uint8_t(c)];
      if (d < 0) r.fail("base64 text");
      v = (v << 6) | uint32_t(d);
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 255);
    if (pad < 1) out += static_cast<char>(v & 255);
  }
  return out;
}

// A file's path inside a segment's folder: relative, no "." or ".." part,
// no empty part, no NUL.
std::string read_inner_path(const Reader& r, bool may_be_empty) {
  const std::string p = r.str();
  if (p.empty()) {
    if (may_be_empty) return p;
    r.fail("a file's path inside the checkpoint");
  }
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = std::min(p.find('/', start), p.size());
    const std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string::npos)
      throw FieldError(r.path() + ": '" + p + "' is not a relative path inside the checkpoint");
    start = end + 1;
  }
  return p;
}

void read_segment_ids(const Reader& r, int64_t& trial_id, int& attempt, int64_t& from_trial_id, int& from_attempt) {
  trial_id = r.field("trial_id").i64();
  attempt = r.field("attempt").i32();
  Reader from = r.field("from");
  if (from.size() != 2) from.fail("[trial_id, attempt]");
  from_trial_id = from.at(0).i64();
  from_attempt = from.at(1).i32();
  if (trial_id <= 0 || attempt <= 0 || from_trial_id <= 0 || from_attempt <= 0)
    throw FieldError(r.path() + ": trial ids and attempts must be positive");
}

}  // namespace

json body(const CheckpointPull& m) {
  json j = {{"trial_id", m.trial_id},
            {"attempt", m.attempt},
            {"from", json::array({m.from_trial_id, m.from_attempt})},
            {"path", m.path},
            {"offset", m.offset}};
  if (m.sweep_id > 0) j["sweep_id"] = m.sweep_id;
  return j;
}

void read(const Reader& r, CheckpointPull& m) {
  read_segment_ids(r, m.trial_id, m.attempt, m.from_trial_id, m.from_attempt);
  m.sweep_id = opt_field_i64(r, "sweep_id", 0);
  m.path = read_inner_path(r.field("path"), true);
  m.offset = r.field("offset").i64();
  if (m.offset < 0) throw FieldError(r.path() + ".offset: must be 0 or more");
}

json body(const CheckpointPart& m) {
  json j = {{"trial_id", m.trial_id},
            {"attempt", m.attempt},
            {"from", json::array({m.from_trial_id, m.from_attempt})},
            {"path", m.path},
            {"offset", m.offset}};
  if (!m.error.empty()) j["error"] = m.error;
  if (!m.data.empty() && m.data_in_body) j["data"] = base64_encode(m.data);
  if (m.path.empty() && m.error.empty()) {
    json files = json::array();
    for (const CheckpointFile& f : m.files) files.push_back(json::array({f.path, f.size, f.crc}));
    j["files"] = std::move(files);
  }
  return j;
}

void read(const Reader& r, CheckpointPart& m) {
  read_segment_ids(r, m.trial_id, m.attempt, m.from_trial_id, m.from_attempt);
  m.path = read_inner_path(r.field("path"), true);
  m.offset = r.field("offset").i64();
  if (m.offset < 0) throw FieldError(r.path() + ".offset: must be 0 or more");
  m.error = opt_field_str(r, "error");
  if (r.has("data")) m.data = base64_decode(r.field("data"));
  if (static_cast<int64_t>(m.data.size()) > kCheckpointPartBytes)
    throw FieldError(r.path() + ".data: more than " + std::to_string(kCheckpointPartBytes) + " bytes");
  if (m.path.empty() && m.error.empty()) {
    Reader files = r.field("files");
    for (size_t i = 0, n = files.size(); i < n; ++i) {
      Reader f = files.at(i);
      if (f.size() != 3) f.fail("[path, size, crc32]");
      CheckpointFile file{read_inner_path(f.at(0), false), f.at(1).i64(), 0};
      const int64_t crc = f.at(2).i64();
      if (file.size < 0) throw FieldError(f.path() + "[1]: the size must be 0 or more");
      if (crc < 0 || crc > int64_t{0xffffffff}) throw FieldError(f.path() + "[2]: a CRC-32 is 0 to 2^32 - 1");
      file.crc = static_cast<uint32_t>(crc);
      m.files.push_back(std::move(file));
    }
  }
}

void take_data_frame(std::string frame, CheckpointPart& m) {
  if (m.path.empty() || !m.error.empty())
    throw FieldError("CHECKPOINT_PART: a data frame belongs to a part of a file, not to a manifest or an error");
  if (!m.data.empty()) throw FieldError("CHECKPOINT_PART: data both in the body and in a frame");
  if (frame.empty()) throw FieldError("CHECKPOINT_PART: an empty data frame (a part without bytes has none)");
  if (static_cast<int64_t>(frame.size()) > kCheckpointPartBytes)
    throw FieldError("CHECKPOINT_PART: the data frame holds more than " + std::to_string(kCheckpointPartBytes) +
                     " bytes");
  m.data = std::move(frame);
}

}  // namespace codec
}  // namespace swept::protocol
