#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace cpinfer {
namespace {

// Per-thread match data and JIT stack, shared by every pattern (they are not tied to one).
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* ctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchScratch() {
    data = pcre2_match_data_create(1, nullptr);
    ctx = pcre2_match_context_create(nullptr);
    // Long runs of one class can need more than the default 32 KiB JIT stack.
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (!data || !ctx || !stack) fail("PCRE2: out of memory creating match data");
    pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(ctx);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

// HF tokenizers matches with Oniguruma, whose \s is the Unicode White_Space property. PCRE2's
// UCP \s also matches U+180E (MONGOLIAN VOWEL SEPARATOR, no longer a space since Unicode 6.3),
// so \s and \S (inside classes too) are spelled out as the property.
std::string onig_compatible(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 's') {
      out += "\\p{White_Space}";
    } else if (c == 'S') {
      out += "\\P{White_Space}";
    } else if (c == 'Q') {  // \Q...\E quotes literally: copy it untouched
      const size_t end = pattern.find("\\E", i + 1);
      const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
      out.append(pattern, i - 1, stop - (i - 1));
      i = stop - 1;
    } else {
      out += '\\';
      out += c;
    }
  }
  return out;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

Regex::Regex(const std::string& pattern, bool literal, const std::string& where) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  uint32_t opts = PCRE2_UTF | PCRE2_UCP;
  if (literal) opts |= PCRE2_LITERAL;
  const std::string source = literal ? pattern : onig_compatible(pattern);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), opts,
                                   &err, &err_off, nullptr);
  if (!code) {
    fail("{}: cannot compile regex /{}/: {} (at offset {} of /{}/)", where, pattern,
         pcre2_message(err), err_off, source);
  }
  // JIT is an optimisation only: without it (unsupported platform) pcre2_match interprets.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Regex::Regex(Regex&& o) noexcept : code_(o.code_) { o.code_ = nullptr; }

Regex& Regex::operator=(Regex&& o) noexcept {
  if (this != &o) {
    pcre2_code_free(static_cast<pcre2_code*>(code_));
    code_ = o.code_;
    o.code_ = nullptr;
  }
  return *this;
}

bool Regex::next_match(std::string_view text, size_t pos, size_t* b, size_t* e) const {
  MatchScratch& s = scratch();
  auto* code = static_cast<const pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (pos <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, s.data, s.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) fail("regex match failed at byte {}: {}", pos, pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    if (ov[1] > ov[0]) {
      *b = ov[0];
      *e = ov[1];
      return true;
    }
    // Empty match: skip it (split pieces are never empty) and retry one character later.
    pos = ov[0] + 1;
    while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
  }
  return false;
}

}  // namespace cpinfer
