#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace cpinfer {

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(&tok), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  const std::string bytes = tok_->token_bytes(id);  // throws on a bad id
  if (skip_special_ && tok_->is_special(id)) return {};
  pending_ += bytes;
  // Emit everything up to the last character boundary; a character whose bytes are still
  // arriving stays pending. Ill-formed bytes are emitted at once, as U+FFFD.
  const size_t n = utf8::complete_prefix(pending_);
  std::string out = utf8::repair(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8::repair(pending_);
  pending_.clear();
  return out;
}

}  // namespace cpinfer
