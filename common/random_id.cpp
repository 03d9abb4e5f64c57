// Random ids: see random_id.h.
#include "common/random_id.h"

#include <random>

namespace swept {

std::string random_hex(int hex_digits) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(static_cast<size_t>(hex_digits > 0 ? hex_digits : 0));
  for (int i = 0; i < hex_digits; ++i) s += kDigits[rng() & 15];
  return s;
}

}  // namespace swept
