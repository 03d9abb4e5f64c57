// Random ids for the protocol: session nonces, request ids, client routing
// ids. Not for secrets (a per-thread Mersenne Twister seeded from
// std::random_device). Thread-safe.
#pragma once

#include <string>

namespace swept {

// A fresh random string of `hex_digits` lowercase hex digits.
std::string random_hex(int hex_digits);

}  // namespace swept
