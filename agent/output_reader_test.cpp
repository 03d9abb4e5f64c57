// Tests of the pure output reader: line splitting with a cap, steps, pending log.
#include "agent/output_reader.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace swept::agent;

namespace {
struct Line {
  std::string text;
  bool overlong;
};
struct Collect {
  std::vector<Line> lines;
  LineSplitter::LineFn fn() {
    return [this](std::string_view l, bool o) { lines.push_back({std::string(l), o}); };
  }
};
}  // namespace

TEST_CASE("agent output: line splitter: lines across chunk boundaries") {
  LineSplitter s(100);
  Collect c;
  s.feed("ab", c.fn());
  s.feed("c\nde", c.fn());
  s.feed("f\n\ngh", c.fn());
  REQUIRE(c.lines.size() == 3);
  CHECK(c.lines[0].text == "abc");
  CHECK(c.lines[1].text == "def");
  CHECK(c.lines[2].text == "");
  CHECK(s.buffered_bytes() == 2);
  s.finish(c.fn());
  REQUIRE(c.lines.size() == 4);
  CHECK(c.lines[3].text == "gh");
  CHECK_FALSE(c.lines[3].overlong);
}

TEST_CASE("agent output: line splitter: a line at the cap is whole, one byte more is cut once") {
  LineSplitter s(8);
  Collect c;
  s.feed("12345678\n", c.fn());
  REQUIRE(c.lines.size() == 1);
  CHECK_FALSE(c.lines[0].overlong);

  s.feed("1234", c.fn());
  s.feed("56789abc", c.fn());  // over the cap, no newline yet
  REQUIRE(c.lines.size() == 2);
  CHECK(c.lines[1].text == "12345678");
  CHECK(c.lines[1].overlong);
  s.feed("more and more", c.fn());  // still the same long line: dropped
  CHECK(c.lines.size() == 2);
  CHECK(s.buffered_bytes() == 0);
  s.feed("tail\nnext\n", c.fn());  // its end, then a normal line
  REQUIRE(c.lines.size() == 3);
  CHECK(c.lines[2].text == "next");
  CHECK_FALSE(c.lines[2].overlong);
}

TEST_CASE("agent output: line splitter: megabytes without a newline keep memory at the cap") {
  LineSplitter s;  // kMaxMetricLineBytes
  Collect c;
  std::string chunk(64 * 1024, 'x');
  size_t most_buffered = 0;
  for (int i = 0; i < 64; ++i) {  // 4 MiB
    s.feed(chunk, c.fn());
    most_buffered = std::max(most_buffered, s.buffered_bytes());
  }
  CHECK(most_buffered <= swept::kMaxMetricLineBytes);
  REQUIRE(c.lines.size() == 1);
  CHECK(c.lines[0].overlong);
  CHECK(c.lines[0].text.size() == swept::kMaxMetricLineBytes);
  s.feed("\n{\"step\": 1}\n", c.fn());
  REQUIRE(c.lines.size() == 2);
  CHECK(c.lines[1].text == "{\"step\": 1}");
}

TEST_CASE("agent output: metric stepper: lines without step take the last step seen, 0 before any") {
  MetricStepper st;
  std::vector<MetricPoint> out;
  st.apply(*swept::parse_metrics_line(R"({"loss": 1.5})"), out);
  st.apply(*swept::parse_metrics_line(R"({"step": 10, "loss": 1.0, "lr": 0.1})"), out);
  st.apply(*swept::parse_metrics_line(R"({"val_loss": 0.9})"), out);
  st.apply(*swept::parse_metrics_line(R"({"step": 20, "final": true, "diverged": true, "test_loss": 0.8})"), out);
  std::vector<MetricPoint> want = {
      {0, "loss", 1.5}, {10, "loss", 1.0}, {10, "lr", 0.1}, {10, "val_loss", 0.9}, {20, "test_loss", 0.8}};
  CHECK(out == want);
  CHECK(st.saw_final());
  CHECK(st.saw_diverged());
  CHECK(st.current_step() == 20);
}

TEST_CASE("agent output: pending log: keeps the newest bytes and counts the dropped ones") {
  PendingLog log(10);
  log.append("hello ");
  log.append("world");
  auto t = log.take();
  CHECK(t.text == "ello world");
  CHECK(t.dropped == 1);
  CHECK(log.empty());
  t = log.take();
  CHECK(t.text.empty());
  CHECK(t.dropped == 0);

  for (int i = 0; i < 100; ++i) log.append("abc");  // 300 bytes in small pieces
  t = log.take();
  CHECK(t.text.size() == 10);
  CHECK(t.dropped == 290);
  CHECK(t.text == "cabcabcabc");

  log.append(std::string(25, 'z'));  // one piece larger than the capacity
  t = log.take();
  CHECK(t.text == std::string(10, 'z'));
  CHECK(t.dropped == 15);
}
