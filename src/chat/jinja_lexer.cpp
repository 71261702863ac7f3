#include "chat/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "chat/jinja_string.h"
#include "tokenizer/utf8.h"

namespace cpinfer::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
// The end of the whitespace (Python's \s: str.isspace()) that starts at s[p].
size_t space_end(const std::string& s, size_t p) {
  while (p < s.size()) {
    const auto b = static_cast<unsigned char>(s[p]);
    if (b < 0x80) {
      if (!is_py_space(b)) break;
      ++p;
      continue;
    }
    char32_t cp;
    const size_t n = utf8::decode(std::string_view(s).substr(p), &cp);
    if (n == 0 || !is_py_space(cp)) break;
    p += n;
  }
  return p;
}

bool all_py_space(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t c : to_code_points(s))
    if (!is_py_space(c)) return false;
  return true;
}

std::string rstrip_py_space(std::string_view s) { return py_strip(s, std::nullopt, false, true); }

// Python's source normalisation: \r\n and \r become \n, one trailing newline is dropped.
std::string normalize_newlines(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      s += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      s += in[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit(TokenType::Text, src_.substr(pos_), pos_);
        pos_ = src_.size();
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')
                            ? src_[tag + 2]
                            : 0;
      std::string text = src_.substr(pos_, tag - pos_);
      control_text_before_tag(text, sign, kind != '{');
      if (!text.empty()) emit(TokenType::Text, std::move(text), pos_);
      const size_t after_open = tag + 2 + (sign ? 1 : 0);
      size_t raw_body = 0;
      if (kind == '%' && match_raw_begin(after_open, &raw_body)) {
        lex_raw(tag, raw_body);
      } else if (kind == '#') {
        lex_comment(tag, after_open);
      } else {
        lex_tag(tag, after_open, kind == '%');
      }
    }
    emit(TokenType::Eof, "", src_.size());
    return std::move(out_);
  }

 private:
  struct Pos {
    int line, column;
  };

  Pos at(size_t off) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off) - 1;
    const size_t start = *it;
    return {int(it - line_starts_.begin()) + 1,
            int(code_point_count(std::string_view(src_).substr(start, off - start))) + 1};
  }

  template <typename... Args>
  [[noreturn]] void error(size_t off, fmt::format_string<Args...> f, Args&&... args) const {
    const Pos p = at(off);
    syntax_error(p.line, p.column, f, std::forward<Args>(args)...);
  }

  Token& emit(TokenType type, std::string value, size_t off) {
    const Pos p = at(off);
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.line = p.line;
    t.column = p.column;
    out_.push_back(std::move(t));
    return out_.back();
  }

  bool starts_with(size_t p, std::string_view s) const {
    return std::string_view(src_).substr(p, s.size()) == s;
  }

  size_t find_tag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#'))
        return p;
    }
    return std::string::npos;
  }

  void skip_space() { pos_ = skip_space_at(pos_); }
  size_t skip_space_at(size_t p) const { return space_end(src_, p); }

  // Whitespace control of the text in front of a tag: `-` strips all of its trailing
  // whitespace; otherwise (unless `+`) lstrip_blocks removes the spaces in front of a block
  // or comment tag when nothing else precedes it on its line.
  void control_text_before_tag(std::string& text, char sign, bool block_or_comment) const {
    if (sign == '-') {
      text = rstrip_py_space(text);
    } else if (sign != '+' && block_or_comment) {
      const size_t nl = text.rfind('\n');
      const size_t line_start = nl == std::string::npos ? 0 : nl + 1;
      if ((line_start > 0 || line_starting_) &&
          all_py_space(std::string_view(text).substr(line_start)))
        text.resize(line_start);
    }
  }

  // The end of a block tag: "+%}" keeps what follows, "-%}" strips following whitespace,
  // "%}" drops one following newline (trim_blocks). Returns false if none is at pos_.
  bool block_end(size_t p, size_t* end) const {
    if (starts_with(p, "+%}")) {
      *end = p + 3;
    } else if (starts_with(p, "-%}")) {
      *end = p + 3;
      *end = skip_space_at(*end);
    } else if (starts_with(p, "%}")) {
      *end = p + 2;
      if (*end < src_.size() && src_[*end] == '\n') ++*end;
    } else {
      return false;
    }
    return true;
  }

  void finish_tag(size_t end) {
    line_starting_ = end > 0 && src_[end - 1] == '\n';
    pos_ = end;
  }

  // {% raw %} (no trim_blocks after it, as in Jinja): *body is where the raw text starts.
  bool match_raw_begin(size_t p, size_t* body) const {
    p = skip_space_at(p);
    if (!starts_with(p, "raw") || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) return false;
    p += 3;
    p = skip_space_at(p);
    if (starts_with(p, "-%}")) {
      p += 3;
      p = skip_space_at(p);
    } else if (starts_with(p, "%}")) {
      p += 2;
    } else {
      return false;
    }
    *body = p;
    return true;
  }

  void lex_raw(size_t tag, size_t body) {
    for (size_t p = src_.find("{%", body); p != std::string::npos; p = src_.find("{%", p + 1)) {
      const char sign =
          p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+') ? src_[p + 2] : 0;
      size_t q = p + 2 + (sign ? 1 : 0);
      q = skip_space_at(q);
      if (!starts_with(q, "endraw")) continue;
      q += 6;
      q = skip_space_at(q);
      size_t end;
      if (!block_end(q, &end)) continue;
      std::string text = src_.substr(body, p - body);
      line_starting_ = body > 0 && src_[body - 1] == '\n';
      control_text_before_tag(text, sign, true);
      if (!text.empty()) emit(TokenType::Text, std::move(text), body);
      finish_tag(end);
      return;
    }
    error(tag, "missing {{% endraw %}} for this {{% raw %}}");
  }

  void lex_comment(size_t tag, size_t from) {
    const size_t close = src_.find("#}", from);
    if (close == std::string::npos) error(tag, "missing end of comment tag '#}}'");
    size_t end = close + 2;
    const char sign = close > from ? src_[close - 1] : 0;
    if (sign == '-') {
      end = skip_space_at(end);
    } else if (sign != '+' && end < src_.size() && src_[end] == '\n') {
      ++end;  // trim_blocks
    }
    finish_tag(end);
  }

  void lex_tag(size_t tag, size_t from, bool is_block) {
    emit(is_block ? TokenType::BlockBegin : TokenType::VarBegin, "", tag);
    pos_ = from;
    std::vector<char> balance;  // the closing brackets still expected
    while (true) {
      skip_space();
      if (pos_ >= src_.size())
        error(tag, "this tag is never closed (expected '{}')", is_block ? "%}" : "}}");
      if (balance.empty()) {
        size_t end;
        if (is_block && block_end(pos_, &end)) {
          emit(TokenType::BlockEnd, "", pos_);
          finish_tag(end);
          return;
        }
        if (!is_block && (starts_with(pos_, "-}}") || starts_with(pos_, "}}"))) {
          emit(TokenType::VarEnd, "", pos_);
          end = pos_ + (src_[pos_] == '-' ? 3 : 2);
          if (src_[pos_] == '-') end = skip_space_at(end);
          finish_tag(end);
          return;
        }
      }
      const char c = src_[pos_];
      if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        const size_t b = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        emit(TokenType::Name, src_.substr(b, pos_ - b), b);
      } else if (c == '\'' || c == '"') {
        lex_string();
      } else {
        lex_operator(balance);
      }
    }
  }

  // Digits with single underscores between them ("1_000"); returns the end or `p` if none.
  size_t digits(size_t p, bool (*ok)(char)) const {
    size_t q = p;
    while (q < src_.size()) {
      if (ok(src_[q])) {
        ++q;
      } else if (src_[q] == '_' && q > p && q + 1 < src_.size() && ok(src_[q + 1])) {
        ++q;
      } else {
        break;
      }
    }
    return q;
  }

  void lex_number() {
    const size_t b = pos_;
    auto dec = [](char ch) { return is_digit(ch); };
    auto strip = [&](size_t e) {
      std::string s = src_.substr(b, e - b);
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    // A float (not right after a '.', so that `x.0.1` indexes twice): 1.5, 1e3, 1.5e-3.
    const bool after_dot = b > 0 && src_[b - 1] == '.';
    size_t e = digits(b, dec);
    if (!after_dot) {
      size_t f = e;
      bool is_float = false;
      if (f + 1 < src_.size() && src_[f] == '.' && is_digit(src_[f + 1])) {
        f = digits(f + 1, dec);
        is_float = true;
      }
      if (f < src_.size() && (src_[f] == 'e' || src_[f] == 'E')) {
        size_t g = f + 1;
        if (g < src_.size() && (src_[g] == '+' || src_[g] == '-')) ++g;
        const size_t h = digits(g, dec);
        if (h > g) {
          f = h;
          is_float = true;
        }
      }
      if (is_float) {
        Token& t = emit(TokenType::Float, src_.substr(b, f - b), b);
        t.float_value = std::strtod(strip(f).c_str(), nullptr);
        pos_ = f;
        return;
      }
    }
    // Integers: 0b.., 0o.., 0x.., or decimal (no leading zeros but "0", "00").
    int base = 10;
    size_t start = b;
    if (src_[b] == '0' && b + 1 < src_.size()) {
      const char p = char(src_[b + 1] | 0x20);
      if (p == 'b' || p == 'o' || p == 'x') {
        base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
        start = b + 2;
        if (start < src_.size() && src_[start] == '_') ++start;
        auto ok = base == 2 ? +[](char ch) { return ch == '0' || ch == '1'; }
                  : base == 8
                      ? +[](char ch) { return ch >= '0' && ch <= '7'; }
                      : +[](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; };
        e = digits(start, ok);
        if (e == start) error(b, "invalid integer literal");
      } else {
        // "0" may only be followed by more zeros (Python has no octal "017").
        e = b + 1;
        while (e < src_.size() &&
               (src_[e] == '0' || (src_[e] == '_' && e + 1 < src_.size() && src_[e + 1] == '0')))
          ++e;
      }
    }
    std::string text = src_.substr(start, e - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    int64_t v = 0;
    const auto res = std::from_chars(text.data(), text.data() + text.size(), v, base);
    if (res.ec != std::errc()) error(b, "integer literal {} is too large", src_.substr(b, e - b));
    Token& t = emit(TokenType::Int, src_.substr(b, e - b), b);
    t.int_value = v;
    pos_ = e;
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = char(c | 0x20);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }

  // A quoted string, unescaped as Python's "unicode-escape" codec does (what Jinja uses):
  // \n \t \r \\ \' \" \a \b \f \v, octal \ooo, \xhh, \uhhhh, \Uhhhhhhhh, backslash-newline;
  // any other backslash stays as it is.
  void lex_string() {
    const size_t b = pos_;
    const char quote = src_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) error(b, "unterminated string literal");
      const char c = src_[pos_];
      if (c == quote) {
        ++pos_;
        break;
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= src_.size()) error(b, "unterminated string literal");
      const char e = src_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case '\n':
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int i = 0; i < n; ++i) {
            const int h = pos_ < src_.size() ? hex_value(src_[pos_]) : -1;
            if (h < 0) error(pos_ - 2 - i, "truncated \\{} escape in a string literal", e);
            cp = cp * 16 + uint32_t(h);
            ++pos_;
          }
          if (cp > 0x10FFFF) error(pos_ - n - 2, "\\{} escape above U+10FFFF", e);
          utf8::append(out, char32_t(cp));
          break;
        }
        case 'N':
          error(pos_ - 2, "\\N{{...}} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = uint32_t(e - '0');
            for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7';
                 ++i)
              cp = cp * 8 + uint32_t(src_[pos_++] - '0');
            utf8::append(out, char32_t(cp));
          } else {
            out += '\\';
            pos_ -= 1;  // the next character is taken as it is
          }
      }
    }
    emit(TokenType::String, std::move(out), b);
  }

  void lex_operator(std::vector<char>& balance) {
    static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                       "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                       ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* op : kOps) {
      if (!starts_with(pos_, op)) continue;
      const std::string o = op;
      if (o == "(" || o == "[" || o == "{") {
        balance.push_back(o == "(" ? ')' : o == "[" ? ']' : '}');
      } else if (o == ")" || o == "]" || o == "}") {
        if (balance.empty()) error(pos_, "unexpected '{}'", o);
        if (balance.back() != o[0])
          error(pos_, "unexpected '{}', expected '{}'", o, balance.back());
        balance.pop_back();
      }
      emit(TokenType::Op, o, pos_);
      pos_ += o.size();
      return;
    }
    char32_t cp = 0xFFFD;
    utf8::decode(std::string_view(src_).substr(pos_), &cp);
    std::string shown;
    utf8::append(shown, cp);
    error(pos_, "unexpected character '{}'", shown);
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  size_t pos_ = 0;
  bool line_starting_ = true;  // the last tag ended a line (for lstrip_blocks)
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace cpinfer::jinja
