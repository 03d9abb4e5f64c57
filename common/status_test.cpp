#include "common/status.h"

#include <doctest/doctest.h>

TEST_CASE("status: ok, error, context") {
  swept::Status ok;
  CHECK(ok.ok());
  CHECK(ok.ToString() == "ok");
  auto s = swept::Status::InvalidArgument("parameters.lr.min: expected a number");
  CHECK_FALSE(s.ok());
  CHECK(s.ToString() == "invalid argument: parameters.lr.min: expected a number");
  CHECK(s.WithContext("sweep.json").message() == "sweep.json: parameters.lr.min: expected a number");
  swept::Result<int> r = 3;
  CHECK(r.ok());
  CHECK(*r == 3);
  swept::Result<int> e = swept::Status::NotFound("trial 7");
  CHECK_FALSE(e.ok());
  CHECK(e.status().code() == swept::StatusCode::kNotFound);
}
