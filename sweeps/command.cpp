// Command macros, as W&B's agent expands them.
//
// Two passes, in W&B's order: first every ${envvar:NAME} anywhere in an
// element is replaced by the variable's value; then an element that is exactly
// one macro (${args}, ${program}, ...) is replaced by its list of words. Values
// are written as Python's str() writes them (True, None, 0.001, 1e-05,
// {'a': 1}), because that is what W&B's agent passes and what scripts written
// for it parse. ${args_json} is Python's json.dumps text. The macros are those
// of W&B's agent (wandb_agent.py and sdk/launch/sweeps/utils.py); the list is
// in docs/sweep-format.md, "Command macros".
#include <charconv>
#include <cmath>
#include <cstdio>

#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace swept::sweeps {

using json = nlohmann::json;

namespace {

// Python's repr() of a float: the shortest round-trip digits, positional when
// the decimal exponent is in (-4, 16], scientific (1e-05, 1e+16) otherwise.
std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, result.ptr);  // "-1.2345e-05"
  std::string sign;
  if (sci[0] == '-') sign = "-", sci.erase(0, 1);
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  const int decimal_point = exponent + 1;     // value = 0.DIGITS * 10^decimal_point
  if (decimal_point > -4 && decimal_point <= 16) {
    std::string out;
    if (decimal_point <= 0) {
      out = "0." + std::string(static_cast<size_t>(-decimal_point), '0') + digits;
    } else if (static_cast<size_t>(decimal_point) >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(decimal_point) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(decimal_point)) + "." + digits.substr(static_cast<size_t>(decimal_point));
    }
    return sign + out;
  }
  std::string mantissa = digits.size() > 1 ? digits.substr(0, 1) + "." + digits.substr(1) : digits;
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + mantissa + exp;
}

// Python's repr() of a str: single quotes unless the text holds ' and no ".
std::string python_string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == quote) out += std::string("\\") + static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

std::string python_repr(const json& v);

// Python's str(): strings bare, everything else as repr().
std::string python_str(const json& v) { return v.is_string() ? v.get<std::string>() : python_repr(v); }

std::string python_repr(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "None";
    case json::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case json::value_t::number_integer: return std::to_string(v.get<int64_t>());
    case json::value_t::number_unsigned: return std::to_string(v.get<uint64_t>());
    case json::value_t::number_float: return python_float(v.get<double>());
    case json::value_t::string: return python_string_repr(v.get<std::string>());
    case json::value_t::array: {
      std::string out = "[";
      bool first = true;
      for (const auto& item : v) out += (first ? "" : ", ") + python_repr(item), first = false;
      return out + "]";
    }
    case json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        out += (first ? "" : ", ") + python_string_repr(it.key()) + ": " + python_repr(it.value());
        first = false;
      }
      return out + "}";
    }
    default: return "None";
  }
}

// Python's json.dumps string: ASCII only, \uXXXX (surrogate pairs above the BMP).
void dumps_string(const std::string& s, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    uint32_t cp = c;
    size_t length = 1;
    if (c >= 0xF0) cp = c & 0x07, length = 4;
    else if (c >= 0xE0) cp = c & 0x0F, length = 3;
    else if (c >= 0xC0) cp = c & 0x1F, length = 2;
    for (size_t k = 1; k < length && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    i += length;
    char buf[16];
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp >= 0x20 && cp < 0x7f) {
      out += static_cast<char>(cp);
    } else if (cp < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
    } else {
      const uint32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      out += buf;
    }
  }
  out += '"';
}

void dumps(const json& v, std::string& out) {
  switch (v.type()) {
    case json::value_t::null: out += "null"; return;
    case json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case json::value_t::number_float: {
      const double d = v.get<double>();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : python_float(d);
      return;
    }
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: out += python_repr(v); return;
    case json::value_t::string: dumps_string(v.get<std::string>(), out); return;
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ", ";
        dumps(item, out);
        first = false;
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        dumps_string(it.key(), out);
        out += ": ";
        dumps(it.value(), out);
        first = false;
      }
      out += '}';
      return;
    }
    default: out += "null"; return;
  }
}

}  // namespace

std::string python_text(const json& v) { return python_str(v); }

std::string args_json(const json& params) {
  std::string out;
  dumps(params, out);
  return out;
}

Result<std::vector<std::string>> build_command(const SweepSpec& spec, const json& params, const CommandContext& context) {
  std::vector<std::string> command = spec.command;
  if (command.empty()) {
    if (spec.program) command = {"${env}", "${interpreter}", "${program}", "${args}"};
    else command = {"swept-train", "${args}"};
  }

  std::vector<std::string> args, no_equals, no_hyphens, no_boolean_flags, append_hydra, override_hydra;
  if (params.is_object()) {
    for (auto it = params.begin(); it != params.end(); ++it) {
      const std::string flag = it.key() + "=" + python_str(it.value());
      args.push_back("--" + flag);
      no_equals.push_back("--" + it.key());
      no_equals.push_back(python_str(it.value()));
      no_hyphens.push_back(flag);
      append_hydra.push_back("+" + flag);
      override_hydra.push_back("++" + flag);
      if (it.value().is_boolean()) {
        if (it.value().get<bool>()) no_boolean_flags.push_back("--" + it.key());
      } else {
        no_boolean_flags.push_back("--" + flag);
      }
    }
  }

  std::vector<std::string> argv;
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string where = "command[" + std::to_string(i) + "]";
    // Pass 1: ${envvar:NAME} anywhere in the element.
    std::string element;
    const std::string& raw = command[i];
    size_t at = 0;
    while (true) {
      const size_t start = raw.find("${envvar:", at);
      if (start == std::string::npos) {
        element += raw.substr(at);
        break;
      }
      const size_t close = raw.find('}', start);
      if (close == std::string::npos) {
        return Status::InvalidArgument(where + ": expected ${envvar:NAME}, found an unclosed ${envvar: in \"" + raw + "\"");
      }
      const std::string name = raw.substr(start + 9, close - start - 9);
      std::optional<std::string> value;
      if (context.getenv) value = context.getenv(name);
      if (!value) {
        return Status::InvalidArgument(where + ": ${envvar:" + name + "} names an environment variable that is not set "
                                       "here; set " + name + " or remove it from the command");
      }
      element += raw.substr(at, start - at) + *value;
      at = close + 1;
    }
    // Pass 2: an element that is exactly one macro.
    if (element.size() < 4 || element.rfind("${", 0) != 0 || element.back() != '}' || element.find("${", 2) != std::string::npos) {
      argv.push_back(std::move(element));
      continue;
    }
    const std::string macro = element.substr(2, element.size() - 3);
    auto append = [&argv](const std::vector<std::string>& words) { argv.insert(argv.end(), words.begin(), words.end()); };
    if (macro == "env") argv.push_back(context.env);
    else if (macro == "interpreter") argv.push_back(context.interpreter);
    else if (macro == "program") {
      if (!spec.program) return Status::InvalidArgument(where + ": ${program} needs the sweep's program key, which is not set");
      argv.push_back(*spec.program);
    } else if (macro == "args") append(args);
    else if (macro == "args_no_equals") append(no_equals);
    else if (macro == "args_no_hyphens") append(no_hyphens);
    else if (macro == "args_no_boolean_flags") append(no_boolean_flags);
    else if (macro == "args_append_hydra") append(append_hydra);
    else if (macro == "args_override_hydra") append(override_hydra);
    else if (macro == "args_json") argv.push_back(args_json(params));
    else if (macro == "args_json_file") argv.push_back(context.args_json_file);
    // Any other ${...} expands to nothing, as W&B's agent does (parse_sweep
    // warns about it).
  }
  return argv;
}

}  // namespace swept::sweeps
