// A model's chat template (the Jinja `chat_template` of its tokenizer_config.json), parsed
// once and rendered for OpenAI-style messages the way Hugging Face transformers'
// apply_chat_template does it, after vLLM's normalisation of the messages.
//
// The template sees: messages, add_generation_prompt, tools and documents (none unless
// given in extra_context), bos_token / eos_token (when the model has them), then every key
// of extra_context (e.g. tools, date_string, enable_thinking), which wins over the others.
//
// Key order matters: tojson writes dicts in insertion order, like Python. Parse requests
// into nlohmann::ordered_json and call the ordered_json overload; nlohmann::json has
// already sorted its keys, so tool schemas from it render with sorted keys.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace cpinfer {

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // DIR/tokenizer_config.json: `chat_template` a string, or a list of {name, template}
  // (the one named "default" is used); without one, DIR/chat_template.jinja. `bos_token` /
  // `eos_token` may be a string, an object with `content`, or null. Throws an Error naming
  // the file for a missing file, a model without a chat template, or a syntax error.
  static ChatTemplate from_model_dir(const std::string& dir);

  // `serve --chat-template`: the template in the file `path`, or, as vLLM, the template
  // itself when `path` holds '{', '}' or a newline; bos_token / eos_token from
  // model_dir/tokenizer_config.json when it has them. Throws an Error naming the file when
  // it is missing, unreadable, empty, or not a template that parses.
  static ChatTemplate from_file(const std::string& path, const std::string& model_dir);
  // The same with the bos / eos texts given (a GGUF model has no tokenizer_config.json).
  static ChatTemplate from_file_with_tokens(const std::string& path, const std::string& bos_token,
                                            const std::string& eos_token);

  // bos/eos empty: the variable is not defined for the template.
  static ChatTemplate from_string(const std::string& source, const std::string& bos_token = "",
                                  const std::string& eos_token = "");

  // Throws an Error for malformed messages (see normalize_chat_messages) and for errors the
  // template raises (raise_exception, undefined values used, ...), with its line and column.
  // Const and without shared mutable state: safe to call from many threads at once.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra_context = {}) const;
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& extra_context = {}) const;

  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }

 private:
  ChatTemplate() = default;
  std::shared_ptr<const jinja::Template> tmpl_;
  std::string source_, bos_, eos_;
};

// Checks `messages` and returns them as vLLM hands them to a template: a non-empty array
// of objects with a string `role`; `content` a string, null or missing (both become ""), or
// an array of text parts ({"type": "text", "text": ...} or plain strings) joined with "\n";
// `tool_calls: null` dropped; a tool call's `function.arguments` given as a JSON string
// parsed into its value (templates expect a dict). Other keys pass through unchanged.
nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages);

}  // namespace cpinfer
