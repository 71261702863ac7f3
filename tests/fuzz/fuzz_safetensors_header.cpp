// Fuzz target: the safetensors header parser (parse_safetensors_header, what
// SafetensorsStore::open runs on every mapped file).
// The input is parsed twice: as a whole file (8-byte length, JSON header, data), and as
// "JSON header \0 data" wrapped with the right length, so that mutations of the JSON are
// not wasted on a length prefix that no longer matches.
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "fuzz_common.h"
#include "model/safetensors.h"

using namespace cpinfer;

namespace {

void parse(const uint8_t* bytes, size_t size) {
  std::vector<TensorInfo> ts;
  try {
    ts = parse_safetensors_header(bytes, size, "fuzz.safetensors");
  } catch (const Error&) {
    return;  // rejected with a message
  }
  // Accepted: every tensor lies inside the buffer and holds numel * dtype size bytes.
  for (const TensorInfo& t : ts) {
    FUZZ_CHECK(t.nbytes == 0 || (t.data >= bytes && t.data + t.nbytes <= bytes + size),
               "tensor '%s' points outside the file", t.name.c_str());
    FUZZ_CHECK(uint64_t(t.numel()) * uint64_t(dtype_size(t.dtype)) == t.nbytes,
               "tensor '%s': nbytes %zu != numel * dtype size", t.name.c_str(), t.nbytes);
    volatile uint8_t sink = 0;
    if (t.nbytes) sink = t.data[0] ^ t.data[t.nbytes - 1];  // ASan checks the bounds
    (void)sink;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  parse(data, size);

  auto [header, rest] = fuzz::split_nul(fuzz::as_text(data, size));
  std::vector<uint8_t> file(8 + header.size() + rest.size());
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file[i] = uint8_t(n >> (8 * i));
  if (!header.empty()) std::memcpy(file.data() + 8, header.data(), header.size());
  if (!rest.empty()) std::memcpy(file.data() + 8 + header.size(), rest.data(), rest.size());
  parse(file.data(), file.size());
  return 0;
}
