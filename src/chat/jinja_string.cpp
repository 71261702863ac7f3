#include "chat/jinja_string.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace cpinfer::jinja {
namespace {

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

char32_t map_case(char32_t c, utf8proc_int32_t (*f)(utf8proc_int32_t)) {
  return static_cast<char32_t>(f(static_cast<utf8proc_int32_t>(c)));
}

bool is_cased(char32_t c) {
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

// Py_UNICODE_ISPRINTABLE: everything but controls, format, surrogates, private use,
// unassigned and separators other than the ASCII space.
bool is_printable(char32_t c) {
  if (c == ' ') return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

void append_hex(std::string& out, const char* prefix, uint32_t v, int digits) {
  out += fmt::format("{}{:0{}x}", prefix, v, digits);
}

template <typename F>
std::string map_code_points(std::string_view s, F f) {
  std::u32string cps = to_code_points(s);
  for (size_t i = 0; i < cps.size(); ++i) cps[i] = f(cps[i], i, cps);
  return to_utf8(cps);
}

}  // namespace

std::u32string to_code_points(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    char32_t cp;
    const size_t n = utf8::decode(s.substr(i), &cp);
    if (n == 0) {
      out.push_back(0xFFFD);
      i += utf8::maximal_subpart(s.substr(i));
    } else {
      out.push_back(cp);
      i += n;
    }
  }
  return out;
}

std::string to_utf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) utf8::append(out, c);
  return out;
}

int64_t code_point_count(std::string_view s) {
  int64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right) {
  const std::u32string cps = to_code_points(s);
  const std::u32string set = chars ? to_code_points(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_py_space(c);
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return to_utf8(std::u32string_view(cps).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    CPI_CHECK(!sep->empty(), "split(): empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  // Runs of whitespace separate words; leading and trailing whitespace gives no empty
  // words. After maxsplit splits the rest is one word that keeps its trailing space.
  const std::u32string cps = to_code_points(s);
  size_t i = 0;
  const size_t n = cps.size();
  while (true) {
    while (i < n && is_py_space(cps[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
      out.push_back(to_utf8(std::u32string_view(cps).substr(i)));
      break;
    }
    size_t j = i;
    while (j < n && !is_py_space(cps[j])) ++j;
    out.push_back(to_utf8(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count) {
  std::string out;
  if (old.empty()) {
    const std::u32string cps = to_code_points(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i < cps.size()) utf8::append(out, cps[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::string py_upper(std::string_view s) {
  // The one-to-many mappings of SpecialCasing.txt that Python applies and utf8proc's
  // one-to-one toupper does not: sharp s and the Latin ligatures.
  std::string out;
  for (char32_t c : to_code_points(s)) {
    switch (c) {
      case 0xDF:
        out += "SS";
        break;
      case 0xFB00:
        out += "FF";
        break;
      case 0xFB01:
        out += "FI";
        break;
      case 0xFB02:
        out += "FL";
        break;
      case 0xFB03:
        out += "FFI";
        break;
      case 0xFB04:
        out += "FFL";
        break;
      case 0xFB05:
      case 0xFB06:
        out += "ST";
        break;
      default:
        utf8::append(out, map_case(c, utf8proc_toupper));
    }
  }
  return out;
}

std::string py_lower(std::string_view s) {
  return map_code_points(
      s, [](char32_t c, size_t, const std::u32string&) { return map_case(c, utf8proc_tolower); });
}

std::string py_title(std::string_view s) {
  std::u32string cps = to_code_points(s);
  bool prev_cased = false;
  for (char32_t& c : cps) {
    const bool cased = is_cased(c);
    c = map_case(c, prev_cased ? utf8proc_tolower : utf8proc_totitle);
    prev_cased = cased;
  }
  return to_utf8(cps);
}

std::string py_capitalize(std::string_view s) {
  return map_code_points(s, [](char32_t c, size_t i, const std::u32string&) {
    return map_case(c, i == 0 ? utf8proc_totitle : utf8proc_tolower);
  });
}

bool py_is_lower(std::string_view s) {
  bool any = false;
  for (char32_t c : to_code_points(s)) {
    if (utf8proc_isupper(static_cast<utf8proc_int32_t>(c)) || category(c) == UTF8PROC_CATEGORY_LT)
      return false;
    any = any || utf8proc_islower(static_cast<utf8proc_int32_t>(c));
  }
  return any;
}

bool py_is_upper(std::string_view s) {
  bool any = false;
  for (char32_t c : to_code_points(s)) {
    if (utf8proc_islower(static_cast<utf8proc_int32_t>(c)) || category(c) == UTF8PROC_CATEGORY_LT)
      return false;
    any = any || utf8proc_isupper(static_cast<utf8proc_int32_t>(c));
  }
  return any;
}

std::string py_repr_string(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : to_code_points(s)) {
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      append_hex(out, "\\x", c, 2);
    } else if (c < 0x7F || is_printable(c)) {
      utf8::append(out, c);
    } else if (c <= 0xFF) {
      append_hex(out, "\\x", c, 2);
    } else if (c <= 0xFFFF) {
      append_hex(out, "\\u", c, 4);
    } else {
      append_hex(out, "\\U", c, 8);
    }
  }
  out += quote;
  return out;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  // Shortest round-trip digits and the exponent, then CPython's layout rule ('r' format):
  // positional when -4 < decimal point position <= 16, else scientific.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  size_t p = 0;
  if (sci[p] == '-') {
    out += '-';
    ++p;
  }
  const size_t epos = sci.find('e');
  std::string digits;
  for (size_t i = p; i < epos; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exp = std::atoi(sci.c_str() + epos + 1);
  const int decpt = exp + 1;
  const int nd = int(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out.append("0.").append(size_t(-decpt), '0').append(digits);
    } else if (decpt >= nd) {
      out.append(digits).append(size_t(decpt - nd), '0').append(".0");
    } else {
      out.append(digits, 0, size_t(decpt)).append(".").append(digits, size_t(decpt));
    }
  } else {
    out += digits[0];
    if (nd > 1) out.append(".").append(digits, 1);
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  }
  return out;
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  auto plain = [&](char32_t c) { utf8::append(out, c); };
  for (char32_t c : to_code_points(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c > 0xFFFF) {  // a surrogate pair, as Python writes it
        const char32_t v = c - 0x10000;
        append_hex(out, "\\u", 0xD800 + (v >> 10), 4);
        append_hex(out, "\\u", 0xDC00 + (v & 0x3FF), 4);
      } else {
        append_hex(out, "\\u", c, 4);
      }
    } else {
      plain(c);
    }
  }
  out += '"';
  return out;
}

}  // namespace cpinfer::jinja
