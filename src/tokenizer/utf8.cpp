#include "tokenizer/utf8.h"

namespace cpinfer::utf8 {
namespace {

// Bounds on the second byte of a sequence, from the lead byte (Unicode Table 3-7).
// Returns false for bytes that cannot lead a sequence.
bool lead_info(uint8_t b, size_t* len, uint8_t* lo, uint8_t* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (b < 0x80) {
    *len = 1;
    return true;
  }
  if (b < 0xC2) return false;
  if (b < 0xE0) {
    *len = 2;
    return true;
  }
  if (b < 0xF0) {
    *len = 3;
    if (b == 0xE0) *lo = 0xA0;  // no overlongs
    if (b == 0xED) *hi = 0x9F;  // no surrogates
    return true;
  }
  if (b < 0xF5) {
    *len = 4;
    if (b == 0xF0) *lo = 0x90;  // no overlongs
    if (b == 0xF4) *hi = 0x8F;  // nothing above U+10FFFF
    return true;
  }
  return false;
}

}  // namespace

size_t decode(std::string_view s, char32_t* cp) {
  if (s.empty()) return 0;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t len;
  uint8_t lo, hi;
  if (!lead_info(p[0], &len, &lo, &hi) || s.size() < len) return 0;
  if (len == 1) {
    *cp = p[0];
    return 1;
  }
  if (p[1] < lo || p[1] > hi) return 0;
  char32_t c = p[0] & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    c = (c << 6) | (p[i] & 0x3F);
  }
  *cp = c;
  return len;
}

size_t maximal_subpart(std::string_view s) {
  if (s.empty()) return 0;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t len;
  uint8_t lo, hi;
  if (!lead_info(p[0], &len, &lo, &hi)) return 1;
  size_t i = 1;
  for (; i < len && i < s.size(); ++i) {
    const uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (p[i] < l || p[i] > h) break;
  }
  return i;
}

size_t first_invalid(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  char32_t cp;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const size_t len = decode(s.substr(i), &cp);
    if (len == 0) return i;
    i += len;
  }
  return kValid;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string repair(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  char32_t cp;
  while (i < s.size()) {
    const size_t len = decode(s.substr(i), &cp);
    if (len > 0) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += maximal_subpart(s.substr(i));
    }
  }
  return out;
}

size_t complete_prefix(std::string_view s) {
  // Only the last (at most 3) bytes can belong to an incomplete character.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for its lead
    // s[n-back] is a lead (or ASCII / invalid) byte: is the tail an unfinished sequence?
    const std::string_view tail = s.substr(n - back);
    size_t len;
    uint8_t lo, hi;
    if (lead_info(b, &len, &lo, &hi) && len > back && maximal_subpart(tail) == back) {
      return n - back;
    }
    return n;
  }
  return n;
}

}  // namespace cpinfer::utf8
