// The schema contract's shared pieces: see schema.h.
#include "store/schema.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "store/sqlite.h"

namespace swept::store {

Result<int> read_schema_version(Connection& db) {
  SWEPT_ASSIGN_OR_RETURN(st, db.prepare("SELECT value FROM meta WHERE key='schema_version'"));
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  return row ? std::atoi(st.text(0).c_str()) : 0;
}

std::vector<int> parse_gpu_list(const std::optional<std::string>& text) {
  std::vector<int> out;
  if (!text) return out;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& v : j)
    if (v.is_number_integer()) out.push_back(v.get<int>());
  return out;
}

}  // namespace swept::store
