// Comparison of a secret (the API key) with what a client sent, in time that does not
// depend on where they differ or on the secret's length.
#pragma once
#include <cstddef>
#include <string_view>

namespace cpinfer {

// True when `given` equals `secret`. Every byte of `given` is compared (against the secret
// repeated cyclically when the lengths differ), with no early exit, so the time depends only
// on the length of `given`, which the client knows anyway; a length mismatch is folded into
// the same accumulator. An empty secret matches only an empty `given`.
inline bool constant_time_equal(std::string_view given, std::string_view secret) {
  const size_t n = given.size(), m = secret.size();
  volatile unsigned char diff = n != m ? 1 : 0;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char s = m ? static_cast<unsigned char>(secret[i % m]) : 0;
    diff = diff | (static_cast<unsigned char>(given[i]) ^ s);
  }
  return diff == 0;
}

}  // namespace cpinfer
