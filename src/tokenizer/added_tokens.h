// Added tokens (tokenizer.json "added_tokens"): strings such as "<|im_start|>" that are cut
// out of the text before normalization and BPE and become their own ids. Matching follows
// HF tokenizers: leftmost-longest over all tokens; tokens with normalized=false are matched
// in the raw text, those with normalized=true in the normalized text; single_word, lstrip
// and rstrip behave as in HF (lstrip/rstrip swallow adjacent whitespace into the token).
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_fields.h"

namespace cpinfer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// Leftmost-longest matcher over one set of added tokens (a byte trie).
class AddedTokenMatcher {
 public:
  void add(const std::string& content, int32_t token_index);
  bool empty() const { return nodes_.size() <= 1; }
  // Longest token that starts at text[pos], as an index into the token list, or -1.
  int32_t longest_at(std::string_view text, size_t pos, size_t* len) const;
  bool may_start(uint8_t b) const { return first_[b]; }

 private:
  struct Node {
    std::unordered_map<uint8_t, int32_t> next;
    int32_t token = -1;
  };
  std::vector<Node> nodes_ = std::vector<Node>(1);
  bool first_[256] = {};
};

class AddedVocabulary {
 public:
  // normalize: the tokenizer's normalizer, applied to the content of normalized tokens.
  void load(const nlohmann::json* list, const JsonFields& f,
            const std::function<std::string(std::string_view)>& normalize);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find_id(int32_t id) const;
  const AddedToken* find_content(std::string_view content) const;

  // Splits text into runs: on_text(begin, end) for text between added tokens, on_token(id)
  // for each added token. normalized selects the token set (see the file comment).
  template <typename OnText, typename OnToken>
  void split(std::string_view text, bool normalized, OnText&& on_text, OnToken&& on_token) const {
    const AddedTokenMatcher& m = normalized ? normalized_ : raw_;
    if (m.empty()) {
      if (!text.empty()) on_text(size_t{0}, text.size());
      return;
    }
    size_t start = 0;  // first byte not yet emitted
    size_t pos = 0;
    while (pos < text.size()) {
      size_t len = 0;
      const int32_t t =
          m.may_start(static_cast<uint8_t>(text[pos])) ? m.longest_at(text, pos, &len) : -1;
      if (t < 0) {
        ++pos;
        continue;
      }
      // A rejected single_word match is skipped whole, like HF's non-overlapping search.
      if (!accept(tokens_[t], text, pos, len)) {
        pos += len;
        continue;
      }
      size_t b = pos, e = pos + len;
      extend(tokens_[t], text, start, &b, &e);
      if (b > start) on_text(start, b);
      on_token(tokens_[t].id);
      start = pos = e;
    }
    if (start < text.size()) on_text(start, text.size());
  }

 private:
  static bool accept(const AddedToken& t, std::string_view text, size_t pos, size_t len);
  static void extend(const AddedToken& t, std::string_view text, size_t floor, size_t* b,
                     size_t* e);

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  AddedTokenMatcher raw_, normalized_;
};

}  // namespace cpinfer
