// Fuzz target: the GGUF reader (parse_gguf, what open_gguf runs on every mapped .gguf
// file), then, for files it accepts, the model config (gguf_model_config) and the
// tokenizer (gguf_tokenizer_json + Tokenizer::from_json_text) read from its metadata.
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "fuzz_common.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"

using namespace cpinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so that ASan sees any read past the end.
  std::vector<uint8_t> bytes(data, data + size);
  GgufFile g;
  try {
    g = parse_gguf(bytes.data(), bytes.size(), "fuzz.gguf");
  } catch (const Error&) {
    return 0;  // rejected with a message
  }
  // Accepted: every tensor lies inside the buffer, with the bytes its shape needs.
  for (const TensorInfo& t : g.tensors) {
    FUZZ_CHECK(t.nbytes == 0 || (t.data >= bytes.data() && t.data + t.nbytes <= bytes.data() + size),
               "tensor '%s' points outside the file", t.name.c_str());
    FUZZ_CHECK(t.shape.size() >= 1 && t.shape.size() <= 4, "tensor '%s' has %zu dimensions",
               t.name.c_str(), t.shape.size());
    const int64_t n = t.numel();
    FUZZ_CHECK(uint64_t(dtype_bytes(t.dtype, n)) == t.nbytes, "tensor '%s': nbytes %zu != %lld "
               "elements of its type", t.name.c_str(), t.nbytes, (long long)n);
    volatile uint8_t sink = 0;
    if (t.nbytes) sink = t.data[0] ^ t.data[t.nbytes - 1];  // ASan checks the bounds
    (void)sink;
  }
  try {
    const ModelConfig c = gguf_model_config(g);
    FUZZ_CHECK(c.hidden_size > 0 && c.num_layers > 0 && c.vocab_size > 0, "accepted a config "
               "with a zero size");
  } catch (const Error&) {
  }
  try {
    const Tokenizer tok = Tokenizer::from_json_text(gguf_tokenizer_json(g), "fuzz.gguf");
    const std::vector<int32_t> ids = tok.encode("Hello, world! 123");
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), "id %d out of range", id);
  } catch (const Error&) {
  }
  return 0;
}
