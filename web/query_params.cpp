// Typed reading of a request's query parameters: see query_params.h.
#include "web/query_params.h"

#include <charconv>
#include <cstdint>

namespace swept::web {

Status QueryParams::allow_only(const std::set<std::string>& allowed) const {
  for (const auto& [key, value] : req_.params) {
    if (key == "token") continue;
    if (!allowed.count(key)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return Status::InvalidArgument("unknown query parameter '" + key + "'" +
                                     (list.empty() ? "; this endpoint takes none" : "; this endpoint takes " + list));
    }
  }
  return Status::Ok();
}

Result<int64_t> QueryParams::path_id(const std::string& what) const {
  return parse_int(req_.matches[1], what, 1, INT64_MAX);
}

Result<int64_t> QueryParams::int64(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  if (!req_.has_param(name)) return fallback;
  return parse_int(req_.get_param_value(name), name, min, max);
}

std::optional<std::string> QueryParams::text(const std::string& name) const {
  if (!req_.has_param(name)) return std::nullopt;
  return req_.get_param_value(name);
}

std::vector<std::string> QueryParams::comma_list(const std::string& name) const {
  std::vector<std::string> out;
  const size_t n = req_.get_param_value_count(name);
  for (size_t i = 0; i < n; ++i)
    for (auto& part : split_commas(req_.get_param_value(name, i))) out.push_back(std::move(part));
  return out;
}

Result<int64_t> parse_int(const std::string& text, const std::string& name, int64_t min, int64_t max) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    return Status::InvalidArgument(name + " must be an integer, got '" + text + "'");
  if (v < min || v > max)
    return Status::InvalidArgument(name + " must be between " + std::to_string(min) + " and " + std::to_string(max) +
                                   ", got " + text);
  return v;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

}  // namespace swept::web
