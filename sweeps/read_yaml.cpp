// read_yaml: YAML text -> Document, read as W&B reads a sweep file.
//
// yaml-cpp's event parser (not its node API) feeds a small tree of our own:
// every node keeps its line and column, aliases stay references until the
// tree is turned into JSON, and nothing is expanded while parsing. So the
// gates run in this order, each before anything can grow: size and UTF-8
// (text_gate), control characters, nesting depth (counted on the events, below
// yaml-cpp's own recursion guard), one document, and then the expansion into
// JSON, which stops at kMaxYamlValues values copied by aliases: a
// "billion laughs" file is refused after a hundred thousand copies, in
// milliseconds, not expanded.
//
// Scalars. W&B's client reads a sweep file with PyYAML (YAML 1.1) and its
// server reads numbers in strings; docs/sweep-format.md ("YAML") has the
// table. A quoted or block scalar is a string. A plain scalar is, in order:
// null (~, null, empty), a YAML 1.1 boolean (true/false, yes/no, on/off in
// three casings), a YAML 1.1 integer (decimal, 0x, 0b, 0-octal, with '_',
// sexagesimal), a decimal number in any spelling (1e-5, 3E6, .5, +2: YAML
// 1.1 calls 1e-5 a string, W&B's server reads it as a number), or a string.
// An integer beyond 64 bits and a number beyond a double are refused, with
// the JSON reader's words (checks.h), not read as strings or rounded.
// Every scalar whose spelling is not its value's JSON text is recorded as a
// Reading, for --explain.
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "sweeps/checks.h"
#include "sweeps/document.h"

namespace swept::sweeps {

using json = nlohmann::json;

namespace {

constexpr const char* kTagPrefix = "tag:yaml.org,2002:";

struct Node {
  enum class Kind { kNull, kScalar, kSequence, kMap, kAlias } kind = Kind::kNull;
  Position at;
  std::string tag;              // "?" plain, "!" quoted/block, or a full tag
  std::string text;             // scalars
  std::vector<size_t> children;  // sequence items; map: key, value, key, value, ...
  size_t target = 0;            // alias: the anchored node
  std::string anchor_name;      // for messages ("*defaults")
};

Position position_of(const YAML::Mark& m) { return {m.line + 1, m.column + 1}; }

// Thrown out of the event handler to stop yaml-cpp at once.
struct Stop {
  Problem problem;
};

// Builds the tree from yaml-cpp's events and keeps the path of the value
// being parsed, so that a syntax error names where it is.
class TreeBuilder : public YAML::EventHandler {
 public:
  std::vector<Node> nodes;
  std::vector<size_t> roots;  // one per document

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Node n;
    n.kind = Node::Kind::kNull;
    n.at = position_of(mark);
    add(std::move(n), anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Node n;
    n.kind = Node::Kind::kAlias;
    n.at = position_of(mark);
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) throw Stop{{path(), "expected an alias to a defined anchor, found an unknown one", n.at.line, n.at.column}};
    n.target = it->second;
    n.anchor_name = nodes[it->second].anchor_name;
    add(std::move(n), 0);
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor, const std::string& value) override {
    Node n;
    n.kind = Node::Kind::kScalar;
    n.at = position_of(mark);
    n.tag = tag;
    n.text = value;
    add(std::move(n), anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(Node::Kind::kSequence, mark, tag, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(Node::Kind::kMap, mark, tag, anchor);
  }
  void OnMapEnd() override { close(); }
  void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_anchor_name_ = name; }

  // The path of the value being parsed now (for syntax errors).
  std::string path() const {
    std::string p;
    for (size_t open_index : open_) {
      const Node& n = nodes[open_index];
      if (n.kind == Node::Kind::kSequence) {
        if (!n.children.empty()) p = index_path(p, n.children.size() - 1);
      } else if (!n.children.empty()) {
        // The last key read (a value follows it, or is being read).
        const size_t key = n.children[(n.children.size() - 1) & ~size_t{1}];
        if (nodes[key].kind == Node::Kind::kScalar) p = join(p, nodes[key].text);
      }
    }
    if (p.size() > 120) p = p.substr(0, 100) + "...";
    return p;
  }

 private:
  std::vector<size_t> open_;
  std::unordered_map<YAML::anchor_t, size_t> anchors_;
  std::string pending_anchor_name_;

  size_t add(Node n, YAML::anchor_t anchor) {
    if (nodes.size() >= static_cast<size_t>(kMaxYamlValues) * 4) {
      throw Stop{{path(), "expected at most " + std::to_string(kMaxYamlValues * 4) + " YAML values, found more", n.at.line,
                  n.at.column}};
    }
    if (anchor != 0) n.anchor_name = pending_anchor_name_;
    pending_anchor_name_.clear();
    const size_t index = nodes.size();
    nodes.push_back(std::move(n));
    if (anchor != 0) anchors_[anchor] = index;
    if (open_.empty()) roots.push_back(index);
    else nodes[open_.back()].children.push_back(index);
    return index;
  }
  void open(Node::Kind kind, const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor) {
    Node n;
    n.kind = kind;
    n.at = position_of(mark);
    n.tag = tag;
    if (static_cast<int>(open_.size()) >= kMaxJsonDepth) {
      throw Stop{{path(), "expected YAML nested at most " + std::to_string(kMaxJsonDepth) +
                              " levels deep (mappings and sequences), found deeper nesting",
                  n.at.line, n.at.column}};
    }
    open_.push_back(add(std::move(n), anchor));
  }
  void close() {
    if (!open_.empty()) open_.pop_back();
  }
};

// ---- scalars -----------------------------------------------------------------

bool all_of(std::string_view s, const char* chars) {
  return !s.empty() && s.find_first_not_of(chars) == std::string_view::npos;
}

// A YAML 1.1 integer as PyYAML's resolver and constructor read it, or nullopt.
std::optional<json> yaml11_integer(std::string_view text) {
  std::string s(text);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) negative = s[0] == '-', s.erase(0, 1);
  if (s.empty() || s[0] == '_') return std::nullopt;
  int base = 10;
  std::string digits;
  if (s.rfind("0b", 0) == 0 && all_of(std::string_view(s).substr(2), "01_")) {
    base = 2, digits = s.substr(2);
  } else if (s.rfind("0x", 0) == 0 && all_of(std::string_view(s).substr(2), "0123456789abcdefABCDEF_")) {
    base = 16, digits = s.substr(2);
  } else if (s.size() > 1 && s[0] == '0' && all_of(s, "01234567_")) {
    base = 8, digits = s.substr(1);
  } else if (all_of(s, "0123456789_") && (s == "0" || s[0] != '0')) {
    digits = s;
  } else if (s.find(':') != std::string::npos && s[0] != '0' && all_of(s, "0123456789_:")) {
    // Sexagesimal (base 60): 1:30 is 90. Each part after the first is 0..59.
    int64_t value = 0;
    std::stringstream parts(s);
    std::string part;
    bool first = true;
    while (std::getline(parts, part, ':')) {
      std::string clean;
      for (char c : part) if (c != '_') clean += c;
      if (clean.empty() || clean.size() > 18 || (!first && (clean.size() > 2 || std::stoi(clean) > 59))) return std::nullopt;
      if (value > (int64_t{1} << 55)) return std::nullopt;
      value = value * 60 + std::stoll(clean);
      first = false;
    }
    return json(negative ? -value : value);
  } else {
    return std::nullopt;
  }
  std::string clean;
  for (char c : digits) if (c != '_') clean += c;
  if (clean.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : clean) {
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10);
    if (value > (std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) {
      return json(negative ? -HUGE_VAL : HUGE_VAL);  // beyond 64 bits: refused by resolve_plain
    }
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  if (!negative) {
    if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return json(static_cast<int64_t>(value));
    return json(value);
  }
  if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return json(-static_cast<int64_t>(value));
  if (value == uint64_t{1} << 63) return json(std::numeric_limits<int64_t>::min());
  return json(-HUGE_VAL);  // below int64: as JSON's reader, no double stands in for it
}

struct Resolved {
  json value;
  std::string rule;  // non-empty: a Reading worth showing
  std::string error;  // non-empty: a problem
};

Resolved resolve_plain(const std::string& text) {
  static const std::set<std::string> kNull = {"", "~", "null", "Null", "NULL"};
  static const std::set<std::string> kTrue = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const std::set<std::string> kFalse = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  if (kNull.count(text)) return {json(nullptr), text == "null" || text.empty() ? "" : "YAML's null", ""};
  if (kTrue.count(text) || kFalse.count(text)) {
    const bool b = kTrue.count(text) > 0;
    return {json(b), text == "true" || text == "false" ? "" : "a YAML 1.1 boolean (as W&B's client reads it)", ""};
  }
  if (text == ".inf" || text == ".Inf" || text == ".INF" || text == "+.inf" || text == "-.inf" || text == ".nan" ||
      text == ".NaN" || text == ".NAN" || text == "-.Inf" || text == "+.Inf" || text == "-.INF" || text == "+.INF") {
    return {json(), "", "expected a finite number, found " + text + " (YAML's infinity or not-a-number)"};
  }
  if (auto i = yaml11_integer(text)) {
    if (i->is_number_float()) return {json(), "", integer_range_message(text)};
    return {*i, i->dump() == text ? "" : "a YAML 1.1 integer (0x hex, 0b binary, leading-0 octal, '_' or base 60)", ""};
  }
  // Floats: YAML 1.1's (a '.' required, '_' allowed) and any decimal spelling.
  std::string clean;
  for (char c : text) if (c != '_') clean += c;
  const bool underscores = clean.size() != text.size() && !text.empty() && text[0] != '_';
  if (auto d = decimal_number(underscores ? clean : text)) {
    const bool yaml11 = text.find('.') != std::string::npos &&
                        (text.find_first_of("eE") == std::string::npos ||
                         text.find_first_of("+-", text.find_first_of("eE")) != std::string::npos) &&
                        !(text[0] == '-' && text[1] == '.') && !(text[0] == '+' && text[1] == '.');
    std::string rule;
    if (!yaml11) rule = "a decimal number (YAML 1.1 reads it as a string; W&B's server reads it as a number)";
    else if (d->dump() != text) rule = "a YAML number";
    return {*d, rule, ""};
  }
  // 1e400 is a number to W&B's server (a float beyond a double, which JSON
  // refuses too), not the string "1e400".
  if (decimal_beyond_double(underscores ? clean : text)) return {json(), "", not_finite_message(text)};
  return {json(text), "", ""};
}

Resolved resolve_scalar(const Node& n) {
  if (n.tag == "?") return resolve_plain(n.text);
  if (n.tag == "!" || n.tag == std::string(kTagPrefix) + "str") return {json(n.text), "", ""};
  const std::string tag = n.tag.rfind(kTagPrefix, 0) == 0 ? n.tag.substr(std::string(kTagPrefix).size()) : "";
  if (tag == "int" || tag == "float" || tag == "bool" || tag == "null") {
    Resolved r = resolve_plain(n.text);
    const bool ok = (tag == "int" && r.value.is_number_integer()) || (tag == "float" && r.value.is_number()) ||
                    (tag == "bool" && r.value.is_boolean()) || (tag == "null" && r.value.is_null());
    if (!r.error.empty()) return r;
    if (!ok) return {json(), "", "expected a value that tag !!" + tag + " allows, found " + found(json(n.text))};
    if (tag == "float" && r.value.is_number_integer()) r.value = json(r.value.get<double>());
    r.rule = "tag !!" + tag;
    return r;
  }
  return {json(), "", "expected a plain, quoted or !!str/!!int/!!float/!!bool/!!null scalar, found the tag " +
                          found(json(n.tag)) + " (swept reads no other YAML tags)"};
}

// ---- the tree -> JSON ----------------------------------------------------------

class Converter {
 public:
  Converter(const std::vector<Node>& nodes, Document& doc) : nodes_(nodes), doc_(doc) {}

  // Converts nodes_[index] (reached at `at`, the alias's position when through
  // one) into `out`. Returns false when it stopped (a problem was recorded and
  // going on could not be bounded).
  bool convert(size_t index, const std::string& path, Position at, int depth, bool via_alias, json& out) {
    const Node* n = &nodes_[index];
    while (n->kind == Node::Kind::kAlias) {
      via_alias = true;
      index = n->target;
      n = &nodes_[index];
    }
    if (depth > kMaxJsonDepth) return stop(path, at, "expected YAML nested at most " + std::to_string(kMaxJsonDepth) +
                                                           " levels deep once aliases are expanded, found deeper");
    if (in_progress_.count(index)) {
      return stop(path, at, "expected an alias to a finished value, found *" + n->anchor_name +
                                " inside the value it names (a cycle)");
    }
    if (via_alias && ++copied_ > kMaxYamlValues) {
      return stop(path, at, "expected aliases to copy at most " + std::to_string(kMaxYamlValues) +
                                " values in all, found more (an alias bomb?); write the values out");
    }
    if (doc_.positions.size() < static_cast<size_t>(kMaxYamlValues)) doc_.positions.emplace(path, at);
    if ((n->kind == Node::Kind::kSequence || n->kind == Node::Kind::kMap) && !plain_collection_tag(*n)) {
      problem(path, at, "expected a plain mapping or sequence, found the tag " + found(json(n->tag)) +
                            " (swept reads no application-specific YAML tags, e.g. !!python/tuple)");
      out = nullptr;
      return true;
    }
    switch (n->kind) {
      case Node::Kind::kNull: out = nullptr; return true;
      case Node::Kind::kScalar: {
        Resolved r = resolve_scalar(*n);
        if (!r.error.empty()) {
          problem(path, at, r.error);
          out = nullptr;
          return true;
        }
        if (!r.rule.empty() && !via_alias && doc_.readings.size() < 10 * kMaxProblems) {
          doc_.readings.push_back({path, at.line, at.column, n->text, r.value.dump(), r.rule});
        }
        out = std::move(r.value);
        return true;
      }
      case Node::Kind::kSequence: {
        in_progress_.insert(index);
        out = json::array();
        for (size_t i = 0; i < n->children.size(); ++i) {
          json item;
          const Node& child = nodes_[n->children[i]];
          if (!convert(n->children[i], index_path(path, i), child.at, depth + 1, via_alias, item)) return false;
          out.push_back(std::move(item));
        }
        in_progress_.erase(index);
        return true;
      }
      case Node::Kind::kMap: {
        in_progress_.insert(index);
        const bool ok = convert_map(*n, path, depth, via_alias, out);
        in_progress_.erase(index);
        return ok;
      }
      case Node::Kind::kAlias: break;  // resolved above
    }
    return true;
  }

 private:
  const std::vector<Node>& nodes_;
  Document& doc_;
  std::set<size_t> in_progress_;
  int64_t copied_ = 0;

  void problem(const std::string& path, Position at, std::string message) {
    for (const Problem& p : doc_.problems) {
      if (p.path == path && p.message == message) return;
    }
    if (doc_.problems.size() < kMaxProblems) doc_.problems.push_back({path, std::move(message), at.line, at.column});
  }
  bool stop(const std::string& path, Position at, std::string message) {
    problem(path, at, std::move(message));
    return false;
  }

  // The key text of a mapping key node, or nullopt (with a problem).
  std::optional<std::string> key_text(size_t index, const std::string& path) {
    const Node* k = &nodes_[index];
    while (k->kind == Node::Kind::kAlias) k = &nodes_[k->target];
    if (k->kind == Node::Kind::kScalar) return k->text;
    if (k->kind == Node::Kind::kNull) return std::string("null");
    problem(path, nodes_[index].at, "expected a plain key (a name), found a " +
                                         std::string(k->kind == Node::Kind::kMap ? "mapping" : "sequence") + " used as a key");
    return std::nullopt;
  }

  static bool plain_collection_tag(const Node& n) {
    const std::string& t = n.tag;
    return t.empty() || t == "?" || t == "!" ||
           t == std::string(kTagPrefix) + (n.kind == Node::Kind::kMap ? "map" : "seq");
  }

  static bool is_merge_key(const Node& k) {
    return k.kind == Node::Kind::kScalar && ((k.tag == "?" && k.text == "<<") || k.tag == std::string(kTagPrefix) + "merge");
  }

  // A key written again in one mapping: PyYAML (W&B's client) keeps the
  // last value silently, and real W&B files repeat `values:`. So the last is
  // kept here too, and a warning (a problem under --strict) names both
  // lines. What was read of the earlier value goes, so that positions and
  // readings describe the value kept; a problem in it stays.
  // Warned once, where the mapping is written, not at each alias to it.
  void repeated_key(const std::string& here, int earlier_line, Position at, bool via_alias) {
    if (!via_alias && doc_.warnings.size() < kMaxProblems) {
      doc_.warnings.push_back({here, "expected each key once in a mapping, found it at lines " +
                                         std::to_string(earlier_line) + " and " + std::to_string(at.line) +
                                         "; the last value is kept, as W&B's client (PyYAML) keeps it: delete the "
                                         "one not meant",
                               at.line, at.column});
    }
    auto under = [&here](const std::string& p) {
      return p.rfind(here, 0) == 0 && (p.size() == here.size() || p[here.size()] == '.' || p[here.size()] == '[');
    };
    for (auto it = doc_.positions.lower_bound(here); it != doc_.positions.end() && it->first.rfind(here, 0) == 0;) {
      it = under(it->first) ? doc_.positions.erase(it) : std::next(it);
    }
    doc_.readings.erase(std::remove_if(doc_.readings.begin(), doc_.readings.end(),
                                       [&](const Reading& r) { return under(r.path); }),
                        doc_.readings.end());
  }

  bool convert_map(const Node& n, const std::string& path, int depth, bool via_alias, json& out) {
    out = json::object();
    std::map<std::string, int> key_lines;  // key -> the line it was last written on
    std::vector<size_t> merges;  // value nodes of << keys, in order
    for (size_t i = 0; i + 1 < n.children.size(); i += 2) {
      const Node& key = nodes_[n.children[i]];
      if (is_merge_key(key)) {
        merges.push_back(n.children[i + 1]);
        continue;
      }
      auto name = key_text(n.children[i], path);
      if (!name) continue;
      const std::string here = join(path, *name);
      if (auto [seen, first] = key_lines.emplace(*name, key.at.line); !first) {
        repeated_key(here, seen->second, key.at, via_alias);
        seen->second = key.at.line;
      }
      json value;
      const Node& value_node = nodes_[n.children[i + 1]];
      if (!convert(n.children[i + 1], here, value_node.at, depth + 1, via_alias, value)) return false;
      out[*name] = std::move(value);
    }
    // Merge keys: each merged mapping adds the keys not already present;
    // earlier mappings in a << list win over later ones (YAML's merge type).
    for (size_t m : merges) {
      std::vector<size_t> sources;
      const Node* v = &nodes_[m];
      while (v->kind == Node::Kind::kAlias) v = &nodes_[v->target];
      if (v->kind == Node::Kind::kSequence) sources = v->children;
      else sources.push_back(m);
      for (size_t s : sources) {
        json merged;
        const std::string here = join(path, "<<");
        const Node* src = &nodes_[s];
        while (src->kind == Node::Kind::kAlias) src = &nodes_[src->target];
        if (src->kind != Node::Kind::kMap) {
          problem(here, nodes_[s].at, "expected a mapping (or a list of mappings) to merge, found a " +
                                          std::string(src->kind == Node::Kind::kSequence ? "sequence" : "scalar"));
          continue;
        }
        // Converted at this mapping's path so its keys get their real paths;
        // one level deeper, so that a chain of merges is bounded like nesting.
        if (!convert(s, path, nodes_[s].at, depth + 1, true, merged)) return false;
        for (auto it = merged.begin(); it != merged.end(); ++it) {
          if (!out.contains(it.key())) out[it.key()] = it.value();
        }
      }
    }
    return true;
  }
};

// Offset of the first control character YAML does not allow, or npos.
size_t first_control_character(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = text[i];
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) return i;
  }
  return std::string_view::npos;
}

// Offset of a tab in a line's indentation (before its first other character)
// outside a block scalar, or npos. yaml-cpp reads some of these silently;
// PyYAML, and so W&B, refuses them.
size_t first_indentation_tab(std::string_view text) {
  size_t line_start = 0;
  int block_indent = -1;  // inside a | or > scalar: lines indented deeper belong to it
  while (line_start < text.size()) {
    size_t end = text.find('\n', line_start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(line_start, end - line_start);
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string_view::npos && line[first] != '#' && line[first] != '\r') {
      const size_t spaces = line.find_first_not_of(' ');
      if (block_indent >= 0 && static_cast<int>(spaces) > block_indent) {
        line_start = end + 1;
        continue;
      }
      block_indent = -1;
      if (line.substr(0, first).find('\t') != std::string_view::npos) return line_start + line.substr(0, first).find('\t');
      // A block scalar starts where a line ends in | or > (with indicators).
      std::string_view rest = line;
      while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\r')) rest.remove_suffix(1);
      const size_t bar = rest.find_last_of("|>");
      if (bar != std::string_view::npos && bar > 0 && (rest[bar - 1] == ' ' || rest[bar - 1] == ':') &&
          rest.find_first_not_of("+-0123456789", bar + 1) == std::string_view::npos) {
        block_indent = static_cast<int>(spaces);
      }
    }
    line_start = end + 1;
  }
  return std::string_view::npos;
}

std::string yaml_message(const std::string& msg) {
  // yaml-cpp's messages are short phrases ("illegal map value", "end of map
  // not found"): say what the reader expected around them.
  return "expected valid YAML, found an error: " + msg +
         " (check the indentation, the ':' after each key and that quotes are closed)";
}

}  // namespace

Document read_yaml(std::string_view text) {
  Document doc;
  if (auto p = text_gate(text)) {
    doc.problems.push_back(*p);
    return doc;
  }
  if (size_t bad = first_control_character(text); bad != std::string_view::npos) {
    const LineColumn lc = line_column(text, bad);
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
    doc.problems.push_back({"", "expected printable text, found the control character " + std::string(byte) +
                                    " (is this a binary file?)",
                            static_cast<int>(lc.line), static_cast<int>(lc.column)});
    return doc;
  }
  if (size_t tab = first_indentation_tab(text); tab != std::string_view::npos) {
    const LineColumn lc = line_column(text, tab);
    doc.problems.push_back({"", "expected spaces in indentation, found a tab (YAML does not allow tabs there)",
                            static_cast<int>(lc.line), static_cast<int>(lc.column)});
    return doc;
  }

  TreeBuilder builder;
  std::istringstream in{std::string(text)};
  try {
    YAML::Parser parser(in);
    if (!parser.HandleNextDocument(builder)) {
      doc.problems.push_back({"", "expected a YAML mapping (method: ..., parameters: ...), found no document (only comments?)"});
      return doc;
    }
    const size_t nodes_in_first = builder.nodes.size();
    if (parser.HandleNextDocument(builder)) {
      const Position at = nodes_in_first < builder.nodes.size() ? builder.nodes[nodes_in_first].at : Position{};
      doc.problems.push_back({"", "expected one YAML document, found a second one (after ---); put one sweep in a file",
                              at.line, at.column});
      return doc;
    }
  } catch (const Stop& s) {
    doc.problems.push_back(s.problem);
    return doc;
  } catch (const YAML::DeepRecursion& e) {
    doc.problems.push_back({builder.path(), "expected YAML nested at most " + std::to_string(kMaxJsonDepth) +
                                                " levels deep, found deeper nesting",
                            e.mark.line + 1, e.mark.column + 1});
    return doc;
  } catch (const YAML::Exception& e) {
    doc.problems.push_back({builder.path(), yaml_message(e.msg), e.mark.is_null() ? 0 : e.mark.line + 1,
                            e.mark.is_null() ? 0 : e.mark.column + 1});
    return doc;
  } catch (const std::exception& e) {
    doc.problems.push_back({builder.path(), yaml_message(e.what())});
    return doc;
  }
  if (builder.roots.empty()) {
    doc.problems.push_back({"", "expected a YAML mapping (method: ..., parameters: ...), found an empty document"});
    return doc;
  }
  Converter converter(builder.nodes, doc);
  const Node& root = builder.nodes[builder.roots[0]];
  if (!converter.convert(builder.roots[0], "", root.at, 1, false, doc.root)) return doc;
  return doc;
}

}  // namespace swept::sweeps
