// GGUF writing (version 3, little-endian, alignment 32): the metadata key/value pairs and
// the tensors (F32, F16, BF16, Q8_0), each at an aligned offset, filled straight into the
// mapped file (model/tensor_file_writer.h). The format is described in model/gguf.h.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "model/gguf.h"
#include "model/tensor_file_writer.h"

namespace cpinfer {

using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

// GgufValue constructors for the writer.
GgufValue gguf_string(std::string s);
GgufValue gguf_u32(uint32_t v);
GgufValue gguf_f32(float v);
GgufValue gguf_bool(bool v);

// Writes PATH (via PATH.tmp, renamed). Tensor shapes are row-major as everywhere in
// cpinfer; the file lists them fastest-first (shape {rows, cols} -> ne = [cols, rows]).
// Tensors are laid out in the given order. Errors name the file: a duplicate key or tensor
// name, a dtype GGUF cannot hold here (F32, F16, BF16, Q8_0 only), more than 4 dimensions.
void write_gguf(const std::string& path, const GgufMetadata& metadata,
                const std::vector<TensorToWrite>& tensors, int threads = 1);

}  // namespace cpinfer
