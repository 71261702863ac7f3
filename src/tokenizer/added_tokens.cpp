#include "tokenizer/added_tokens.h"

#include <utf8proc.h>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace cpinfer {
namespace {

// Unicode White_Space (what HF's \s matches).
bool is_unicode_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Approximates Unicode \w (Alphabetic, marks, decimal digits, connector punctuation,
// joiners) by general category.
bool is_word(char32_t c) {
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// Start of the code point that ends right before pos (pos > 0, valid UTF-8).
size_t prev_char(std::string_view text, size_t pos) {
  size_t i = pos - 1;
  while (i > 0 && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

char32_t char_at(std::string_view text, size_t pos) {
  char32_t c = 0xFFFD;
  utf8::decode(text.substr(pos), &c);
  return c;
}

}  // namespace

void AddedTokenMatcher::add(const std::string& content, int32_t token_index) {
  int32_t node = 0;
  for (char ch : content) {
    const auto b = static_cast<uint8_t>(ch);
    auto it = nodes_[node].next.find(b);
    if (it == nodes_[node].next.end()) {
      nodes_.emplace_back();
      it = nodes_[node].next.emplace(b, static_cast<int32_t>(nodes_.size() - 1)).first;
    }
    node = it->second;
  }
  // With duplicate contents the first token listed wins.
  if (nodes_[node].token < 0) nodes_[node].token = token_index;
  first_[static_cast<uint8_t>(content[0])] = true;
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t* len) const {
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = nodes_[node].next.find(static_cast<uint8_t>(text[i]));
    if (it == nodes_[node].next.end()) break;
    node = it->second;
    if (nodes_[node].token >= 0) {
      best = nodes_[node].token;
      *len = i + 1 - pos;
    }
  }
  return best;
}

void AddedVocabulary::load(const nlohmann::json* list, const JsonFields& f,
                           const std::function<std::string(std::string_view)>& normalize) {
  if (!list) return;
  f.expect_array(*list, "added_tokens");
  for (size_t i = 0; i < list->size(); ++i) {
    const auto& t = (*list)[i];
    const std::string path = JsonFields::index("added_tokens", i);
    AddedToken a;
    const int64_t id = f.integer(f.require(t, path, "id"), path + ".id");
    if (id < 0 || id > kMaxTokenId)
      fail("{}: {}.id = {} is out of range (ids must be in [0, {}])", f.source(), path, id,
           kMaxTokenId);
    a.id = static_cast<int32_t>(id);
    a.content = f.string(f.require(t, path, "content"), path + ".content");
    if (a.content.empty()) fail("{}: {}.content is empty", f.source(), path);
    if (utf8::first_invalid(a.content) != utf8::kValid) {
      fail("{}: {}.content is not valid UTF-8", f.source(), path);
    }
    a.special = f.flag(t, path, "special", false);
    a.single_word = f.flag(t, path, "single_word", false);
    a.lstrip = f.flag(t, path, "lstrip", false);
    a.rstrip = f.flag(t, path, "rstrip", false);
    a.normalized = f.flag(t, path, "normalized", !a.special);  // HF's default
    if (by_id_.count(a.id)) {
      fail("{}: {}: id {} is already used by added token \"{}\"", f.source(), path, a.id,
           tokens_[by_id_[a.id]].content);
    }
    by_id_.emplace(a.id, tokens_.size());
    by_content_.emplace(a.content, tokens_.size());
    const auto index = static_cast<int32_t>(tokens_.size());
    if (a.normalized) {
      const std::string pattern = normalize(a.content);
      if (!pattern.empty()) normalized_.add(pattern, index);
    } else {
      raw_.add(a.content, index);
    }
    tokens_.push_back(std::move(a));
  }
}

const AddedToken* AddedVocabulary::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::find_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

bool AddedVocabulary::accept(const AddedToken& t, std::string_view text, size_t pos, size_t len) {
  if (!t.single_word) return true;
  // Only a whole word: no word character right before or right after the match.
  if (pos > 0 && is_word(char_at(text, prev_char(text, pos)))) return false;
  if (pos + len < text.size() && is_word(char_at(text, pos + len))) return false;
  return true;
}

void AddedVocabulary::extend(const AddedToken& t, std::string_view text, size_t floor, size_t* b,
                             size_t* e) {
  if (t.lstrip) {
    // Swallow whitespace on the left, but not what an earlier token already took.
    while (*b > floor) {
      const size_t p = prev_char(text, *b);
      if (!is_unicode_space(char_at(text, p))) break;
      *b = p;
    }
    if (*b < floor) *b = floor;
  }
  if (t.rstrip) {
    char32_t c;
    size_t len;
    while (*e < text.size() && (len = utf8::decode(text.substr(*e), &c)) > 0 && is_unicode_space(c)) {
      *e += len;
    }
  }
}

}  // namespace cpinfer
