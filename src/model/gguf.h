// GGUF reading (llama.cpp's single-file format, version 3, little-endian): the header,
// the metadata key/value pairs and the tensor table, validated against the buffer's size,
// with every tensor a view into the buffer. What the keys mean for a model is in
// model/gguf_model.h; the tokenizer keys are in model/gguf_tokenizer.h.
//
// Layout of a file:
//   u32 magic "GGUF" | u32 version (3) | u64 tensor_count | u64 kv_count
//   kv_count x  { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
//   padding to general.alignment (default 32)
//   tensor data: each tensor at data_start + offset (offset a multiple of the alignment)
// A string is u64 length + bytes (no NUL); an array is u32 element type + u64 count + the
// elements.
//
// Dimensions are listed fastest-varying first: ne[0] is the number of columns. A row-major
// [rows, cols] matrix therefore appears as ne = [cols, rows], and TensorInfo::shape below is
// ne reversed. Example: Qwen2.5-0.5B's token_embd.weight has ne = [896, 151936]: 151936 rows
// (tokens) of 896 columns, shape {151936, 896}, the same as model.embed_tokens.weight in
// safetensors. A Q8_0 row of 896 columns is 28 blocks of 34 bytes (952 bytes).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "model/safetensors.h"

namespace cpinfer {

// GGUF metadata value types (the u32 before each value).
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8,
  ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);

// ggml tensor types cpinfer reads (ggml.h's enum ggml_type values).
inline constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ8_0 = 8, kGgmlBF16 = 30;
// ggml's name of a tensor type id ("Q4_K", ...), or "type <id>" when unknown.
std::string ggml_type_name(uint32_t type);

// One metadata value. Scalars: integers in `i` (unsigned ones that fit) or `u`, floats in
// `f`, booleans in `i` (0/1), strings in `s`. Arrays (of scalars or strings, not nested):
// `elem` is the element type, numbers in `nums` (as double; integer arrays also in `ints`),
// strings in `strs`.
struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType elem = GgufType::U8;  // arrays only
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> nums;
  std::vector<std::string> strs;
  uint64_t count = 0;  // arrays: number of elements
  bool is_integer() const;
  bool is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
  bool is_array() const { return type == GgufType::ARRAY; }
};

struct GgufFile {
  std::string source;     // the file, for messages
  uint32_t version = 0;
  uint64_t alignment = 32;
  std::map<std::string, GgufValue> metadata;
  std::vector<TensorInfo> tensors;  // in file order; shape = ne reversed (row-major)

  bool has(const std::string& key) const { return metadata.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;
  // Typed getters: an Error naming the file and the key when the key is absent (the
  // one-argument forms) or of another type.
  std::string get_string(const std::string& key) const;
  std::optional<std::string> get_string_opt(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  std::optional<int64_t> get_int_opt(const std::string& key) const;
  double get_number(const std::string& key) const;  // any integer or float type
  std::optional<double> get_number_opt(const std::string& key) const;
  std::optional<bool> get_bool_opt(const std::string& key) const;
  const GgufValue& get_array(const std::string& key, GgufType elem) const;
  const TensorInfo* find_tensor(const std::string& name) const;
};

// Parses and validates a whole GGUF file held in `bytes` (magic, version 3, counts and
// string/array lengths bounded by the bytes left, so nothing large is allocated for a
// short file; n_dims <= 4; known tensor types F32, F16, BF16, Q8_0 (others: an Error
// naming the tensor and the type); offsets aligned and inside the file; no overlaps; no
// duplicate keys or tensor names). `source` names the file in errors. Each TensorInfo::data
// points into `bytes`.
GgufFile parse_gguf(const uint8_t* bytes, size_t size, const std::string& source);

// A GGUF file mapped read-only (the tensors point into the mapping).
struct MappedGguf {
  std::shared_ptr<MappedFile> file;
  GgufFile gguf;
};
MappedGguf open_gguf(const std::string& path);

// Whether `path` names a .gguf file (by its extension).
bool has_gguf_extension(const std::string& path);

}  // namespace cpinfer
