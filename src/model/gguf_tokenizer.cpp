#include "model/gguf_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "model/gguf_writer.h"
#include "tokenizer/utf8.h"

namespace cpinfer {

using json = nlohmann::json;

namespace {

// The Split regexes of the real tokenizer.json files (Qwen2.5 / Qwen3; Llama 3.x): they
// differ in \p{N} (one digit per piece) versus \p{N}{1,3}.
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// tokenizer.ggml.pre -> what the tokenizer.json of such a model says: its regex, the NFC
// normalizer (Qwen) and BPE's ignore_merges (Llama 3: a word that is a token is not merged).
struct PreTokenizer { const char* name; const char* regex; bool nfc; bool ignore_merges; };
constexpr PreTokenizer kPre[] = {
    {"qwen2", kQwen2Regex, true, false},
    {"llama-bpe", kLlama3Regex, false, true},
};

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

json byte_level() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
          {"use_regex", false}};
}

}  // namespace

std::string gguf_tokenizer_json(const GgufFile& g) {
  const std::string model = g.get_string("tokenizer.ggml.model");
  CPI_CHECK(model == "gpt2", "'{}': tokenizer.ggml.model is '{}'; cpinfer supports only \"gpt2\" "
            "(byte-level BPE){}", g.source, model, model == "llama" ? " (\"llama\" is a "
            "SentencePiece tokenizer)" : "");
  const std::string pre_name = g.get_string("tokenizer.ggml.pre");
  const PreTokenizer* pre = nullptr;
  for (const PreTokenizer& p : kPre)
    if (pre_name == p.name) pre = &p;
  CPI_CHECK(pre, "'{}': tokenizer.ggml.pre is '{}'; supported: qwen2, llama-bpe", g.source,
            pre_name);
  const GgufValue& tokens = g.get_array("tokenizer.ggml.tokens", GgufType::STRING);
  const GgufValue* types = g.has("tokenizer.ggml.token_type")
                               ? &g.get_array("tokenizer.ggml.token_type", GgufType::I32)
                               : nullptr;
  CPI_CHECK(!types || types->count == tokens.count, "'{}': tokenizer.ggml.token_type has {} "
            "entries but tokenizer.ggml.tokens has {}", g.source, types ? types->count : 0,
            tokens.count);
  const GgufValue& merges = g.get_array("tokenizer.ggml.merges", GgufType::STRING);
  // Byte-level BPE vocabularies and merges are UTF-8 text (bytes mapped to printable
  // characters); anything else is a broken file, named here rather than deep in the JSON.
  const auto check_utf8 = [&](const std::vector<std::string>& strs, const char* key) {
    for (size_t i = 0; i < strs.size(); ++i) {
      const size_t bad = utf8::first_invalid(strs[i]);
      CPI_CHECK(bad == utf8::kValid, "'{}': {}[{}] is not valid UTF-8 (byte {})", g.source,
                key, i, bad);
    }
  };
  check_utf8(tokens.strs, "tokenizer.ggml.tokens");
  check_utf8(merges.strs, "tokenizer.ggml.merges");

  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < tokens.strs.size(); ++id) {
    const int64_t type = types ? types->ints[id] : kNormal;
    if (type == kUnused) continue;
    if (type == kControl || type == kUserDefined) {
      added.push_back({{"id", id}, {"content", tokens.strs[id]}, {"single_word", false},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                       {"special", type == kControl}});
      continue;
    }
    CPI_CHECK(!vocab.contains(tokens.strs[id]), "'{}': tokenizer.ggml.tokens holds '{}' twice "
              "(ids {} and {})", g.source, tokens.strs[id], vocab[tokens.strs[id]].get<int64_t>(), id);
    vocab[tokens.strs[id]] = id;
  }

  json tok;
  tok["version"] = "1.0";
  tok["added_tokens"] = std::move(added);
  tok["normalizer"] = pre->nfc ? json{{"type", "NFC"}} : json();
  tok["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", pre->regex}}}, {"behavior", "Isolated"},
         {"invert", false}},
        byte_level()}}};
  json post = byte_level();
  const auto bos = g.get_int_opt("tokenizer.ggml.bos_token_id");
  if (g.get_bool_opt("tokenizer.ggml.add_bos_token").value_or(false) && bos) {
    CPI_CHECK(*bos >= 0 && uint64_t(*bos) < tokens.count, "'{}': tokenizer.ggml.bos_token_id {} "
              "is not a token id (0..{})", g.source, *bos, tokens.count - 1);
    const std::string& b = tokens.strs[size_t(*bos)];
    post = {{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", b}, {"type_id", 0}}}},
                        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"special_tokens", {{b, {{"id", b}, {"ids", {*bos}}, {"tokens", {b}}}}}}};
  }
  tok["post_processor"] = std::move(post);
  tok["decoder"] = byte_level();
  tok["model"] = {{"type", "BPE"}, {"ignore_merges", pre->ignore_merges},
                  {"vocab", std::move(vocab)}, {"merges", merges.strs}};
  return tok.dump();
}

GgufSpecialTokens gguf_special_token_texts(const GgufFile& g) {
  const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
  auto text = [&](const char* key) {
    const auto id = g.get_int_opt(key);
    if (!id || !tokens || tokens->elem != GgufType::STRING || *id < 0 ||
        uint64_t(*id) >= tokens->count)
      return std::string();
    return tokens->strs[size_t(*id)];
  };
  return {text("tokenizer.ggml.bos_token_id"), text("tokenizer.ggml.eos_token_id")};
}

std::optional<GgufChatTemplate> gguf_chat_template(const GgufFile& g) {
  const auto source = g.get_string_opt("tokenizer.chat_template");
  if (!source) return std::nullopt;
  const GgufSpecialTokens special = gguf_special_token_texts(g);
  return GgufChatTemplate{*source, special.bos_token, special.eos_token};
}

GgufMetadata gguf_tokenizer_metadata(
    const json& tok, const std::string& source, const ModelConfig& c,
    const json& tokenizer_config) {
  CPI_CHECK(tok.is_object() && tok.contains("model") && tok["model"].is_object(), "{}: not a "
            "tokenizer.json (no model object)", source);
  const json& m = tok["model"];
  // The Split regex decides tokenizer.ggml.pre.
  std::string regex;
  if (tok.contains("pre_tokenizer") && tok["pre_tokenizer"].is_object())
    for (const json& p : tok["pre_tokenizer"].value("pretokenizers", json::array()))
      if (p.is_object() && p.value("type", "") == "Split" && p.contains("pattern") &&
          p["pattern"].is_object() && p["pattern"].contains("Regex"))
        regex = p["pattern"]["Regex"].get<std::string>();
  const PreTokenizer* pre = nullptr;
  for (const PreTokenizer& p : kPre)
    if (regex == p.regex) pre = &p;
  CPI_CHECK(pre, "{}: its pre-tokenizer regex is neither Qwen2's nor Llama 3's, so it has no "
            "GGUF tokenizer.ggml.pre name", source);

  // id -> {text, type}: vocab entries are normal, added tokens control or user-defined.
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;
  for (auto it = m.at("vocab").begin(); it != m.at("vocab").end(); ++it)
    by_id[it.value().get<int64_t>()] = {it.key(), kNormal};
  for (const json& a : tok.value("added_tokens", json::array()))
    by_id[a.at("id").get<int64_t>()] = {a.at("content").get<std::string>(),
                                        a.value("special", false) ? kControl : kUserDefined};
  CPI_CHECK(by_id.empty() || by_id.rbegin()->first < c.vocab_size, "{}: token id {} is past the "
            "model's vocab_size {}", source, by_id.rbegin()->first, c.vocab_size);
  GgufValue tokens, types, merges;
  tokens.type = types.type = merges.type = GgufType::ARRAY;
  tokens.elem = merges.elem = GgufType::STRING;
  types.elem = GgufType::I32;
  for (int64_t id = 0; id < c.vocab_size; ++id) {
    auto it = by_id.find(id);
    const bool pad = it == by_id.end();
    tokens.strs.push_back(pad ? fmt::format("[PAD{}]", id) : it->second.first);
    types.ints.push_back(pad ? kUnused : it->second.second);
  }
  tokens.count = types.count = uint64_t(c.vocab_size);
  for (const json& mg : m.at("merges"))
    merges.strs.push_back(mg.is_array() ? mg[0].get<std::string>() + " " + mg[1].get<std::string>()
                                        : mg.get<std::string>());
  merges.count = merges.strs.size();

  GgufMetadata out;
  out.emplace_back("tokenizer.ggml.model", gguf_string("gpt2"));
  out.emplace_back("tokenizer.ggml.pre", gguf_string(pre->name));
  out.emplace_back("tokenizer.ggml.tokens", std::move(tokens));
  out.emplace_back("tokenizer.ggml.token_type", std::move(types));
  out.emplace_back("tokenizer.ggml.merges", std::move(merges));
  if (c.bos_token_id)
    out.emplace_back("tokenizer.ggml.bos_token_id", gguf_u32(*c.bos_token_id));
  // eos ids: tokenizer_config's eos_token (a string or {"content": ...}) when it is one of
  // them, else the first, is the eos token; <|eom_id|> the eom token; any other the eot token.
  // Example, Llama 3.2: ids {128001, 128008, 128009}, eos_token "<|eot_id|>" (128009):
  // eos 128009, eot 128001, eom 128008.
  std::vector<int32_t> eos_ids = c.eos_token_ids;
  const json eos_field = tokenizer_config.is_object() ? tokenizer_config.value("eos_token", json())
                                                      : json();
  const json eos_text = eos_field.is_object() ? eos_field.value("content", json()) : eos_field;
  if (eos_text.is_string() && !eos_ids.empty()) {
    const auto named = std::find_if(eos_ids.begin(), eos_ids.end(), [&](int32_t id) {
      return by_id.count(id) && by_id[id].first == eos_text.get<std::string>();
    });
    if (named != eos_ids.end()) std::rotate(eos_ids.begin(), named, named + 1);  // to the front
  }
  for (size_t k = 0; k < eos_ids.size(); ++k) {
    const int32_t id = eos_ids[k];
    const bool eom = by_id.count(id) && by_id[id].first == "<|eom_id|>";
    const std::string key = k == 0 ? "tokenizer.ggml.eos_token_id"
                            : eom  ? "tokenizer.ggml.eom_token_id"
                                   : "tokenizer.ggml.eot_token_id";
    CPI_CHECK(std::none_of(out.begin(), out.end(), [&](const auto& kv) { return kv.first == key; }),
              "{}: more end-of-sequence ids ({}) than GGUF has keys for (eos, eot, eom)", source,
              c.eos_token_ids.size());
    out.emplace_back(key, gguf_u32(id));
  }
  // Llama 3's post_processor puts <|begin_of_text|> first; Qwen's adds nothing.
  const bool add_bos = tok.contains("post_processor") &&
                       tok["post_processor"].dump().find("TemplateProcessing") != std::string::npos;
  out.emplace_back("tokenizer.ggml.add_bos_token", gguf_bool(add_bos));
  const std::string chat_template = tokenizer_config.is_object()
                                        ? tokenizer_config.value("chat_template", std::string())
                                        : std::string();
  if (!chat_template.empty()) out.emplace_back("tokenizer.chat_template", gguf_string(chat_template));
  return out;
}

}  // namespace cpinfer
