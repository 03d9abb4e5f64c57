// LineSplitter, MetricStepper, PendingLog: see output_reader.h.
#include "agent/output_reader.h"

namespace swept::agent {

void LineSplitter::feed(std::string_view bytes, const LineFn& on_line) {
  while (!bytes.empty()) {
    size_t newline = bytes.find('\n');
    std::string_view piece = bytes.substr(0, newline);
    bool line_ends = newline != std::string_view::npos;
    bytes = line_ends ? bytes.substr(newline + 1) : std::string_view();

    if (skipping_overlong_) {
      if (line_ends) skipping_overlong_ = false;
      continue;
    }
    if (partial_.size() + piece.size() > max_line_bytes_) {
      // Over the limit: deliver what fits, cut, and skip to the next newline.
      size_t room = max_line_bytes_ - partial_.size();
      partial_.append(piece.substr(0, room));
      on_line(partial_, /*overlong=*/true);
      partial_.clear();
      partial_.shrink_to_fit();  // a 1 MiB buffer per trial is not worth keeping
      skipping_overlong_ = !line_ends;
      continue;
    }
    if (!line_ends) {
      partial_.append(piece);
      continue;
    }
    if (partial_.empty()) {
      on_line(piece, false);  // the common case: no copy
    } else {
      partial_.append(piece);
      on_line(partial_, false);
      partial_.clear();
    }
  }
}

void LineSplitter::finish(const LineFn& on_line) {
  if (!partial_.empty()) on_line(partial_, false);
  partial_.clear();
  skipping_overlong_ = false;
}

void MetricStepper::apply(const MetricsRecord& record, std::vector<MetricPoint>& out) {
  if (record.step) step_ = *record.step;
  for (const auto& [name, value] : record.values) out.push_back(MetricPoint{step_, name, value});
  saw_final_ = saw_final_ || record.final;
  saw_diverged_ = saw_diverged_ || record.diverged;
}

void PendingLog::append(std::string_view text) {
  if (text.size() >= capacity_) {
    dropped_ += buffer_.size() + (text.size() - capacity_);
    buffer_.assign(text.substr(text.size() - capacity_));
    return;
  }
  buffer_.append(text);
  if (buffer_.size() > 2 * capacity_) {
    size_t excess = buffer_.size() - capacity_;
    dropped_ += excess;
    buffer_.erase(0, excess);
  }
}

PendingLog::Taken PendingLog::take() {
  Taken out;
  out.dropped = dropped_;
  if (buffer_.size() > capacity_) {
    out.dropped += buffer_.size() - capacity_;
    out.text = buffer_.substr(buffer_.size() - capacity_);
  } else {
    out.text = std::move(buffer_);
  }
  buffer_.clear();
  dropped_ = 0;
  return out;
}

}  // namespace swept::agent
