// The readers: sweep file text -> a JSON-shaped tree, before any key is
// checked. read_json and read_yaml share the text gates (size, UTF-8,
// nesting) and give the same tree for the same sweep, so parse.cpp runs one
// set of checks on both. Internal to sweeps/.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweeps/sweep.h"

namespace swept::sweeps {

struct Position {
  int line = 0, column = 0;  // 1-based; 0 = unknown
};

struct Document {
  nlohmann::json root;                       // valid only when problems is empty
  std::vector<Problem> problems;             // syntax and limits; the tree is not checked
  std::vector<Problem> warnings;             // what W&B's client reads silently (a YAML key written twice)
  bool syntax_error = false;                 // the text is not in the reader's syntax at all
  std::map<std::string, Position> positions;  // path (as checks.h writes it) -> where its value starts
  std::vector<Reading> readings;             // scalars read by a rule (YAML 1.1 forms, 1e-5, ...)
};

// The size and UTF-8 gates both readers run first; a problem or nullopt.
std::optional<Problem> text_gate(std::string_view text);

// JSON (RFC 8259) with duplicate keys, integers beyond 64 bits and numbers
// beyond a double refused.
Document read_json(std::string_view text);

// YAML: one document, a mapping at the top; anchors, aliases and merge keys
// (<<); a key written twice keeps its last value, with a warning; plain scalars resolved as W&B reads them
// (docs/sweep-format.md, "YAML"); aliases expanded up to kMaxYamlValues.
Document read_yaml(std::string_view text);

}  // namespace swept::sweeps
