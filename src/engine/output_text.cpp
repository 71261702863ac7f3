#include "engine/output_text.h"

#include <algorithm>

namespace cpinfer {

OutputText::OutputText(const Tokenizer& tok, std::vector<std::string> stop,
                       bool skip_special_tokens)
    : decoder_(tok, skip_special_tokens), vocab_(tok.vocab_size()) {
  for (std::string& s : stop)
    if (!s.empty()) stop_.push_back(std::move(s));
  for (const std::string& s : stop_) max_stop_ = std::max(max_stop_, s.size());
}

size_t OutputText::held_stop_prefix() const {
  size_t best = 0;
  for (const std::string& s : stop_)
    for (size_t k = std::min(s.size() - 1, text_.size()); k > best; --k)
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        best = k;
        break;
      }
  return best;
}

std::string OutputText::push(int32_t id, bool* stopped) {
  *stopped = false;
  if (stopped_) return {};
  const size_t old_size = text_.size();
  // Ids past the tokenizer's vocabulary (the model's embedding table is often padded, e.g.
  // Qwen2.5: 151936 rows, 151665 tokens) have no text, as in HF tokenizers.
  if (id < vocab_) text_ += decoder_.push(id);
  if (!stop_.empty() && text_.size() > old_size) {
    // A new match must end in the new bytes: start looking max_stop_ - 1 bytes before them.
    const size_t from = old_size >= max_stop_ ? old_size - max_stop_ + 1 : 0;
    size_t hit = std::string::npos;
    for (const std::string& s : stop_) hit = std::min(hit, text_.find(s, from));
    if (hit != std::string::npos) {
      text_.resize(std::max(hit, emitted_));
      std::string out = text_.substr(emitted_);
      emitted_ = text_.size();
      stopped_ = *stopped = true;
      return out;
    }
  }
  const size_t end = std::max(emitted_, text_.size() - held_stop_prefix());
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

std::string OutputText::flush() {
  if (stopped_) return {};
  text_ += decoder_.flush();
  std::string out = text_.substr(emitted_);
  emitted_ = text_.size();
  return out;
}

}  // namespace cpinfer
