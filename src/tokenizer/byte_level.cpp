#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace cpinfer::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> chr{};
  std::array<std::string, 256> sym;
  std::array<int16_t, 324> inv{};  // code point (< 324) -> byte, -1 if none

  Tables() {
    inv.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      chr[b] = printable ? b : next++;
      utf8::append(sym[b], chr[b]);
      inv[chr[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(uint8_t b) { return tables().chr[b]; }

const std::string& byte_to_symbol(uint8_t b) { return tables().sym[b]; }

std::optional<std::string> symbols_to_bytes(std::string_view token) {
  const Tables& t = tables();
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    char32_t cp;
    const size_t len = utf8::decode(token.substr(i), &cp);
    if (len == 0 || cp >= t.inv.size() || t.inv[cp] < 0) return std::nullopt;
    out += static_cast<char>(t.inv[cp]);
    i += len;
  }
  return out;
}

}  // namespace cpinfer::byte_level
