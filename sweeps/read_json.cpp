// read_json: JSON text -> Document. Four gates before any key is read: size
// (kMaxFileBytes), UTF-8, nesting depth (kMaxJsonDepth, so no recursive code
// after it can blow the stack), and JSON syntax (nlohmann, with a callback
// that refuses duplicate keys, which nlohmann, like Python, would otherwise
// resolve silently). nlohmann's exceptions are caught here.
#include <cmath>
#include <cstdio>
#include <set>

#include "sweeps/checks.h"
#include "sweeps/document.h"

namespace swept::sweeps {

using json = nlohmann::json;

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
  auto fail = [&](std::string message, LineColumn lc = {0, 0}) {
    doc.problems.push_back({"", std::move(message), static_cast<int>(lc.line), static_cast<int>(lc.column)});
    return doc;
  };
  if (auto p = text_gate(text)) {
    doc.problems.push_back(*p);
    return doc;
  }
  if (size_t deep = first_too_deep_json(text, kMaxJsonDepth); deep != std::string_view::npos) {
    return fail("expected JSON nested at most " + std::to_string(kMaxJsonDepth) + " levels deep, found deeper nesting",
                line_column(text, deep));
  }

  Checker ck;  // duplicate keys and infinities, found while parsing
  struct Frame {
    bool array = false;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  auto current_path = [&frames]() {  // the value being parsed
    std::string p;
    for (const Frame& f : frames) p = f.array ? index_path(p, f.index - 1) : join(p, f.key);
    return p;
  };
  try {
    doc.root = json::parse(
        text.begin(), text.end(),
        [&](int, json::parse_event_t event, json& parsed) {
          switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
              if (!frames.empty() && frames.back().array) ++frames.back().index;
              frames.push_back(Frame{event == json::parse_event_t::array_start, 0, "", {}});
              break;
            case json::parse_event_t::object_end:
            case json::parse_event_t::array_end:
              if (!frames.empty()) frames.pop_back();
              break;
            case json::parse_event_t::key: {
              Frame& f = frames.back();
              f.key = parsed.get<std::string>();
              if (!f.keys.insert(f.key).second) {
                ck.add(current_path(), "expected each key once in an object, found a duplicate (JSON keeps only the last)");
              }
              break;
            }
            case json::parse_event_t::value:
              if (!frames.empty() && frames.back().array) ++frames.back().index;
              // JSON has no infinity, but nlohmann reads 1e999 as one.
              if (parsed.is_number_float() && !std::isfinite(parsed.get<double>())) ck.add(current_path(), kNotFinite);
              break;
          }
          return true;
        },
        /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::out_of_range& e) {
    // "number overflow parsing '1e999'": find the literal to say where it is.
    std::string what = e.what();
    const size_t open = what.find('\''), close = what.rfind('\'');
    if (open != std::string::npos && close > open) {
      const std::string literal = what.substr(open + 1, close - open - 1);
      const size_t at = text.find(literal);
      return fail("expected numbers within the range of a double, found " + literal,
                  line_column(text, at == std::string_view::npos ? 0 : at));
    }
    return fail("expected valid JSON, found " + what);
  } catch (const json::parse_error& e) {
    doc.syntax_error = true;
    // "[json.exception.parse_error.101] parse error at line 3, column 18: syntax error ...":
    // keep the words, move the position into the problem's fields.
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    LineColumn lc{0, 0};
    unsigned line = 0, column = 0;
    if (const size_t at = what.find(" at line "); at != std::string::npos &&
        std::sscanf(what.c_str() + at, " at line %u, column %u", &line, &column) == 2) {
      lc = {line, column};
      if (const size_t colon = what.find(": ", at); colon != std::string::npos) what = what.substr(colon + 2);
    }
    return fail("expected valid JSON, found a " + what, lc);
  } catch (const json::exception& e) {
    return fail(std::string("expected valid JSON, found ") + e.what());
  }
  doc.problems = std::move(ck.problems);
  return doc;
}

}  // namespace swept::sweeps
