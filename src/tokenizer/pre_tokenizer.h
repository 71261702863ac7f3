// tokenizer.json "pre_tokenizer": splits normalized text into pieces that BPE encodes
// independently. Supported: ByteLevel (use_regex true = the GPT-2 split, or false), Split
// (Regex or String pattern, behavior "Isolated", invert false), and a Sequence of Splits
// ending in one ByteLevel. ByteLevel's byte->char mapping itself is folded into the BPE
// model (it works on raw bytes), so pieces here are plain UTF-8.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"

namespace cpinfer {

class PreTokenizer {
 public:
  static PreTokenizer from_json(const nlohmann::json* spec, const JsonFields& f);

  // Calls f(piece) for each piece of text, in order; the pieces tile the text exactly.
  template <typename F>
  void split(std::string_view text, F&& f) const {
    split_from(0, text, f);
  }

 private:
  template <typename F>
  void split_from(size_t step, std::string_view text, F& f) const {
    if (step == regexes_.size()) {
      f(text);
      return;
    }
    // "Isolated": each match is a piece, and so is each gap between matches.
    size_t prev = 0;
    regexes_[step].for_each_match(text, [&](size_t b, size_t e) {
      if (b > prev) split_from(step + 1, text.substr(prev, b - prev), f);
      split_from(step + 1, text.substr(b, e - b), f);
      prev = e;
    });
    if (prev < text.size()) split_from(step + 1, text.substr(prev), f);
  }

  void add(const nlohmann::json& spec, const std::string& path, const JsonFields& f);

  std::vector<Regex> regexes_;  // applied in order, each to the pieces of the previous
  bool has_byte_level_ = false;
};

}  // namespace cpinfer
