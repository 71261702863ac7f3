// The text of one request's generated tokens as it grows, with stop strings: push() adds a
// token and returns the text that is final by now. Held back: the bytes of a UTF-8
// character split across tokens (StreamDecoder), and a tail that may be the start of a stop
// string. When a stop string appears, the text ends right before it (vLLM's and OpenAI's
// behaviour: the stop string is not returned).
// Example, stop "\n\n": tokens "Hi", "\n", "\n", "x" -> "Hi", "" (held "\n"), then the
// stop matches: "" and stopped; the text is "Hi".
#pragma once
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace cpinfer {

class OutputText {
 public:
  OutputText(const Tokenizer& tok, std::vector<std::string> stop, bool skip_special_tokens);
  // Adds one token; returns the newly final text. Sets *stopped when a stop string
  // completed (no more text will follow).
  std::string push(int32_t id, bool* stopped);
  // The request ended for another reason: returns whatever was held back.
  std::string flush();
  const std::string& text() const { return text_; }  // everything so far, held-back included

 private:
  // Length of the longest suffix of text_ that is a proper prefix of some stop string.
  size_t held_stop_prefix() const;
  StreamDecoder decoder_;
  int64_t vocab_;  // the tokenizer's
  std::vector<std::string> stop_;
  size_t max_stop_ = 0;
  std::string text_;   // decoded text (complete UTF-8 only)
  size_t emitted_ = 0; // bytes of text_ already returned
  bool stopped_ = false;
};

}  // namespace cpinfer
