// A compiled PCRE2 pattern (UTF + UCP, JIT when available) for splitting valid UTF-8 text.
// Matching never re-validates the subject (PCRE2_NO_UTF_CHECK): callers validate the text
// once, which keeps splitting linear. Safe to use from many threads at once.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace cpinfer {

class Regex {
 public:
  // Throws Error naming `where` and the PCRE2 message at the failing offset.
  Regex(const std::string& pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(Regex&& o) noexcept;
  Regex& operator=(Regex&& o) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls f(begin, end) for each non-overlapping, non-empty match in order, scanning
  // left to right. text must be valid UTF-8.
  template <typename F>
  void for_each_match(std::string_view text, F&& f) const {
    size_t pos = 0, b = 0, e = 0;
    while (next_match(text, pos, &b, &e)) {
      f(b, e);
      pos = e;
    }
  }

 private:
  // First non-empty match starting at or after pos; false when there is none.
  bool next_match(std::string_view text, size_t pos, size_t* b, size_t* e) const;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace cpinfer
