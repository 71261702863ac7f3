#include "cli/cli_util.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_text.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"

namespace cpinfer {

std::string read_text_file(const std::string& path, const std::string& what) {
  std::string text;
  CPI_CHECK(read_whole_file(path, &text), "cannot read {} '{}': {}", what, path,
            std::strerror(errno));
  return text;
}

std::vector<int32_t> parse_id_list(const std::string& list, const std::string& flag) {
  std::vector<int32_t> ids;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && std::isspace(static_cast<unsigned char>(item[used]))) ++used;
    CPI_CHECK(!item.empty() && used == item.size() && v >= 0 && v <= INT32_MAX,
              "{}: '{}' is not a token id (expected comma-separated non-negative integers, "
              "e.g. {} 9707,11,1879)",
              flag, item, flag);
    ids.push_back(static_cast<int32_t>(v));
  }
  CPI_CHECK(!ids.empty(), "{} is empty", flag);
  return ids;
}

Tokenizer load_model_tokenizer(const std::string& model) {
  const std::string gguf = find_gguf_model(model);
  if (gguf.empty()) return Tokenizer::from_file(model + "/tokenizer.json");
  return Tokenizer::from_json_text(gguf_tokenizer_json(open_gguf(gguf).gguf),
                                   fmt::format("'{}' (its tokenizer)", gguf));
}

ChatTemplate load_user_chat_template(const std::string& path, const std::string& model) {
  if (const std::string gguf = find_gguf_model(model); !gguf.empty()) {
    const GgufSpecialTokens t = gguf_special_token_texts(open_gguf(gguf).gguf);
    return ChatTemplate::from_file_with_tokens(path, t.bos_token, t.eos_token);
  }
  return ChatTemplate::from_file(path, model);
}

std::unique_ptr<ChatTemplate> load_model_chat_template(const std::string& model) {
  if (const std::string gguf = find_gguf_model(model); !gguf.empty()) {
    const auto t = gguf_chat_template(open_gguf(gguf).gguf);
    if (!t) return nullptr;
    try {
      return std::make_unique<ChatTemplate>(
          ChatTemplate::from_string(t->source, t->bos_token, t->eos_token));
    } catch (const Error& e) {
      fail("'{}': tokenizer.chat_template: {}", gguf, e.what());
    }
  }
  // Whether DIR/tokenizer_config.json has a chat_template (a broken one is an error then).
  std::ifstream f(model + "/tokenizer_config.json");
  if (!f) return nullptr;
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("chat_template") || j["chat_template"].is_null())
    return nullptr;
  return std::make_unique<ChatTemplate>(ChatTemplate::from_model_dir(model));
}

}  // namespace cpinfer
