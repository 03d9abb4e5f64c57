// Tests of the reconnect backoff: 1 s, doubling, capped at 32 s, reset on success.
#include "agent/backoff.h"

#include <doctest/doctest.h>

#include <vector>

using swept::agent::Backoff;

TEST_CASE("agent backoff: 1 s doubling up to 32 s, back to 1 s after a success") {
  Backoff b(1000, 32000);
  std::vector<int64_t> delays;
  for (int i = 0; i < 8; ++i) delays.push_back(b.next_delay_ms());
  CHECK(delays == std::vector<int64_t>{1000, 2000, 4000, 8000, 16000, 32000, 32000, 32000});
  b.reset();
  CHECK(b.next_delay_ms() == 1000);
  CHECK(b.next_delay_ms() == 2000);

  Backoff odd(50, 120);  // a maximum that is not a power-of-two multiple
  CHECK(odd.next_delay_ms() == 50);
  CHECK(odd.next_delay_ms() == 100);
  CHECK(odd.next_delay_ms() == 120);
  CHECK(odd.next_delay_ms() == 120);
}
