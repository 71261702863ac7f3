// UTF-8 helpers for the tokenizer: validation with the offset of the first bad byte,
// code point decoding, and lossy repair (U+FFFD) for text streamed out of token bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cpinfer::utf8 {

inline constexpr size_t kValid = static_cast<size_t>(-1);

// Offset of the first byte that does not start a well-formed UTF-8 sequence (overlongs,
// surrogates and code points above U+10FFFF are ill-formed), or kValid.
size_t first_invalid(std::string_view s);

// Length of the well-formed sequence starting at s[0], or 0 if s[0..] is ill-formed or
// truncated. Sets *cp to the code point when the result is non-zero.
size_t decode(std::string_view s, char32_t* cp);

// Length of the "maximal subpart" at s[0] (Unicode ch. 3): the longest prefix of s that
// could start a well-formed sequence. At least 1 for a non-empty s. A sequence that is
// merely truncated by the end of s has maximal subpart == s.size().
size_t maximal_subpart(std::string_view s);

void append(std::string& out, char32_t cp);

// s with every ill-formed maximal subpart replaced by one U+FFFD (as Python's
// errors="replace" and Rust's from_utf8_lossy do).
std::string repair(std::string_view s);

// Length of the longest prefix of s that ends on a character boundary, treating the
// trailing bytes of a character that is still incomplete (and could become well-formed
// with more bytes) as not yet part of the prefix. Ill-formed bytes count as complete.
size_t complete_prefix(std::string_view s);

}  // namespace cpinfer::utf8
