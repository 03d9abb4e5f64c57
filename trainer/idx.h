// Reader of the IDX format of MNIST and Fashion-MNIST (LeCun et al.):
//   bytes 0-1: 0x00 0x00; byte 2: element type (0x08 = unsigned byte, the
//   only type these data sets use); byte 3: number of dimensions d;
//   then d big-endian uint32 sizes; then the elements, row-major.
// Every check failure is an InvalidArgument Status whose message names the
// file and what is wrong with it (bad magic, wrong rank, truncated, trailing
// bytes), so the trainer can exit 2 with it. Thread-safe (pure).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace swept::trainer {

struct IdxArray {
  std::vector<uint32_t> dims;  // d sizes, outermost first
  std::vector<uint8_t> data;   // product(dims) bytes
};

// Reads `path`, which must hold unsigned bytes in exactly `expected_rank`
// dimensions, and exactly as many bytes as its header announces.
Result<IdxArray> read_idx(const std::string& path, int expected_rank);

// Parses IDX bytes already in memory; `name` is used in error messages.
Result<IdxArray> parse_idx(const std::string& name, const std::vector<uint8_t>& bytes, int expected_rank);

}  // namespace swept::trainer
