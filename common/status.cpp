#include "common/status.h"

namespace swept {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kCorruption: return "corruption";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kMissingDependency: return "missing dependency";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace swept
