#include "model/gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/error.h"

namespace cpinfer {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;          // GGML_MAX_DIMS
constexpr uint64_t kMaxAlignment = 1 << 20;

// Bounds-checked little-endian reads; every error names the file, what was being read
// and the byte offset.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const std::string& src) : p_(p), n_(n), src_(src) {}

  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }

  void need(uint64_t bytes, const std::string& what) const {
    CPI_CHECK(bytes <= left(), "'{}': truncated at byte {} reading {} ({} bytes needed, {} left)",
              src_, pos_, what, bytes, left());
  }
  template <typename T>
  T scalar(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));  // the host is little-endian (x86-64)
    pos_ += sizeof(T);
    return v;
  }
  uint32_t u32(const std::string& what) { return scalar<uint32_t>(what); }
  uint64_t u64(const std::string& what) { return scalar<uint64_t>(what); }
  // A string's length is checked against the bytes left before anything is allocated.
  std::string str(const std::string& what) {
    const uint64_t len = u64(what + " (its length)");
    CPI_CHECK(len <= left(), "'{}': {} at byte {} claims {} bytes, but only {} are left",
              src_, what, pos_ - 8, len, left());
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& src_;
};

// Bytes of one scalar element of type t; 0 for STRING (variable) and ARRAY; -1 unknown.
int scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::STRING: case GgufType::ARRAY: return 0;
  }
  return -1;
}

// Reads one scalar of type t into v (integer / float / bool / string fields).
void read_scalar(Reader& r, GgufType t, GgufValue& v, const std::string& what) {
  auto as_int = [&](int64_t x) { v.i = x; v.u = uint64_t(x); v.f = double(x); };
  switch (t) {
    case GgufType::U8: as_int(r.scalar<uint8_t>(what)); break;
    case GgufType::I8: as_int(r.scalar<int8_t>(what)); break;
    case GgufType::U16: as_int(r.scalar<uint16_t>(what)); break;
    case GgufType::I16: as_int(r.scalar<int16_t>(what)); break;
    case GgufType::U32: as_int(r.scalar<uint32_t>(what)); break;
    case GgufType::I32: as_int(r.scalar<int32_t>(what)); break;
    case GgufType::I64: as_int(r.scalar<int64_t>(what)); break;
    case GgufType::U64: v.u = r.scalar<uint64_t>(what); v.i = int64_t(v.u); v.f = double(v.u); break;
    case GgufType::BOOL: {
      const uint8_t b = r.scalar<uint8_t>(what);
      as_int(b != 0);
      break;
    }
    case GgufType::F32: {
      // The shortest decimal that rounds to this float, read as a double: the value the
      // writer meant (1e-6 stored as f32 reads back as 1e-6, not 9.99999997e-07).
      const float x = r.scalar<float>(what);
      v.f = std::isfinite(x) ? std::strtod(fmt::format("{}", x).c_str(), nullptr) : double(x);
      break;
    }
    case GgufType::F64: v.f = r.scalar<double>(what); break;
    case GgufType::STRING: v.s = r.str(what); break;
    case GgufType::ARRAY: CPI_ASSERT(false);
  }
}

GgufValue read_value(Reader& r, GgufType type, const std::string& src, const std::string& key) {
  const std::string what = fmt::format("the value of '{}'", key);
  GgufValue v;
  v.type = type;
  CPI_CHECK(scalar_size(type) >= 0, "'{}': metadata key '{}' has unknown value type {} (known: "
            "0..12)", src, key, uint32_t(type));
  if (type != GgufType::ARRAY) {
    read_scalar(r, type, v, what);
    return v;
  }
  v.elem = GgufType(r.u32(what + " (its element type)"));
  const int es = scalar_size(v.elem);
  CPI_CHECK(es >= 0, "'{}': array '{}' has unknown element type {} (known: 0..12)", src, key,
            uint32_t(v.elem));
  CPI_CHECK(v.elem != GgufType::ARRAY, "'{}': array '{}' holds arrays; nested arrays are not "
            "supported", src, key);
  v.count = r.u64(what + " (its length)");
  // Each element takes at least es bytes (a string at least its 8-byte length): a count
  // the rest of the file cannot hold is refused before anything is allocated.
  const uint64_t min_bytes = v.elem == GgufType::STRING ? 8 : uint64_t(es);
  CPI_CHECK(v.count <= r.left() / min_bytes, "'{}': array '{}' claims {} elements of {} "
            "bytes or more, but only {} bytes are left", src, key, v.count, min_bytes, r.left());
  if (v.elem == GgufType::STRING) {
    v.strs.reserve(size_t(v.count));
    for (uint64_t k = 0; k < v.count; ++k)
      v.strs.push_back(r.str(fmt::format("element {} of '{}'", k, key)));
    return v;
  }
  v.nums.reserve(size_t(v.count));
  const bool integer = v.elem != GgufType::F32 && v.elem != GgufType::F64;
  if (integer) v.ints.reserve(size_t(v.count));
  for (uint64_t k = 0; k < v.count; ++k) {
    GgufValue e;
    read_scalar(r, v.elem, e, what);
    v.nums.push_back(e.f);
    if (integer) v.ints.push_back(e.i);
  }
  return v;
}

// ggml's block size (elements) and bytes per block for the types cpinfer reads.
bool ggml_type_layout(uint32_t type, DType* dt, int64_t* block, int64_t* block_bytes) {
  switch (type) {
    case kGgmlF32: *dt = DType::F32; *block = 1; *block_bytes = 4; return true;
    case kGgmlF16: *dt = DType::F16; *block = 1; *block_bytes = 2; return true;
    case kGgmlBF16: *dt = DType::BF16; *block = 1; *block_bytes = 2; return true;
    case kGgmlQ8_0: *dt = DType::Q8_0; *block = kQ8BlockElems; *block_bytes = kQ8BlockBytes; return true;
    default: return false;
  }
}

std::string dims_str(const std::vector<uint64_t>& ne) { return fmt::format("[{}]", fmt::join(ne, ", ")); }

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) < 13 ? names[uint32_t(t)] : "unknown";
}

std::string ggml_type_name(uint32_t type) {
  // ggml.h's enum ggml_type (4 and 5, the removed Q4_2 / Q4_3, have no name).
  static const char* names[] = {
      "F32", "F16", "Q4_0", "Q4_1", nullptr, nullptr, "Q5_0", "Q5_1", "Q8_0", "Q8_1",
      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
      "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
      "IQ1_M", "BF16"};
  if (type < sizeof(names) / sizeof(names[0]) && names[type]) return names[type];
  return fmt::format("type {}", type);
}

bool GgufValue::is_integer() const {
  return type != GgufType::F32 && type != GgufType::F64 && type != GgufType::STRING &&
         type != GgufType::ARRAY && type != GgufType::BOOL;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

namespace {

const GgufValue& required(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.find(key);
  CPI_CHECK(v, "'{}': required metadata key '{}' is missing", g.source, key);
  return *v;
}

[[noreturn]] void wrong_type(const GgufFile& g, const std::string& key, const GgufValue& v,
                             const char* expected) {
  fail("'{}': metadata key '{}' must be {}, found {}", g.source, key, expected,
       gguf_type_name(v.type));
}

}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = required(*this, key);
  if (v.type != GgufType::STRING) wrong_type(*this, key, v, "a string");
  return v.s;
}

std::optional<std::string> GgufFile::get_string_opt(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = required(*this, key);
  if (!v.is_integer()) wrong_type(*this, key, v, "an integer");
  CPI_CHECK(v.type != GgufType::U64 || v.u <= uint64_t(INT64_MAX), "'{}': metadata key '{}' "
            "is too large: {}", source, key, v.u);
  return v.i;
}

std::optional<int64_t> GgufFile::get_int_opt(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_int(key);
}

double GgufFile::get_number(const std::string& key) const {
  const GgufValue& v = required(*this, key);
  if (!v.is_integer() && !v.is_float()) wrong_type(*this, key, v, "a number");
  return v.f;
}

std::optional<double> GgufFile::get_number_opt(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_number(key);
}

std::optional<bool> GgufFile::get_bool_opt(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::BOOL) wrong_type(*this, key, *v, "a bool");
  return v->i != 0;
}

const GgufValue& GgufFile::get_array(const std::string& key, GgufType elem) const {
  const GgufValue& v = required(*this, key);
  CPI_CHECK(v.is_array(), "'{}': metadata key '{}' must be an array of {}, found {}", source,
            key, gguf_type_name(elem), gguf_type_name(v.type));
  const bool ok = elem == GgufType::STRING ? v.elem == GgufType::STRING
                  : elem == GgufType::F32  ? v.elem != GgufType::STRING
                                           : v.elem != GgufType::STRING &&
                                                 v.elem != GgufType::F32 && v.elem != GgufType::F64;
  CPI_CHECK(ok, "'{}': metadata key '{}' must be an array of {}, found an array of {}", source,
            key, elem == GgufType::STRING ? "strings" : elem == GgufType::F32 ? "numbers" : "integers",
            gguf_type_name(v.elem));
  return v;
}

const TensorInfo* GgufFile::find_tensor(const std::string& name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

GgufFile parse_gguf(const uint8_t* bytes, size_t size, const std::string& source) {
  GgufFile g;
  g.source = source;
  Reader r(bytes, size, g.source);
  CPI_CHECK(size >= 24, "'{}' is too short to be a GGUF file: {} bytes (the header alone is "
            "24)", source, size);
  const uint32_t magic = r.u32("the magic");
  CPI_CHECK(magic == kMagic, "'{}' is not a GGUF file: it starts with bytes {:02x} {:02x} "
            "{:02x} {:02x}, expected \"GGUF\"", source, bytes[0], bytes[1], bytes[2], bytes[3]);
  g.version = r.u32("the version");
  CPI_CHECK(g.version == 3, "'{}': GGUF version {} is not supported (supported: 3{})", source,
            g.version, g.version == 1 || g.version == 2 ? "; re-convert the model with a recent "
            "llama.cpp" : "; a big-endian file?");
  const uint64_t n_tensors = r.u64("the tensor count");
  const uint64_t n_kv = r.u64("the metadata count");
  // A key/value pair takes at least 8 + 4 + 1 bytes, a tensor entry 8 + 4 + 4 + 8.
  CPI_CHECK(n_kv <= r.left() / 13, "'{}': the header claims {} metadata entries, more than the "
            "{} bytes left can hold", source, n_kv, r.left());
  CPI_CHECK(n_tensors <= r.left() / 24, "'{}': the header claims {} tensors, more than the {} "
            "bytes left can hold", source, n_tensors, r.left());

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = r.str(fmt::format("the key of metadata entry {}", k));
    const uint32_t type = r.u32(fmt::format("the value type of '{}'", key));
    GgufValue v = read_value(r, GgufType(type), source, key);
    CPI_CHECK(!g.has(key), "'{}': metadata key '{}' appears twice", source, key);
    g.metadata.emplace(std::move(key), std::move(v));
  }
  if (const GgufValue* a = g.find("general.alignment")) {
    CPI_CHECK(a->is_integer() && a->u >= 1 && a->u <= kMaxAlignment && (a->u & (a->u - 1)) == 0,
              "'{}': general.alignment must be a power of two in [1, {}], found {}", source,
              kMaxAlignment, a->is_integer() ? fmt::format("{}", a->i) : gguf_type_name(a->type));
    g.alignment = a->u;
  }

  struct Entry { std::vector<uint64_t> ne; uint32_t type; uint64_t offset; };
  std::vector<Entry> entries;
  std::set<std::string> names;
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo t;
    t.name = r.str(fmt::format("the name of tensor {}", k));
    t.file = source;
    const std::string where = fmt::format("'{}': tensor '{}'", source, t.name);
    CPI_CHECK(names.insert(t.name).second, "{} appears twice", where);
    Entry e;
    const uint32_t n_dims = r.u32(fmt::format("n_dims of tensor '{}'", t.name));
    CPI_CHECK(n_dims >= 1 && n_dims <= kMaxDims, "{} has {} dimensions (allowed: 1 to {})", where,
              n_dims, kMaxDims);
    for (uint32_t d = 0; d < n_dims; ++d) e.ne.push_back(r.u64(fmt::format("ne[{}] of tensor '{}'", d, t.name)));
    e.type = r.u32(fmt::format("the type of tensor '{}'", t.name));
    e.offset = r.u64(fmt::format("the offset of tensor '{}'", t.name));
    int64_t block = 0, block_bytes = 0;
    CPI_CHECK(ggml_type_layout(e.type, &t.dtype, &block, &block_bytes), "{} has type {}, which "
              "cpinfer does not read (supported: F32, F16, BF16, Q8_0)", where,
              ggml_type_name(e.type));
    uint64_t numel = 1;
    for (uint64_t d : e.ne) {
      CPI_CHECK(d <= uint64_t(INT64_MAX) && !__builtin_mul_overflow(numel, d, &numel), "{}: "
                "dimensions {} overflow", where, dims_str(e.ne));
      CPI_CHECK(numel <= (uint64_t(1) << 50), "{}: dimensions {} are absurd", where, dims_str(e.ne));
    }
    CPI_CHECK(e.ne[0] % uint64_t(block) == 0, "{}: {} rows of {} elements are not whole {} "
              "blocks of {}", where, ggml_type_name(e.type), e.ne[0], ggml_type_name(e.type), block);
    // Row-major shape: ne reversed (ne = [cols, rows] -> {rows, cols}).
    for (size_t d = e.ne.size(); d-- > 0;) t.shape.push_back(int64_t(e.ne[d]));
    t.nbytes = size_t(numel / uint64_t(block) * uint64_t(block_bytes));
    CPI_CHECK(e.offset % g.alignment == 0, "{}: data offset {} is not a multiple of the "
              "alignment {}", where, e.offset, g.alignment);
    entries.push_back(std::move(e));
    g.tensors.push_back(std::move(t));
  }

  const uint64_t data_start = (uint64_t(r.pos()) + g.alignment - 1) / g.alignment * g.alignment;
  const uint64_t data_size = data_start <= size ? size - data_start : 0;
  for (size_t k = 0; k < g.tensors.size(); ++k) {
    TensorInfo& t = g.tensors[k];
    const uint64_t off = entries[k].offset;
    CPI_CHECK(off <= data_size && t.nbytes <= data_size - off, "'{}': tensor '{}' ({} bytes at "
              "data offset {}) lies outside the file: the data area holds {} bytes from byte {}",
              source, t.name, t.nbytes, off, data_size, data_start);
    t.data = bytes + data_start + off;
  }
  std::vector<const TensorInfo*> by_start;
  for (const TensorInfo& t : g.tensors)
    if (t.nbytes) by_start.push_back(&t);
  std::sort(by_start.begin(), by_start.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data < b->data; });
  for (size_t k = 1; k < by_start.size(); ++k)
    CPI_CHECK(by_start[k - 1]->data + by_start[k - 1]->nbytes <= by_start[k]->data,
              "'{}': tensors '{}' and '{}' overlap", source, by_start[k - 1]->name,
              by_start[k]->name);
  return g;
}

MappedGguf open_gguf(const std::string& path) {
  MappedGguf m;
  m.file = std::make_shared<MappedFile>(path);
  m.gguf = parse_gguf(m.file->data(), m.file->size(), path);
  return m;
}

bool has_gguf_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".gguf";
}

}  // namespace cpinfer
