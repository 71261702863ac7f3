// tokenizer.json "normalizer": null, {"type": "NFC"}, or a Sequence of those. Anything else
// is rejected at load time, so that text is never silently tokenized differently from HF.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tokenizer/json_fields.h"

namespace cpinfer {

class Normalizer {
 public:
  Normalizer() = default;  // identity
  static Normalizer from_json(const nlohmann::json* spec, const JsonFields& f);

  bool is_identity() const { return !nfc_; }
  // out = normalized(in). in must be valid UTF-8.
  void apply(std::string_view in, std::string& out) const;

 private:
  void add(const nlohmann::json& spec, const std::string& path, const JsonFields& f);
  bool nfc_ = false;
};

// NFC of valid UTF-8 text (via utf8proc), with a fast path for text that NFC leaves alone.
std::string nfc(std::string_view in);

}  // namespace cpinfer
