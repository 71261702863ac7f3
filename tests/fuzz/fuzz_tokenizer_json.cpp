// Fuzz target: loading a tokenizer.json (Tokenizer::from_json_text). A tokenizer that loads
// is then exercised: a few fixed texts and the input itself are encoded (ids must be valid
// and decodable), and every id up to 512 is decoded.
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_common.h"
#include "tokenizer/tokenizer.h"

using namespace cpinfer;

namespace {

void exercise(const Tokenizer& tok, std::string_view text) {
  for (bool special : {false, true}) {
    std::vector<int32_t> ids;
    try {
      ids = tok.encode(text, special);
    } catch (const Error&) {
      continue;  // e.g. invalid UTF-8
    }
    for (int32_t id : ids)
      FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), "encode gave id %d, vocab_size %lld", id,
                 (long long)tok.vocab_size());
    try {
      (void)tok.decode(ids);
      (void)tok.decode(ids, true);
    } catch (const Error& e) {
      FUZZ_CHECK(false, "ids from encode do not decode: %s", e.what());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::as_text(data, size));
  std::optional<Tokenizer> tok;
  try {
    tok.emplace(Tokenizer::from_json_text(text, "tokenizer.json"));
  } catch (const Error&) {
    return 0;  // rejected with a message
  }
  FUZZ_CHECK(tok->vocab_size() >= 0, "negative vocab_size");
  for (std::string_view s : {"", "Hello, world! 123", " héllo\n\n  wörld\t", "<|im_start|>user\n",
                             "日本語のテキスト 😀", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})
    exercise(*tok, s);
  exercise(*tok, std::string_view(text).substr(0, 256));
  const int64_t n = std::min<int64_t>(tok->vocab_size(), 512);
  for (int32_t id = 0; id < n; ++id) {
    try {
      (void)tok->decode({id});
      (void)tok->token_bytes(id);
      (void)tok->is_special(id);
    } catch (const Error&) {
      // ids that are holes in the vocabulary are an error
    }
  }
  return 0;
}
