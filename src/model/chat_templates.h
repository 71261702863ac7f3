// The Jinja chat templates make-model writes into tokenizer_config.json.
#pragma once
#include <string>

namespace cpinfer {

// Qwen2.5 ChatML: a default system prompt when the conversation has none, then
// "<|im_start|>{role}\n{content}<|im_end|>\n" per message. Renders like the official
// Qwen2.5 template for conversations without tools.
const std::string& qwen2_chat_template();

// Llama 3: "<|begin_of_text|>" then "<|start_header_id|>{role}<|end_header_id|>\n\n
// {content|trim}<|eot_id|>" per message (the Llama 3 Instruct format, without the
// date / tool-calling preamble of 3.1+).
const std::string& llama3_chat_template();

}  // namespace cpinfer
