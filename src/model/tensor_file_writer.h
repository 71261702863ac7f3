// Writing a tensor file (safetensors, GGUF): a header and tensors at given offsets, the
// file sized up front and mapped writable so that each tensor's bytes are produced straight
// into the map (a 1 GB model never sits twice in memory), filled on several threads.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace cpinfer {

// One tensor to write. Its bytes (numel elements of dtype; Q8_0: numel / 32 blocks, the
// last dimension a multiple of 32) are produced by `fill(dst)` or, to let several threads
// share one big tensor, by `fill_range(dst, begin, end)`, which writes only elements
// [begin, end) of the tensor starting at dst (for Q8_0, begin and end are multiples of 32).
// fill and fill_range must be thread-safe.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::function<void(uint8_t* dst)> fill;
  std::function<void(uint8_t* dst, int64_t begin, int64_t end)> fill_range;
};

// Bytes of a tensor (an Error naming `path` and the tensor on a negative dimension or a
// Q8_0 row that is not whole blocks).
uint64_t tensor_bytes(const std::string& path, const TensorToWrite& t);

// Writes PATH: `header` at byte 0, tensor i at byte offsets[i], the file `total` bytes
// long (gaps are zero). Written to PATH.tmp and renamed, so readers never see a
// half-written file; the temporary file is removed on error. Big tensors are split into
// chunks (fill_range) so that all `threads` threads take part; a progress bar names the file.
void write_tensor_file(const std::string& path, const std::string& header,
                       const std::vector<TensorToWrite>& tensors,
                       const std::vector<uint64_t>& offsets, uint64_t total, int threads);

}  // namespace cpinfer
