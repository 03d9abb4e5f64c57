// QueryParams: a request's query parameters (and the id its path captured),
// read as typed values with the error each endpoint answers for a bad one.
//
//   QueryParams q(req);
//   SWEPT_RETURN_IF_ERROR(q.allow_only({"limit"}));              // unknown ones: 400
//   SWEPT_ASSIGN_OR_RETURN(id, q.path_id("sweep id"));           // "/api/sweeps/(\d+)"
//   SWEPT_ASSIGN_OR_RETURN(limit, q.int64("limit", 2000, 1, 20000));
//
// Every failure is an InvalidArgument whose message names the parameter and
// what it must be; web/api_json.h turns it into the 400 answer of
// docs/api.md. `token` (the dashboard's secret, checked before routing) is
// never an unknown parameter.
//
// Thread safety: a QueryParams reads the request it was made from and
// holds a reference to it; use it on the request's thread, within the
// handler.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace swept::web {

class QueryParams {
 public:
  explicit QueryParams(const httplib::Request& req) : req_(req) {}

  // InvalidArgument naming the first parameter not in `allowed` and listing
  // those that are ("this endpoint takes none" for an empty set).
  Status allow_only(const std::set<std::string>& allowed) const;

  // The first group the path's pattern captured (the resource's id), an
  // integer in [1, INT64_MAX]; `what` names it in the error ("sweep id").
  Result<int64_t> path_id(const std::string& what) const;

  // Parameter `name` as an integer in [min, max]; `fallback` when absent
  // (not range-checked: the endpoint's own default).
  Result<int64_t> int64(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;

  // Parameter `name` as sent (its first value), or nullopt when absent.
  std::optional<std::string> text(const std::string& name) const;

  // Every value of a parameter that may repeat, each split at commas
  // (state=running,queued&state=failed gives three), empty parts dropped.
  std::vector<std::string> comma_list(const std::string& name) const;

  // A request header's value, "" when absent.
  std::string header(const std::string& name) const { return req_.get_header_value(name); }

 private:
  const httplib::Request& req_;
};

// `text` as an integer in [min, max]; InvalidArgument names it as `name`
// ("limit must be between 1 and 20000, got 0"). Pure.
Result<int64_t> parse_int(const std::string& text, const std::string& name, int64_t min, int64_t max);

// "1,,2," -> {"1", "2"}: the non-empty parts between commas. Pure.
std::vector<std::string> split_commas(const std::string& s);

}  // namespace swept::web
