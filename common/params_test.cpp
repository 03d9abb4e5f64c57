// Flat parameter names against hand-written cases.
#include <doctest/doctest.h>

#include "common/params.h"

using nlohmann::json;

TEST_CASE("common: parameters flatten to dotted names with their key paths, leaves only") {
  json p = {{"lr", 0.1}, {"opt", {{"name", "adam"}, {"betas", {0.9, 0.99}}}}, {"empty", json::object()},
            {"a.b", {{"c", 1}}}};
  auto flat = swept::flatten_params(p);
  REQUIRE(flat.size() == 5);
  // nlohmann::json objects iterate in key order.
  CHECK(flat[0].name == "a.b.c");
  CHECK(flat[0].path == std::vector<std::string>{"a.b", "c"});  // the path keeps a key with a dot whole
  CHECK(*flat[0].value == 1);
  CHECK(flat[1].name == "empty");
  CHECK(*flat[1].value == json::object());
  CHECK(flat[2].name == "lr");
  CHECK(flat[3].name == "opt.betas");
  CHECK(*flat[3].value == json({0.9, 0.99}));
  CHECK(flat[4].name == "opt.name");
  CHECK(flat[4].path == std::vector<std::string>{"opt", "name"});
  CHECK(swept::flatten_params(json(3)).empty());
  CHECK(swept::flatten_params(json::object()).empty());
}
