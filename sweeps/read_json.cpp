// read_json: JSON text -> Document. Four gates before any key is read: size
// (kMaxFileBytes), UTF-8, nesting depth (kMaxJsonDepth, so no recursive code
// after it can blow the stack), and JSON syntax: nlohmann's SAX parser feeds
// the tree below, which refuses duplicate keys (nlohmann, like Python, would
// keep the last silently) and numbers that no 64-bit integer or finite
// double holds, naming their field in the YAML reader's words. SAX, not
// nlohmann's DOM parser, because only SAX hands over a number's spelling:
// 99999999999999999999 arrives as the double 1e20, and only its spelling
// says it was an integer too large. Nothing here throws.
#include <algorithm>
#include <cstdio>
#include <set>

#include "sweeps/checks.h"
#include "sweeps/document.h"

namespace swept::sweeps {

using json = nlohmann::json;

namespace {

// Builds the tree from nlohmann's SAX events, keeping the path of the value
// being read so that each problem names its field.
class TreeReader : public nlohmann::json_sax<json> {
 public:
  json root;
  Checker ck;                     // duplicate keys and integers beyond 64 bits, found while parsing
  std::string error;              // the parse error's text ("" when none)
  int error_id = 0;               // nlohmann's id: 101 syntax, 406 number overflow, ...
  std::string error_path, error_token;
  size_t error_offset = 0;        // bytes read when the error was found (after its token)

  bool null() override { return place(nullptr); }
  bool boolean(bool b) override { return place(b); }
  bool number_integer(number_integer_t i) override { return place(i); }
  bool number_unsigned(number_unsigned_t u) override { return place(u); }
  bool number_float(number_float_t d, const string_t& spelling) override {
    // An integer spelling reaches here only when no 64-bit integer holds it.
    if (spelling.find_first_of(".eE") == std::string::npos) ck.add(path(), integer_range_message(spelling));
    return place(d);
  }
  bool string(string_t& s) override { return place(std::move(s)); }
  bool binary(binary_t&) override { return false; }  // JSON text has none
  bool start_object(std::size_t) override { return open(json::object(), false); }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second) ck.add(path(), "expected each key once in an object, found a duplicate (JSON keeps only the last)");
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::array(), true); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t offset, const std::string& token, const json::exception& e) override {
    error = e.what();
    error_id = e.id;
    error_path = path();
    error_token = token;
    error_offset = offset;
    return false;
  }

 private:
  struct Frame {
    json* value;  // the open object or array (its address is stable while it is open)
    bool array;
    std::string key;  // object: the key whose value is being read
    std::set<std::string> keys;
  };
  std::vector<Frame> frames_;

  // The path of the value being read now.
  std::string path() const {
    // An outer array's item being read is its last; the innermost one's is the next.
    std::string p;
    for (size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      p = f.array ? index_path(p, f.value->size() - (i + 1 < frames_.size() ? 1 : 0)) : join(p, f.key);
    }
    return p;
  }
  json* put(json v) {
    if (frames_.empty()) {
      root = std::move(v);
      return &root;
    }
    Frame& f = frames_.back();
    if (f.array) {
      f.value->push_back(std::move(v));
      return &f.value->back();
    }
    json& slot = (*f.value)[f.key];
    slot = std::move(v);  // a duplicate key: the last value, as nlohmann keeps it (refused above anyway)
    return &slot;
  }
  bool place(json v) {
    put(std::move(v));
    return true;
  }
  bool open(json empty, bool array) {
    json* at = put(std::move(empty));
    frames_.push_back(Frame{at, array, "", {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }
};

}  // namespace

std::optional<Problem> text_gate(std::string_view text) {
  if (text.size() > kMaxFileBytes) {
    return Problem{"", "expected a sweep file of at most " + std::to_string(kMaxFileBytes) +
                           " bytes (1 MiB), found a larger one; is this really a sweep file?"};
  }
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Problem{"", "expected a sweep (method: ..., parameters: ...), found an empty file"};
  }
  if (size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
    const LineColumn lc = line_column(text, bad);
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
    return Problem{"",
                   "expected UTF-8 text, found the byte " + std::string(byte) + "; save the file as UTF-8 (is it a sweep file?)",
                   static_cast<int>(lc.line), static_cast<int>(lc.column)};
  }
  return std::nullopt;
}

Document read_json(std::string_view text) {
  Document doc;
  auto fail_at = [&](std::string path, std::string message, LineColumn lc) {
    doc.problems.push_back({std::move(path), std::move(message), static_cast<int>(lc.line), static_cast<int>(lc.column)});
    return doc;
  };
  auto fail = [&](std::string message, LineColumn lc = {0, 0}) { return fail_at("", std::move(message), lc); };
  if (auto p = text_gate(text)) {
    doc.problems.push_back(*p);
    return doc;
  }
  if (size_t deep = first_too_deep_json(text, kMaxJsonDepth); deep != std::string_view::npos) {
    return fail("expected JSON nested at most " + std::to_string(kMaxJsonDepth) + " levels deep, found deeper nesting",
                line_column(text, deep));
  }

  TreeReader reader;
  bool parsed = false;
  try {
    parsed = json::sax_parse(text.begin(), text.end(), &reader, json::input_format_t::json, /*strict=*/true,
                             /*ignore_comments=*/false);
  } catch (const json::exception& e) {  // parse errors come to parse_error; this is a safety net
    return fail(std::string("expected valid JSON, found ") + e.what());
  }
  if (!parsed) {
    if (reader.error_id == 406) {  // out_of_range: a number beyond a double
      return fail_at(reader.error_path, not_finite_message(reader.error_token),
                     line_column(text, reader.error_offset - std::min(reader.error_offset, reader.error_token.size())));
    }
    doc.syntax_error = true;
    // "[json.exception.parse_error.101] parse error at line 3, column 18: syntax error ...":
    // keep the words, move the position into the problem's fields.
    std::string what = reader.error.empty() ? "syntax error" : reader.error;
    if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    LineColumn lc{0, 0};
    unsigned line = 0, column = 0;
    if (const size_t at = what.find(" at line "); at != std::string::npos &&
        std::sscanf(what.c_str() + at, " at line %u, column %u", &line, &column) == 2) {
      lc = {line, column};
      if (const size_t colon = what.find(": ", at); colon != std::string::npos) what = what.substr(colon + 2);
    }
    return fail("expected valid JSON, found a " + what, lc);
  }
  doc.root = std::move(reader.root);
  doc.problems = std::move(reader.ck.problems);
  return doc;
}

}  // namespace swept::sweeps
