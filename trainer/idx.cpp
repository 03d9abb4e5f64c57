// IDX parsing with every size checked before it is used (see idx.h).
#include "trainer/idx.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace swept::trainer {

Result<IdxArray> parse_idx(const std::string& name, const std::vector<uint8_t>& bytes, int expected_rank) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(name + ": not a valid IDX file: " + what +
                                   " (re-download it with scripts/fetch-mnist.sh)");
  };
  if (bytes.size() < 4) return bad("it is " + std::to_string(bytes.size()) + " bytes long, shorter than the 4-byte magic number");
  if (bytes[0] != 0 || bytes[1] != 0) {
    if (bytes[0] == 0x1f && bytes[1] == 0x8b) return bad("it is gzip-compressed; decompress it first (gunzip)");
    return bad("its magic number does not start with two zero bytes");
  }
  if (bytes[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02x", bytes[2]);
    return bad(std::string("element type ") + type + " is not 0x08 (unsigned byte)");
  }
  const int rank = bytes[3];
  if (rank != expected_rank)
    return bad("it has " + std::to_string(rank) + " dimensions, expected " + std::to_string(expected_rank));
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (bytes.size() < header) return bad("truncated inside its header");
  IdxArray out;
  uint64_t elements = 1;
  for (int i = 0; i < rank; ++i) {
    const uint8_t* p = bytes.data() + 4 + 4 * i;
    const uint32_t d = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    if (d == 0) return bad("dimension " + std::to_string(i) + " is 0");
    elements *= d;
    if (elements > (uint64_t{1} << 40)) return bad("its dimensions multiply to more than 2^40 elements");
    out.dims.push_back(d);
  }
  const uint64_t expected = header + elements;
  if (bytes.size() < expected)
    return bad("truncated: its header announces " + std::to_string(expected) + " bytes, the file has " +
               std::to_string(bytes.size()));
  if (bytes.size() > expected)
    return bad(std::to_string(bytes.size() - expected) + " bytes follow the " + std::to_string(elements) +
               " elements its header announces");
  out.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return out;
}

Result<IdxArray> read_idx(const std::string& path, int expected_rank) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return Status::InvalidArgument(path + ": cannot open (" + std::strerror(err) +
                                   "); point --data (or SWEPT_DATA_DIR) at a folder holding the four MNIST "
                                   "IDX files, or fetch them into it: swept-fetch-mnist DIR (installed with "
                                   "swept) or scripts/fetch-mnist.sh DIR (in swept's source)");
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::InvalidArgument(path + ": read error");
  return parse_idx(path, bytes, expected_rank);
}

}  // namespace swept::trainer
