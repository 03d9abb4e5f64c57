// Test support: a JSON value written out as block-style YAML, the way a
// person writes a sweep file (mappings and sequences indented, numbers and
// booleans plain, strings double-quoted so that "1" stays a string). Used to
// run every JSON test vector through the YAML reader too.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace swept::sweeps::test {

inline void write_yaml(const nlohmann::json& v, int indent, std::string& out);

inline std::string yaml_scalar(const nlohmann::json& v) {
  // JSON's string escapes are valid in YAML's double-quoted style.
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline bool yaml_inline(const nlohmann::json& v) { return v.is_primitive() || v.empty(); }

inline void write_yaml(const nlohmann::json& v, int indent, std::string& out) {
  // Appends piece by piece (GCC 12 warns falsely on "literal" + string here).
  auto line = [&out, indent](const std::string& head, const nlohmann::json* inline_value) {
    out.append(static_cast<size_t>(indent), ' ');
    out.append(head);
    if (inline_value) {
      out.push_back(' ');
      out.append(inline_value->is_primitive() ? yaml_scalar(*inline_value) : inline_value->dump());
    }
    out.push_back('\n');
  };
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string key = yaml_scalar(nlohmann::json(it.key()));
      key.push_back(':');
      if (yaml_inline(it.value())) {
        line(key, &it.value());
      } else {
        line(key, nullptr);
        write_yaml(it.value(), indent + 2, out);
      }
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (yaml_inline(item)) {
        line("-", &item);
      } else {
        line("-", nullptr);
        write_yaml(item, indent + 2, out);
      }
    }
  } else {
    line(yaml_scalar(v), nullptr);
  }
}

inline std::string to_yaml(const nlohmann::json& v) {
  std::string out;
  if (!v.is_primitive() && !v.empty()) {
    write_yaml(v, 0, out);
  } else {
    out.append(v.is_primitive() ? yaml_scalar(v) : v.dump());
    out.push_back('\n');
  }
  return out;
}

}  // namespace swept::sweeps::test
