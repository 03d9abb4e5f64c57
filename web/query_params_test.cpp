// Tests of web/query_params.h: typed reading of query parameters and the
// 400 messages that name what is wrong (the API tests check them over HTTP).
#include <doctest/doctest.h>
#include <httplib.h>

#include <regex>

#include "web/query_params.h"

using swept::web::QueryParams;

namespace {

httplib::Request request(std::initializer_list<std::pair<std::string, std::string>> params) {
  httplib::Request req;
  for (const auto& [k, v] : params) req.params.emplace(k, v);
  return req;
}

}  // namespace

TEST_CASE("query params: an integer in range, the fallback when absent, a message naming the parameter otherwise") {
  auto req = request({{"limit", "50"}, {"offset", "x"}, {"points", "2"}});
  QueryParams q(req);
  CHECK(*q.int64("limit", 7, 1, 100) == 50);
  CHECK(*q.int64("absent", 7, 1, 5) == 7);  // the endpoint's own default, not range-checked
  CHECK(q.int64("offset", 0, 0, 10).status().message() == "offset must be an integer, got 'x'");
  CHECK(q.int64("points", 500, 3, 10000).status().message() == "points must be between 3 and 10000, got 2");
}

TEST_CASE("query params: unknown ones are refused by name, the token never is") {
  auto req = request({{"token", "T"}, {"limit", "1"}, {"bogus", "1"}});
  QueryParams q(req);
  CHECK(q.allow_only({"limit", "bogus"}).ok());
  CHECK(q.allow_only({"limit", "offset"}).message() ==
        "unknown query parameter 'bogus'; this endpoint takes limit, offset");
  CHECK(q.allow_only({}).message() == "unknown query parameter 'bogus'; this endpoint takes none");
}

TEST_CASE("query params: repeated comma lists, text, and the path's id") {
  auto req = request({{"state", "running,,queued"}, {"state", "failed"}, {"sort", "param:lr"}});
  const std::string path = "/api/sweeps/0";
  REQUIRE(std::regex_match(path, req.matches, std::regex(R"(/api/sweeps/(\d+))")));
  QueryParams q(req);
  CHECK(q.comma_list("state") == std::vector<std::string>{"running", "queued", "failed"});
  CHECK(q.comma_list("absent").empty());
  CHECK(q.text("sort") == "param:lr");
  CHECK(!q.text("order"));
  CHECK(swept::web::split_commas(",1,,2,") == std::vector<std::string>{"1", "2"});
  CHECK(q.path_id("sweep id").status().message() == "sweep id must be between 1 and 9223372036854775807, got 0");
}
