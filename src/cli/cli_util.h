// Small helpers shared by the subcommands.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace cpinfer {

// The whole file as bytes; Error "cannot read <what> '<path>'" when it cannot be read.
std::string read_text_file(const std::string& path, const std::string& what);

// "1, 2,3" -> {1, 2, 3}: comma-separated non-negative ids; Error naming `flag` and the bad
// item otherwise (and when the list is empty).
std::vector<int32_t> parse_id_list(const std::string& list, const std::string& flag);

// The tokenizer of a model path: DIR/tokenizer.json, or a GGUF model's tokenizer keys
// (model/gguf_tokenizer.h) when the path is one (model/gguf_model.h: find_gguf_model).
Tokenizer load_model_tokenizer(const std::string& model);

// The chat template of a model path (DIR/tokenizer_config.json, or a GGUF model's
// tokenizer.chat_template); null when the model has none. A broken one is an Error naming
// the file.
std::unique_ptr<ChatTemplate> load_model_chat_template(const std::string& model);
// `--chat-template PATH` (a file, or the template inline) for `model`: bos_token / eos_token
// from its tokenizer_config.json, or from the GGUF file's tokenizer metadata.
ChatTemplate load_user_chat_template(const std::string& path, const std::string& model);

}  // namespace cpinfer
