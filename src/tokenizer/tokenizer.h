// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (Qwen2/Qwen3,
// Llama 3 style): NFC normalizer, Split-regex pre-tokenizer (PCRE2, UTF + UCP),
// ByteLevel byte->unicode mapping, BPE merges by rank, added/special tokens matched
// before BPE, and the post_processor's TemplateProcessing (BOS) on request.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cpinfer {

class Tokenizer {
 public:
  // Throws Error naming the file and field on anything malformed or unsupported.
  static Tokenizer from_file(const std::string& tokenizer_json_path);
  static Tokenizer from_json_text(const std::string& json_text, const std::string& source);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text -> ids. Added tokens (e.g. "<|im_start|>") in the text become their ids.
  // Invalid UTF-8 input is an Error (naming the byte offset). No BOS/EOS is added (the
  // post_processor is not applied: see the overload). Safe to call from many threads.
  std::vector<int32_t> encode(std::string_view text) const;
  // With add_special_tokens, the post_processor's template is applied as transformers does
  // for one sequence (Llama 3: <|begin_of_text|> first; Qwen2: nothing is added).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Ids -> UTF-8 text: the exact bytes of the tokens, so ids that cut a character leave
  // its incomplete bytes as-is (StreamDecoder repairs them for display). Throws on an
  // id that is out of range.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  // The raw bytes a single token stands for (added tokens: their content).
  std::string token_bytes(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;
  int64_t vocab_size() const;  // highest id + 1 over vocab and added tokens

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streams generated tokens as text: push() returns only complete UTF-8, holding back
// the bytes of a character split across tokens; flush() returns what is left
// (invalid leftovers become U+FFFD).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special_tokens = false);
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace cpinfer
