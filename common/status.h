// Status: the one error type of swept (after LevelDB's Status).
//
// A Status is either ok() or carries a code and a message that says what
// happened and what to do next ("parameters.lr.min: expected a number, found
// \"abc\""). Functions that can fail return Status, or Result<T> when they also
// produce a value; call sites stay flat: `if (!s.ok()) return s;`.
// Exceptions never cross a module's boundary: code that calls a throwing
// library catches at its edge and returns a Status.
// Thread safety: Status and Result are values; share them like any value.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace swept {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (bad file, bad flag)
  kNotFound,         // a named thing does not exist
  kIoError,          // the operating system said no
  kCorruption,       // stored data failed a check (checksum, magic, size)
  kUnavailable,      // a peer is unreachable or timed out; retrying may help
  kFailedPrecondition,  // the request is valid but not in this state
  kResourceExhausted,   // out of memory, budget or capacity
  kMissingDependency,   // a library or program needed at run time is not installed
  kInternal,         // a bug in swept: report it
};

const char* status_code_name(StatusCode code);

class Status {
 public:
  Status() = default;  // ok
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status MissingDependency(std::string m) { return {StatusCode::kMissingDependency, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>", or "ok".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(const std::string& context) const;

 private:
  Status(StatusCode c, std::string m) : code_(c), message_(std::move(m)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T>: a T, or the Status saying why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: must not be ok
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace swept

#define SWEPT_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::swept::Status _swept_s = (expr);         \
    if (!_swept_s.ok()) return _swept_s;       \
  } while (0)

// Binds `lhs` to the value of a Result, or returns its Status: keeps call
// sites flat (`SWEPT_ASSIGN_OR_RETURN(row, st.step());`).
#define SWEPT_ASSIGN_OR_RETURN(lhs, expr)                \
  auto lhs##_result = (expr);                            \
  if (!lhs##_result.ok()) return lhs##_result.status(); \
  auto& lhs = *lhs##_result
