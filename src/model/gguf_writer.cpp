#include "model/gguf_writer.h"

#include <cstring>
#include <set>

#include "core/error.h"

namespace cpinfer {

namespace {

constexpr uint64_t kAlignment = 32;  // GGUF's default (general.alignment is not written)

// Appends little-endian scalars and GGUF strings to the header.
struct Out {
  std::string b;
  template <typename T>
  void put(T v) {
    char tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.append(tmp, sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b += s;
  }
};

// One scalar of type t taken from v (integers from v.i, floats from v.f, strings from v.s).
void put_scalar(Out& o, GgufType t, int64_t i, double f, const std::string& s) {
  switch (t) {
    case GgufType::U8: case GgufType::BOOL: o.put<uint8_t>(uint8_t(i)); break;
    case GgufType::I8: o.put<int8_t>(int8_t(i)); break;
    case GgufType::U16: o.put<uint16_t>(uint16_t(i)); break;
    case GgufType::I16: o.put<int16_t>(int16_t(i)); break;
    case GgufType::U32: o.put<uint32_t>(uint32_t(i)); break;
    case GgufType::I32: o.put<int32_t>(int32_t(i)); break;
    case GgufType::U64: o.put<uint64_t>(uint64_t(i)); break;
    case GgufType::I64: o.put<int64_t>(i); break;
    case GgufType::F32: o.put<float>(float(f)); break;
    case GgufType::F64: o.put<double>(f); break;
    case GgufType::STRING: o.str(s); break;
    case GgufType::ARRAY: CPI_ASSERT(false);
  }
}

void put_value(Out& o, const GgufValue& v) {
  o.put<uint32_t>(uint32_t(v.type));
  if (v.type != GgufType::ARRAY) return put_scalar(o, v.type, v.i, v.f, v.s);
  o.put<uint32_t>(uint32_t(v.elem));
  if (v.elem == GgufType::STRING) {
    o.put<uint64_t>(v.strs.size());
    for (const std::string& s : v.strs) o.str(s);
  } else if (v.elem == GgufType::F32 || v.elem == GgufType::F64) {
    o.put<uint64_t>(v.nums.size());
    for (double f : v.nums) put_scalar(o, v.elem, 0, f, "");
  } else {
    o.put<uint64_t>(v.ints.size());
    for (int64_t i : v.ints) put_scalar(o, v.elem, i, 0, "");
  }
}

uint32_t ggml_type_of(const std::string& path, const TensorToWrite& t) {
  switch (t.dtype) {
    case DType::F32: return kGgmlF32;
    case DType::F16: return kGgmlF16;
    case DType::BF16: return kGgmlBF16;
    case DType::Q8_0: return kGgmlQ8_0;
    default: fail("writing '{}': tensor '{}' has dtype {}; GGUF tensors are written as F32, F16, "
                  "BF16 or Q8_0", path, t.name, dtype_name(t.dtype));
  }
}

uint64_t align(uint64_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

GgufValue gguf_string(std::string s) {
  GgufValue v;
  v.type = GgufType::STRING;
  v.s = std::move(s);
  return v;
}
namespace {
// An integer-typed value as the reader fills one: both integer fields.
GgufValue integer_value(GgufType type, uint32_t x) {
  GgufValue v;
  v.type = type;
  v.i = x;
  v.u = x;
  return v;
}
}  // namespace

GgufValue gguf_u32(uint32_t x) {
  GgufValue v = integer_value(GgufType::U32, x);
  v.f = float(x);
  return v;
}
GgufValue gguf_f32(float x) {
  GgufValue v;
  v.type = GgufType::F32;
  v.f = x;
  return v;
}
GgufValue gguf_bool(bool x) { return integer_value(GgufType::BOOL, x); }

void write_gguf(const std::string& path, const GgufMetadata& metadata,
                const std::vector<TensorToWrite>& tensors, int threads) {
  Out o;
  o.put<uint32_t>(0x46554747);  // "GGUF"
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors.size());
  o.put<uint64_t>(metadata.size());
  std::set<std::string> keys;
  for (const auto& [key, value] : metadata) {
    CPI_CHECK(keys.insert(key).second, "writing '{}': metadata key '{}' is given twice", path, key);
    o.str(key);
    put_value(o, value);
  }
  std::set<std::string> names;
  std::vector<uint64_t> offsets;
  uint64_t data = 0;  // offset in the data area
  for (const TensorToWrite& t : tensors) {
    CPI_CHECK(names.insert(t.name).second, "writing '{}': tensor '{}' is given twice", path, t.name);
    CPI_CHECK(!t.shape.empty() && t.shape.size() <= 4, "writing '{}': tensor '{}' has {} "
              "dimensions; GGUF holds 1 to 4", path, t.name, t.shape.size());
    o.str(t.name);
    o.put<uint32_t>(uint32_t(t.shape.size()));
    for (size_t d = t.shape.size(); d-- > 0;) o.put<uint64_t>(uint64_t(t.shape[d]));  // ne: fastest first
    o.put<uint32_t>(ggml_type_of(path, t));
    o.put<uint64_t>(data);
    offsets.push_back(data);
    data = align(data + tensor_bytes(path, t));
  }
  o.b.resize(size_t(align(o.b.size())), '\0');
  for (uint64_t& off : offsets) off += o.b.size();
  write_tensor_file(path, o.b, tensors, offsets, o.b.size() + data, threads);
}

}  // namespace cpinfer
