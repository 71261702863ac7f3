#include "tokenizer/pre_tokenizer.h"

#include "core/error.h"

namespace cpinfer {
namespace {

// ByteLevel(use_regex=true): the GPT-2 pre-tokenization pattern.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json* spec, const JsonFields& f) {
  PreTokenizer p;
  if (spec) p.add(*spec, "pre_tokenizer", f);
  if (!p.has_byte_level_) {
    fail("{}: pre_tokenizer has no ByteLevel step; only byte-level BPE tokenizers are supported",
         f.source());
  }
  return p;
}

void PreTokenizer::add(const nlohmann::json& spec, const std::string& path, const JsonFields& f) {
  const std::string type = f.string(f.require(spec, path, "type"), path + ".type");
  if (has_byte_level_) {
    // Steps after ByteLevel would see the mapped alphabet ("Ġ"), which we do not model.
    fail("{}: {} ({}) comes after the ByteLevel pre-tokenizer; ByteLevel must be the last step",
         f.source(), path, type);
  }
  if (type == "Sequence") {
    const auto& list = f.require(spec, path, "pretokenizers");
    f.expect_array(list, path + ".pretokenizers");
    for (size_t i = 0; i < list.size(); ++i) {
      add(list[i], JsonFields::index(path + ".pretokenizers", i), f);
    }
  } else if (type == "Split") {
    const std::string behavior = f.opt_string(spec, path, "behavior");
    if (behavior != "Isolated") {
      fail("{}: {}.behavior is \"{}\"; only \"Isolated\" is supported", f.source(), path, behavior);
    }
    if (f.flag(spec, path, "invert", false)) {
      fail("{}: {}.invert is true; only false is supported", f.source(), path);
    }
    const auto& pat = f.require(spec, path, "pattern");
    const std::string ppath = path + ".pattern";
    if (const auto* re = f.find(pat, ppath, "Regex")) {
      regexes_.emplace_back(f.string(*re, ppath + ".Regex"), false, f.source() + ": " + ppath);
    } else if (const auto* s = f.find(pat, ppath, "String")) {
      regexes_.emplace_back(f.string(*s, ppath + ".String"), true, f.source() + ": " + ppath);
    } else {
      fail("{}: {} must have a \"Regex\" or \"String\" field", f.source(), ppath);
    }
  } else if (type == "ByteLevel") {
    if (f.flag(spec, path, "add_prefix_space", false)) {
      fail("{}: {}.add_prefix_space is true; only false is supported", f.source(), path);
    }
    if (f.flag(spec, path, "use_regex", true)) {
      regexes_.emplace_back(kGpt2Pattern, false, f.source() + ": " + path);
    }
    has_byte_level_ = true;
  } else {
    fail(
        "{}: {}.type is \"{}\"; supported pre-tokenizers are \"Split\", \"ByteLevel\" and a "
        "\"Sequence\" of them",
        f.source(), path, type);
  }
}

}  // namespace cpinfer
