#include "tokenizer/tokenizer.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/file_text.h"
#include "core/json_parse.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_json_reader.h"
#include "tokenizer/utf8.h"

namespace cpinfer {

struct Tokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel bpe;
  AddedVocabulary added;
  std::vector<std::string> id_bytes;  // id -> the bytes it decodes to
  std::vector<uint8_t> id_flags;      // kAssigned | kSpecial
  // The post_processor's single-sequence template: ids before and after the text
  // (Llama 3: {<|begin_of_text|>} and {}; Qwen: none).
  std::vector<int32_t> template_prefix, template_suffix;
  static constexpr uint8_t kAssigned = 1, kSpecial = 2;

  void load(const nlohmann::json& root, const JsonFields& f, const BpeTables* tables);
  void load_post_processor(const nlohmann::json& pp, const std::string& path, const JsonFields& f);
  void encode_section(std::string_view text, std::vector<int32_t>& out, BpeScratch& s) const;
  void check_id(int32_t id, const char* what) const {
    if (id < 0 || static_cast<size_t>(id) >= id_flags.size() || !(id_flags[id] & kAssigned)) {
      fail("{}: token id {} is out of range (valid ids: 0..{})", what, id,
           static_cast<int64_t>(id_flags.size()) - 1);
    }
  }
};

void Tokenizer::Impl::load(const nlohmann::json& root, const JsonFields& f,
                           const BpeTables* tables) {
  f.expect_object(root, "");
  normalizer = Normalizer::from_json(f.find(root, "", "normalizer"), f);
  pre_tokenizer = PreTokenizer::from_json(f.find(root, "", "pre_tokenizer"), f);
  if (const auto* dec = f.find(root, "", "decoder")) {
    const std::string type = f.string(f.require(*dec, "decoder", "type"), "decoder.type");
    if (type != "ByteLevel") {
      fail("{}: decoder.type is \"{}\"; only \"ByteLevel\" is supported", f.source(), type);
    }
  }
  if (const auto* pp = f.find(root, "", "post_processor")) load_post_processor(*pp, "post_processor", f);
  bpe.load(f.require(root, "", "model"), f, tables);
  added.load(f.find(root, "", "added_tokens"), f, [this](std::string_view s) {
    std::string out;
    normalizer.apply(s, out);
    return out;
  });

  // Decoding table: vocab tokens through the ByteLevel inverse (a token outside the
  // alphabet decodes to its own UTF-8, as in HF), added tokens to their content.
  const auto& vocab_tokens = bpe.id_to_token();
  size_t n = vocab_tokens.size();
  for (const auto& a : added.tokens()) n = std::max(n, static_cast<size_t>(a.id) + 1);
  id_bytes.assign(n, std::string());
  id_flags.assign(n, 0);
  for (size_t id = 0; id < vocab_tokens.size(); ++id) {
    if (vocab_tokens[id].empty()) continue;
    auto bytes = byte_level::symbols_to_bytes(vocab_tokens[id]);
    id_bytes[id] = bytes ? std::move(*bytes) : vocab_tokens[id];
    id_flags[id] = kAssigned;
  }
  for (const auto& a : added.tokens()) {
    id_bytes[a.id] = a.content;
    id_flags[a.id] = kAssigned | (a.special ? kSpecial : 0);
  }
  // The post_processor's ids are added to encoded prompts: each must be a real token.
  for (const auto* ids : {&template_prefix, &template_suffix})
    for (int32_t id : *ids)
      if (id < 0 || static_cast<size_t>(id) >= id_flags.size() || !(id_flags[id] & kAssigned))
        fail("{}: post_processor uses token id {}, which is not in the vocabulary", f.source(),
             id);
}

// Sequence: each processor in turn; ByteLevel: nothing to add (offsets only);
// TemplateProcessing: its "single" template, e.g. [SpecialToken <|begin_of_text|>,
// Sequence A] -> prefix {128000} (the ids from its special_tokens map).
void Tokenizer::Impl::load_post_processor(const nlohmann::json& pp, const std::string& path,
                                          const JsonFields& f) {
  const std::string type = f.string(f.require(pp, path, "type"), path + ".type");
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    const nlohmann::json& list = f.require(pp, path, "processors");
    f.expect_array(list, path + ".processors");
    for (size_t i = 0; i < list.size(); ++i)
      load_post_processor(list[i], fmt::format("{}.processors[{}]", path, i), f);
    return;
  }
  if (type != "TemplateProcessing")
    fail("{}: {}.type is \"{}\"; supported: ByteLevel, TemplateProcessing, Sequence", f.source(),
         path, type);
  const nlohmann::json& single = f.require(pp, path, "single");
  f.expect_array(single, path + ".single");
  const nlohmann::json* specials = f.find(pp, path, "special_tokens");
  bool seen_text = false;
  for (const nlohmann::json& item : single) {
    if (item.is_object() && item.contains("Sequence")) {
      seen_text = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken"))
      fail("{}: {}.single items must be {{\"SpecialToken\": ...}} or {{\"Sequence\": ...}}, got {}",
           f.source(), path, item.dump());
    const std::string name = f.string(f.require(item["SpecialToken"], path + ".single", "id"),
                                      path + ".single[].SpecialToken.id");
    if (!specials || !specials->contains(name))
      fail("{}: {}.special_tokens has no entry for \"{}\"", f.source(), path, name);
    const nlohmann::json& ids = f.require((*specials)[name], path + ".special_tokens", "ids");
    f.expect_array(ids, path + ".special_tokens." + name + ".ids");
    for (const nlohmann::json& id : ids) {
      if (!id.is_number_integer())
        fail("{}: {}.special_tokens.{}.ids must be integers", f.source(), path, name);
      const int64_t v = id.get<int64_t>();
      if (v < 0 || v > kMaxTokenId)
        fail("{}: {}.special_tokens.{}.ids holds {}, out of range (ids must be in [0, {}])",
             f.source(), path, name, v, kMaxTokenId);
      (seen_text ? template_suffix : template_prefix).push_back(static_cast<int32_t>(v));
    }
  }
}

// Encodes text that contains no raw-matched added token: normalize, cut out normalized
// added tokens, pre-tokenize, BPE each piece.
void Tokenizer::Impl::encode_section(std::string_view text, std::vector<int32_t>& out,
                                     BpeScratch& s) const {
  std::string normalized;
  std::string_view norm = text;
  if (!normalizer.is_identity()) {
    normalizer.apply(text, normalized);
    norm = normalized;
  }
  added.split(
      norm, true,
      [&](size_t b, size_t e) {
        pre_tokenizer.split(norm.substr(b, e - b),
                            [&](std::string_view piece) { bpe.encode(piece, out, s); });
      },
      [&](int32_t id) { out.push_back(id); });
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::string& tokenizer_json_path) {
  std::string text;
  if (!read_whole_file(tokenizer_json_path, &text)) {
    fail("cannot open tokenizer file {}: {}", tokenizer_json_path, std::strerror(errno));
  }
  return from_json_text(text, tokenizer_json_path);
}

Tokenizer Tokenizer::from_json_text(const std::string& json_text, const std::string& source) {
  // One pass without a tree for the vocab and merges; anything unusual goes the ordinary way,
  // whose errors name it.
  nlohmann::json root;
  BpeTables tables;
  const bool fast = read_tokenizer_json(json_text, &root, &tables);
  if (!fast) root = parse_json_text(json_text, source, "; not a tokenizer.json?");
  auto impl = std::make_unique<Impl>();
  try {
    impl->load(root, JsonFields(source), fast ? &tables : nullptr);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: unexpected tokenizer.json content: {}", source, e.what());
  }
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  const size_t bad = utf8::first_invalid(text);
  if (bad != utf8::kValid) {
    fail("encode: input is not valid UTF-8: byte 0x{:02X} at byte offset {}",
         static_cast<uint8_t>(text[bad]), bad);
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 8);
  BpeScratch scratch;
  impl_->added.split(
      text, false,
      [&](size_t b, size_t e) { impl_->encode_section(text.substr(b, e - b), out, scratch); },
      [&](int32_t id) { out.push_back(id); });
  return out;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids = encode(text);
  if (!add_special_tokens) return ids;
  std::vector<int32_t> out = impl_->template_prefix;
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), impl_->template_suffix.begin(), impl_->template_suffix.end());
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    impl_->check_id(id, "decode");
    if (skip_special_tokens && (impl_->id_flags[id] & Impl::kSpecial)) continue;
    out += impl_->id_bytes[id];
  }
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  impl_->check_id(id, "token_bytes");
  return impl_->id_bytes[id];
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* a = impl_->added.find_content(token)) return a->id;
  auto it = impl_->bpe.vocab().find(std::string(token));
  if (it == impl_->bpe.vocab().end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->id_flags.size() &&
         (impl_->id_flags[id] & Impl::kSpecial);
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->id_flags.size()); }

}  // namespace cpinfer
