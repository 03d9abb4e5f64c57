// Tests of LiveFeed's bounded event buffer: the poller is not started; events
// are published directly, as the poller would after a change.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <thread>

#include "web/live.h"

namespace swept::web {
struct LiveFeedTestPeer {
  static void publish(LiveFeed& feed, int n) { feed.publish("{\"n\":" + std::to_string(n) + "}"); }
};
}  // namespace swept::web

using swept::web::LiveFeed;
using swept::web::LiveFeedTestPeer;

TEST_CASE("web: a reader gets the events after its cursor, each with its sequence number") {
  LiveFeed feed("/nonexistent/swept.db", 1000);
  uint64_t cursor = feed.latest();
  CHECK(cursor == 0);
  CHECK(feed.wait_events(&cursor, 1).empty());  // nothing yet: times out empty
  for (int i = 1; i <= 3; ++i) LiveFeedTestPeer::publish(feed, i);
  auto events = feed.wait_events(&cursor, 1000);
  REQUIRE(events.size() == 3);
  auto first = nlohmann::json::parse(events[0]);
  CHECK(first["seq"] == 1);
  CHECK(first["n"] == 1);
  CHECK(cursor == 3);
}

TEST_CASE("web: memory stays bounded: a reader that fell behind gets one resync") {
  LiveFeed feed("/nonexistent/swept.db", 1000);
  uint64_t slow = 0;
  uint64_t recent = 0;
  for (int i = 1; i <= 1000; ++i) LiveFeedTestPeer::publish(feed, i);
  recent = feed.latest() - 5;
  auto missed = feed.wait_events(&slow, 1000);
  REQUIRE(missed.size() == 1);
  auto resync = nlohmann::json::parse(missed[0]);
  CHECK(resync["resync"] == true);
  CHECK(resync["seq"] == 1000);
  CHECK(slow == 1000);
  auto tail = feed.wait_events(&recent, 1000);
  CHECK(tail.size() == 5);  // still kept: the last kKeptEvents are delivered as deltas
  uint64_t edge = 1000 - LiveFeed::kKeptEvents;
  CHECK(feed.wait_events(&edge, 1000).size() == LiveFeed::kKeptEvents);
}

TEST_CASE("web: stop wakes a waiting reader") {
  LiveFeed feed("/nonexistent/swept.db", 1000);
  feed.start();
  uint64_t cursor = 0;
  std::vector<std::string> got{"not called"};
  std::thread reader([&] { got = feed.wait_events(&cursor, 600000); });
  feed.stop();  // a reader stuck for the full timeout would hang the test
  reader.join();
  CHECK(got.empty());
  CHECK(feed.stopping());
}
