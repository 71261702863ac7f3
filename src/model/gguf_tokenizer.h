// The tokenizer of a GGUF file (tokenizer.ggml.* and tokenizer.chat_template keys), both
// ways: read into a tokenizer.json text that Tokenizer::from_json_text loads, and written
// from a tokenizer.json. Only byte-level BPE is supported: tokenizer.ggml.model "gpt2" with
// tokenizer.ggml.pre "qwen2" (Qwen2 / Qwen2.5 / Qwen3) or "llama-bpe" (Llama 3), whose
// pre-tokenizer regexes are those of the models' own tokenizer.json files.
//
// Token types (llama.cpp's): 1 normal -> model.vocab, 3 control -> a special added token,
// 4 user-defined -> a non-special added token, 5 unused (the [PADn] fillers up to the
// embedding's rows) -> left out, so the vocabulary is the tokenizer.json's.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/model_config.h"

namespace cpinfer {

// A tokenizer.json text for the file's tokenizer. Errors name the file and the key: a
// tokenizer.ggml.model other than "gpt2" (e.g. "llama", SentencePiece), an unknown
// tokenizer.ggml.pre, arrays of different lengths, a malformed merge.
std::string gguf_tokenizer_json(const GgufFile& g);

// tokenizer.chat_template and the texts of the bos / eos tokens ("" when absent), for
// ChatTemplate::from_string. nullopt when the file has no chat template.
struct GgufChatTemplate {
  std::string source, bos_token, eos_token;
};
std::optional<GgufChatTemplate> gguf_chat_template(const GgufFile& g);
// The texts of the bos / eos tokens ("" when absent), for a chat template given by the user.
struct GgufSpecialTokens {
  std::string bos_token, eos_token;
};
GgufSpecialTokens gguf_special_token_texts(const GgufFile& g);

// The tokenizer.* metadata for a tokenizer.json (`source` names it in errors), the model's
// config (vocab_size rows: ids without a token get "[PADn]", type unused; bos and eos ids)
// and its tokenizer_config.json (an empty object = none): its chat_template, and its
// eos_token, which becomes tokenizer.ggml.eos_token_id when it is one of the config's eos
// ids, as llama.cpp's converter chooses (<|eot_id|> for Llama 3.2, not config.json's first
// id <|end_of_text|>). tokenizer.ggml.pre follows the Split regex: Qwen's -> "qwen2",
// Llama 3's -> "llama-bpe"; any other is an Error.
GgufMetadata gguf_tokenizer_metadata(
    const nlohmann::json& tokenizer, const std::string& source, const ModelConfig& c,
    const nlohmann::json& tokenizer_config);

}  // namespace cpinfer
