// safetensors reading (mmap; single file or sharded through model.safetensors.index.json)
// and writing. Format: 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data; offsets are relative to the end of the header.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "model/tensor_file_writer.h"

namespace cpinfer {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapped file
  size_t nbytes = 0;
  std::string file;               // which file it came from (for messages)
  bool mapped = true;             // false: data is in a buffer the store owns (a GGUF
                                  // tensor rewritten at load), never to be released
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
  // A store over tensors read from another format (model/gguf_model.h): `keep` owns what
  // their data points into (the mapped file, tensors rewritten at load); `source` names the
  // file in errors.
  static SafetensorsStore from_tensors(std::string source, std::vector<TensorInfo> tensors,
                                       std::shared_ptr<const void> keep);

  bool contains(const std::string& name) const;
  // Throws Error "tensor 'X' is missing from DIR" when absent.
  const TensorInfo& get(const std::string& name) const;
  // get() plus checks: dtype in {F32, BF16, F16, Q8_0} (Q8_0 only from GGUF files) and
  // exactly this shape, else an Error naming the tensor, the expected and the found
  // shape/dtype.
  const TensorInfo& get_checked(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> names() const;
  uint64_t total_bytes() const;

 private:
  void add_file(const std::string& file_path);

  std::string source_;  // the path given to open(), for messages
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::shared_ptr<const void> keep_;  // from_tensors: what the tensors point into
  std::map<std::string, TensorInfo> tensors_;
};

// Parses and validates the bytes of one whole .safetensors file (header length, JSON
// header, dtypes, shapes, data_offsets inside the data area, no overlaps); `source` names
// the file in errors. Each TensorInfo::data points into `bytes`. open() uses it on every
// mapped file; it takes a buffer so that it can be tested (and fuzzed) without a file.
std::vector<TensorInfo> parse_safetensors_header(const uint8_t* bytes, size_t size,
                                                 const std::string& source);

// Writes tensors to one .safetensors file (model/tensor_file_writer.h: sized up front,
// mapped, filled on `threads` threads, written to PATH.tmp and renamed).
// The data is laid out in the given order, stably sorted by dtype size (largest first,
// as the Python writer does) so every tensor is aligned to its element size; the
// header is padded with spaces to a multiple of 8 bytes. Q8_0 tensors are refused.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {}, int threads = 1);

}  // namespace cpinfer
