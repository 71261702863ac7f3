// safetensors reading (mmap; single file or sharded through model.safetensors.index.json)
// and writing. Format: 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data; offsets are relative to the end of the header.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace cpinfer {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapped file
  size_t nbytes = 0;
  std::string file;               // which file it came from (for messages)
  int64_t numel() const;
};

// All tensors of a model directory (or of one .safetensors file).
class SafetensorsStore {
 public:
  // DIR containing model.safetensors (preferred, as in transformers) or
  // model.safetensors.index.json (+ shards), or a path to one .safetensors file or index.
  // Validates every header fully (dtype names, shapes, offsets inside the file, no
  // overlaps, sizes = numel * dtype size). Tensor data is not aligned beyond what the
  // file gives (files written here align each tensor to its element size).
  static SafetensorsStore open(const std::string& path);

  bool contains(const std::string& name) const;
  // Throws Error "tensor 'X' is missing from DIR" when absent.
  const TensorInfo& get(const std::string& name) const;
  // get() plus checks: dtype in {F32, BF16, F16} and exactly this shape, else an Error
  // naming the tensor, the expected and the found shape/dtype.
  const TensorInfo& get_checked(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> names() const;
  uint64_t total_bytes() const;

 private:
  void add_file(const std::string& file_path);

  std::string source_;  // the path given to open(), for messages
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::map<std::string, TensorInfo> tensors_;
};

// Parses and validates the bytes of one whole .safetensors file (header length, JSON
// header, dtypes, shapes, data_offsets inside the data area, no overlaps); `source` names
// the file in errors. Each TensorInfo::data points into `bytes`. open() uses it on every
// mapped file; it takes a buffer so that it can be tested (and fuzzed) without a file.
std::vector<TensorInfo> parse_safetensors_header(const uint8_t* bytes, size_t size,
                                                 const std::string& source);

// Writes tensors to one .safetensors file. The file is sized up front and mapped
// writable; each tensor's bytes are produced by `fill(dst)` straight into the map
// (dst has numel * dtype_size bytes), so a 1 GB model never sits twice in memory.
// Tensors are filled in parallel on `threads` threads (fill must be thread-safe).
// Alternatively `fill_range(dst, begin, end)` writes only elements [begin, end) of the
// tensor starting at dst; the writer then splits big tensors into chunks so that one
// large tensor (an embedding) is filled by all threads.
// The data is laid out in the given order, stably sorted by dtype size (largest first,
// as the Python writer does) so every tensor is aligned to its element size; the
// header is padded with spaces to a multiple of 8 bytes. The file is written to
// PATH.tmp and renamed, so readers never see a half-written file.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::function<void(uint8_t* dst)> fill;
  std::function<void(uint8_t* dst, int64_t begin, int64_t end)> fill_range;
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {}, int threads = 1);

}  // namespace cpinfer
