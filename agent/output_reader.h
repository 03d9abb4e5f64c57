// The reader of a trial's output: the pure parts, with no descriptors.
//
// LineSplitter cuts a byte stream into lines while holding at most
// `max_line_bytes` of an unfinished line: a trial printing megabytes without a
// newline costs bounded memory. A longer line is delivered once, cut to the
// limit and marked overlong (it is log, never metrics: docs/metrics.md), and
// the rest of it up to its newline is dropped here (it still reaches the
// trial's stdout.log, which is written before splitting).
// MetricStepper turns metric lines into (step, name, value) points, giving a
// line without `step` the last step seen (0 before any), per docs/metrics.md.
// PendingLog holds the log output not yet sent, keeping the newest `capacity`
// bytes and counting what it had to drop (the METRICS `log`/`log_dropped`
// fields of docs/protocol.md).
// Thread safety: none; each trial's supervisor owns its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/metrics_line.h"

namespace swept::agent {

class LineSplitter {
 public:
  // `line` excludes the newline; it is valid only during the call.
  using LineFn = std::function<void(std::string_view line, bool overlong)>;

  explicit LineSplitter(size_t max_line_bytes = kMaxMetricLineBytes) : max_line_bytes_(max_line_bytes) {}

  void feed(std::string_view bytes, const LineFn& on_line);
  // End of stream: delivers an unfinished last line, if any.
  void finish(const LineFn& on_line);

  size_t buffered_bytes() const { return partial_.size(); }

 private:
  size_t max_line_bytes_;
  std::string partial_;           // the current line so far, at most max_line_bytes_
  bool skipping_overlong_ = false;  // dropping the rest of a line already delivered cut
};

struct MetricPoint {
  int64_t step = 0;
  std::string name;
  double value = 0;
  bool operator==(const MetricPoint&) const = default;
};

class MetricStepper {
 public:
  // Appends the record's values to `out`, each with its step.
  void apply(const MetricsRecord& record, std::vector<MetricPoint>& out);
  int64_t current_step() const { return step_; }
  bool saw_final() const { return saw_final_; }
  bool saw_diverged() const { return saw_diverged_; }

 private:
  int64_t step_ = 0;
  bool saw_final_ = false;
  bool saw_diverged_ = false;
};

class PendingLog {
 public:
  explicit PendingLog(size_t capacity = 64 * 1024) : capacity_(capacity) {}
  void append(std::string_view text);
  bool empty() const { return buffer_.empty(); }

  struct Taken {
    std::string text;      // the newest `capacity` bytes appended since the last take()
    uint64_t dropped = 0;  // bytes appended since the last take() and not in `text`
  };
  Taken take();

 private:
  size_t capacity_;
  std::string buffer_;  // grows to 2x capacity, then drops its front
  uint64_t dropped_ = 0;
};

}  // namespace swept::agent
