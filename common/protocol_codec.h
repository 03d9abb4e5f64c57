// The codec's shared parts (private to common/protocol*.cpp): the list of
// message kinds, the per-kind body writer and reader each part defines, and
// `Reader`, which knows the path of the value it reads
// ("REGISTER.gpus[1].uuid") so that every refusal names the offending field.
//
// Readers throw FieldError; decode() (protocol.cpp) catches it, so nothing
// escapes the codec. The parts: protocol_agent.cpp (agents <-> scheduler),
// protocol_client.cpp (clients <-> scheduler), protocol_rows.cpp (the query
// rows those replies carry); protocol.cpp frames and dispatches.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "common/protocol.h"

namespace swept::protocol::codec {

using nlohmann::json;

// Every message kind: its type and its name on the wire (docs/protocol.md),
// once. X(Type, "NAME") for each, in the order of the Message variant.
#define SWEPT_PROTOCOL_KINDS(X)          \
  X(Register, "REGISTER")                \
  X(RegisterAck, "REGISTER_ACK")         \
  X(RegisterReject, "REGISTER_REJECT")   \
  X(Heartbeat, "HEARTBEAT")              \
  X(StartTrial, "START_TRIAL")           \
  X(StopTrial, "STOP_TRIAL")             \
  X(TrialStarted, "TRIAL_STARTED")       \
  X(Metrics, "METRICS")                  \
  X(TrialExited, "TRIAL_EXITED")         \
  X(ExitAck, "EXIT_ACK")                 \
  X(Disconnect, "DISCONNECT")            \
  X(Error, "ERROR")                      \
  X(Submit, "SUBMIT")                    \
  X(Submitted, "SUBMITTED")              \
  X(Cancel, "CANCEL")                    \
  X(Retry, "RETRY")                      \
  X(Done, "DONE")                        \
  X(QuerySweeps, "QUERY_SWEEPS")         \
  X(Sweeps, "SWEEPS")                    \
  X(QueryTrials, "QUERY_TRIALS")         \
  X(Trials, "TRIALS")                    \
  X(QueryAgents, "QUERY_AGENTS")         \
  X(Agents, "AGENTS")                    \
  X(ReleaseAgent, "RELEASE_AGENT")       \
  X(CheckpointPull, "CHECKPOINT_PULL")   \
  X(CheckpointPart, "CHECKPOINT_PART")

struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A JSON value and the path that leads to it.
class Reader {
 public:
  Reader(const json& v, std::string path) : v_(v), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& expected) const {
    throw FieldError(path_ + ": expected " + expected + ", found " + describe(v_));
  }
  const json& raw() const { return v_; }
  const std::string& path() const { return path_; }

  Reader field(const char* name) const {
    if (!v_.is_object()) fail("an object");
    auto it = v_.find(name);
    if (it == v_.end()) throw FieldError(path_ + "." + name + ": missing");
    return Reader(*it, path_ + "." + name);
  }
  bool has(const char* name) const {
    if (!v_.is_object()) fail("an object");
    auto it = v_.find(name);
    return it != v_.end() && !it->is_null();
  }
  Reader at(size_t i) const { return Reader(v_[i], path_ + "[" + std::to_string(i) + "]"); }
  size_t size() const {
    if (!v_.is_array()) fail("an array");
    return v_.size();
  }

  int64_t i64() const {
    if (v_.is_number_integer()) {
      if (v_.is_number_unsigned() && v_.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) fail("an integer");
      return v_.get<int64_t>();
    }
    if (v_.is_number_float()) {
      double d = v_.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
    }
    fail("an integer");
  }
  int i32() const {
    int64_t x = i64();
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) fail("a 32-bit integer");
    return static_cast<int>(x);
  }
  double f64() const {
    if (!v_.is_number()) fail("a number");
    double d = v_.get<double>();
    if (!std::isfinite(d)) fail("a finite number");
    return d;
  }
  bool boolean() const {
    if (!v_.is_boolean()) fail("true or false");
    return v_.get<bool>();
  }
  std::string str() const {
    if (!v_.is_string()) fail("a string");
    return v_.get<std::string>();
  }
  std::optional<int64_t> opt_i64() const { return v_.is_null() ? std::nullopt : std::optional<int64_t>(i64()); }
  std::optional<int> opt_i32() const { return v_.is_null() ? std::nullopt : std::optional<int>(i32()); }
  std::optional<double> opt_f64() const { return v_.is_null() ? std::nullopt : std::optional<double>(f64()); }
  std::optional<std::string> opt_str() const { return v_.is_null() ? std::nullopt : std::optional<std::string>(str()); }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    for (size_t i = 0, n = size(); i < n; ++i) out.push_back(at(i).str());
    return out;
  }
  std::vector<int> ints() const {
    std::vector<int> out;
    for (size_t i = 0, n = size(); i < n; ++i) out.push_back(at(i).i32());
    return out;
  }
  std::map<std::string, std::string> string_map() const {
    if (!v_.is_object()) fail("an object of strings");
    std::map<std::string, std::string> out;
    for (auto it = v_.begin(); it != v_.end(); ++it) out[it.key()] = Reader(it.value(), path_ + "." + it.key()).str();
    return out;
  }
  json object() const {
    if (!v_.is_object()) fail("an object");
    return v_;
  }

 private:
  static std::string describe(const json& v) {
    switch (v.type()) {
      case json::value_t::null: return "null";
      case json::value_t::boolean: return "a boolean";
      case json::value_t::string: return "a string";
      case json::value_t::array: return "an array";
      case json::value_t::object: return "an object";
      case json::value_t::number_float: {
        // JSON has one number type: 2^70 is read as a double, but it is a
        // whole number, not a fraction.
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d)) return "an integer too large (at most 2^53 in magnitude)";
        return "a fractional number";
      }
      case json::value_t::number_unsigned:
        if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
          return "an integer too large (at most 2^63 - 1)";
        return "an integer";
      case json::value_t::number_integer: return "an integer";
      default: return "something else";
    }
  }
  const json& v_;
  std::string path_;
};

// Optional fields: the default when absent or null.
inline int64_t opt_field_i64(const Reader& r, const char* name, int64_t def) {
  return r.has(name) ? r.field(name).i64() : def;
}
inline std::string opt_field_str(const Reader& r, const char* name) {
  return r.has(name) ? r.field(name).str() : std::string();
}

// An optional value as JSON: null when absent.
template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// A state spelled by its name (common/states.h); any other text is refused.
template <typename Named>
auto read_state(const Reader& r, Named named, const char* what) {
  auto s = named(r.str());
  if (!s) r.fail(what);
  return *s;
}

// Each kind's body: body() writes it (never fails), read() fills a message
// from it or throws FieldError. Defined in the part that owns the kind.
#define SWEPT_DECLARE_BODY(Type, name) \
  json body(const Type& m);            \
  void read(const Reader& r, Type& m);
SWEPT_PROTOCOL_KINDS(SWEPT_DECLARE_BODY)
#undef SWEPT_DECLARE_BODY

// A CHECKPOINT_PART's fourth frame, its raw bytes, into `m` (read from the
// body first); throws FieldError for a frame the part cannot have
// (protocol_checkpoint.cpp).
void take_data_frame(std::string frame, CheckpointPart& m);

// Pieces more than one part writes or reads (protocol_rows.cpp).
json gpu_json(const GpuInfo& g);
GpuInfo read_gpu(const Reader& r);
SweepRow read_sweep_row(const Reader& r);
TrialRow read_trial_row(const Reader& r);
AgentRow read_agent_row(const Reader& r);

}  // namespace swept::protocol::codec
