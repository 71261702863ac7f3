#include "chat/chat_template.h"

#include <cstring>
#include <filesystem>

#include "chat/jinja_render.h"
#include "core/error.h"
#include "core/file_text.h"
#include "core/json_parse.h"

namespace cpinfer {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

std::string read_file(const fs::path& p) {
  std::string text;
  CPI_CHECK(read_whole_file(p.string(), &text), "cannot read '{}': {}", p.string(),
            std::strerror(errno));
  return text;
}

// bos_token / eos_token: "text", {"content": "text", ...} (an AddedToken) or null.
std::string special_token(const ojson& cfg, const char* key, const std::string& path) {
  if (!cfg.contains(key) || cfg[key].is_null()) return "";
  const ojson& t = cfg[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string())
    return t["content"].get<std::string>();
  fail("{}: {} must be a string, an object with a string 'content', or null; found {}", path, key,
       t.dump());
}

// The template text of tokenizer_config.json's chat_template: a string, or a list of
// {"name", "template"} from which the "default" one is taken. Empty if there is none.
std::string config_template(const ojson& cfg, const std::string& path) {
  if (!cfg.contains("chat_template") || cfg["chat_template"].is_null()) return "";
  const ojson& t = cfg["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  CPI_CHECK(t.is_array(),
            "{}: chat_template must be a string or a list of {{name, template}}, "
            "found {}",
            path, t.type_name());
  std::string names;
  for (const ojson& e : t) {
    CPI_CHECK(e.is_object() && e.contains("name") && e["name"].is_string() &&
                  e.contains("template") && e["template"].is_string(),
              "{}: each chat_template entry must be {{\"name\": string, \"template\": string}}, "
              "found {}",
              path, e.dump());
    if (e["name"] == "default") return e["template"].get<std::string>();
    names += (names.empty() ? "" : ", ") + e["name"].get<std::string>();
  }
  fail("{}: chat_template has no template named 'default' (it has: {})", path, names);
}

std::string text_content(const ojson& content, size_t i) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  CPI_CHECK(content.is_array(),
            "messages[{}].content must be a string, null or a list of text "
            "parts, not {}",
            i, content.type_name());
  std::string out;
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& part = content[j];
    std::string text;
    if (part.is_string()) {
      text = part.get<std::string>();
    } else {
      CPI_CHECK(part.is_object() && part.contains("type") && part["type"].is_string(),
                "messages[{}].content[{}] must be an object with a string 'type'", i, j);
      const std::string type = part["type"].get<std::string>();
      CPI_CHECK(type == "text",
                "messages[{}].content[{}] has type '{}'; only text parts are "
                "supported",
                i, j, type);
      CPI_CHECK(part.contains("text") && part["text"].is_string(),
                "messages[{}].content[{}] is a text part without a string 'text'", i, j);
      text = part["text"].get<std::string>();
    }
    out += (j ? "\n" : "") + text;
  }
  return out;
}

ojson normalize_tool_calls(const ojson& calls, size_t i) {
  CPI_CHECK(calls.is_array(), "messages[{}].tool_calls must be a list, not {}", i,
            calls.type_name());
  ojson out = calls;
  for (size_t j = 0; j < out.size(); ++j) {
    ojson& call = out[j];
    CPI_CHECK(call.is_object(), "messages[{}].tool_calls[{}] must be an object", i, j);
    if (!call.contains("function") || !call["function"].is_object()) continue;
    ojson& fn = call["function"];
    if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
    // A string the request's own depth check cannot see into: it is capped here, or a
    // deeply nested one would overflow the stack when the template writes it back (tojson).
    fn["arguments"] = parse_json_text<ojson>(
        fn["arguments"].get<std::string>(),
        fmt::format("messages[{}].tool_calls[{}].function.arguments", i, j));
  }
  return out;
}

}  // namespace

ojson normalize_chat_messages(const ojson& messages) {
  CPI_CHECK(messages.is_array(), "messages must be a list of message objects, not {}",
            messages.type_name());
  CPI_CHECK(!messages.empty(), "messages must not be empty");
  ojson out = ojson::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    CPI_CHECK(m.is_object(), "messages[{}] must be an object, not {}", i, m.type_name());
    CPI_CHECK(m.contains("role") && m["role"].is_string(),
              "messages[{}] needs a string 'role' (e.g. \"user\")", i);
    ojson n = ojson::object();
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (it.key() == "content") {
        n["content"] = text_content(*it, i);
      } else if (it.key() == "tool_calls") {
        if (!it->is_null()) n["tool_calls"] = normalize_tool_calls(*it, i);
      } else {
        n[it.key()] = *it;
      }
    }
    if (!n.contains("content")) n["content"] = "";
    out.push_back(std::move(n));
  }
  return out;
}

ChatTemplate ChatTemplate::from_string(const std::string& source, const std::string& bos_token,
                                       const std::string& eos_token) {
  ChatTemplate t;
  t.tmpl_ = std::make_shared<const jinja::Template>(source);
  t.source_ = source;
  t.bos_ = bos_token;
  t.eos_ = eos_token;
  return t;
}

ChatTemplate ChatTemplate::from_model_dir(const std::string& dir) {
  const fs::path cfg_path = fs::path(dir) / "tokenizer_config.json";
  const std::string path = cfg_path.string();
  CPI_CHECK(fs::is_regular_file(cfg_path),
            "cannot find '{}': the model directory needs a "
            "tokenizer_config.json with a chat_template",
            path);
  const ojson cfg = parse_json_text<ojson>(read_file(cfg_path), path);
  CPI_CHECK(cfg.is_object(), "{} must hold a JSON object", path);
  std::string source = config_template(cfg, path);
  std::string origin = path;
  if (source.empty()) {  // newer transformers save the template next to the config
    const fs::path jinja_path = fs::path(dir) / "chat_template.jinja";
    if (fs::is_regular_file(jinja_path)) {
      source = read_file(jinja_path);
      origin = jinja_path.string();
    }
  }
  CPI_CHECK(!source.empty(),
            "the model in '{}' has no chat template (no chat_template in "
            "tokenizer_config.json and no chat_template.jinja), so it cannot serve chat "
            "requests; send plain prompts to /v1/completions instead",
            dir);
  try {
    return from_string(source, special_token(cfg, "bos_token", path),
                       special_token(cfg, "eos_token", path));
  } catch (const Error& e) {
    fail("{}: {}", origin, e.what());
  }
}

ChatTemplate ChatTemplate::from_file(const std::string& path, const std::string& model_dir) {
  std::string bos, eos;
  const fs::path cfg_path = fs::path(model_dir) / "tokenizer_config.json";
  if (fs::is_regular_file(cfg_path)) {
    const ojson cfg = parse_json_text<ojson>(read_file(cfg_path), cfg_path.string());
    if (cfg.is_object()) {
      bos = special_token(cfg, "bos_token", cfg_path.string());
      eos = special_token(cfg, "eos_token", cfg_path.string());
    }
  }
  return from_file_with_tokens(path, bos, eos);
}

ChatTemplate ChatTemplate::from_file_with_tokens(const std::string& path,
                                                 const std::string& bos_token,
                                                 const std::string& eos_token) {
  const bool inline_template = path.find_first_of("{}\n") != std::string::npos;
  const std::string origin =
      inline_template ? std::string("the --chat-template given inline") : "'" + path + "'";
  std::string source = path;
  if (!inline_template) {
    CPI_CHECK(fs::is_regular_file(path),
              "cannot open the chat template file '{}' (--chat-template): no such file", path);
    source = read_file(path);
  }
  CPI_CHECK(!source.empty(), "the chat template {} is empty", origin);
  try {
    return from_string(source, bos_token, eos_token);
  } catch (const Error& e) {
    fail("the chat template {} does not parse: {}", origin, e.what());
  }
}

std::string ChatTemplate::render(const ojson& messages, bool add_generation_prompt,
                                 const ojson& extra_context) const {
  CPI_CHECK(extra_context.is_null() || extra_context.is_object(),
            "the extra chat template context must be an object, not {}", extra_context.type_name());
  jinja::Dict ctx;
  auto put = [&](const std::string& k, jinja::Value v) {
    for (auto& kv : ctx)
      if (kv.first == k) {
        kv.second = std::move(v);
        return;
      }
    ctx.emplace_back(k, std::move(v));
  };
  put("messages", jinja::from_json(normalize_chat_messages(messages)));
  put("add_generation_prompt", jinja::Value(add_generation_prompt));
  put("tools", jinja::Value::none());  // transformers passes tools=None, documents=None
  put("documents", jinja::Value::none());
  if (!bos_.empty()) put("bos_token", jinja::Value(bos_));
  if (!eos_.empty()) put("eos_token", jinja::Value(eos_));
  if (extra_context.is_object())
    for (auto it = extra_context.begin(); it != extra_context.end(); ++it)
      put(it.key(), jinja::from_json(*it));
  return tmpl_->render(jinja::Value::dict(std::move(ctx)));
}

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra_context) const {
  return render(ojson(messages), add_generation_prompt, ojson(extra_context));
}

}  // namespace cpinfer
