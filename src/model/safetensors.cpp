#include "model/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/file_text.h"
#include "core/json_parse.h"

namespace cpinfer {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit the reference reader uses
constexpr const char* kIndexName = "model.safetensors.index.json";

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

// A non-negative JSON integer, else an Error built from `what`.
uint64_t non_negative(const json& v, const std::string& what) {
  CPI_CHECK(v.is_number_integer() && (v.is_number_unsigned() || v.get<int64_t>() >= 0),
            "{} must be a non-negative integer, found {}", what, json_excerpt(v));
  return v.get<uint64_t>();
}

}  // namespace

std::vector<TensorInfo> parse_safetensors_header(const uint8_t* bytes, size_t size,
                                                 const std::string& path) {
  CPI_CHECK(size >= 8, "'{}' is too short to be a safetensors file: {} bytes, expected at "
            "least 8 (the header length)", path, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];  // little-endian u64
  CPI_CHECK(n <= kMaxHeaderBytes, "'{}': header length {} is absurd (limit {} bytes); not a "
            "safetensors file?", path, n, kMaxHeaderBytes);
  CPI_CHECK(n <= size - 8, "'{}': header length {} runs past the end of the file ({} bytes, "
            "so at most {})", path, n, size, size - 8);
  const char* hdr = reinterpret_cast<const char*>(bytes + 8);
  // A header is two levels deep; a deeply nested one would overflow the stack in dump().
  const json root = parse_json_text(std::string_view(hdr, n), fmt::format("'{}': the header", path),
                                    "; not a safetensors file?");
  CPI_CHECK(root.is_object(), "'{}': the header must be a JSON object, found {}", path,
            root.type_name());

  const uint8_t* data = bytes + 8 + n;
  const uint64_t data_size = size - 8 - n;
  std::vector<TensorInfo> out;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      CPI_CHECK(e.is_object(), "'{}': __metadata__ must be an object, found {}", path,
                e.type_name());
      continue;
    }
    const std::string where = fmt::format("tensor '{}' in '{}'", name, path);
    CPI_CHECK(e.is_object(), "{}: the entry must be an object, found {}", where, json_excerpt(e));
    CPI_CHECK(e.contains("dtype") && e["dtype"].is_string(), "{}: 'dtype' is missing or not a "
              "string", where);
    CPI_CHECK(e.contains("shape") && e["shape"].is_array(), "{}: 'shape' is missing or not a "
              "list", where);
    CPI_CHECK(e.contains("data_offsets") && e["data_offsets"].is_array() &&
                  e["data_offsets"].size() == 2,
              "{}: 'data_offsets' must be a list [begin, end], found {}", where,
              e.contains("data_offsets") ? json_excerpt(e["data_offsets"]) : "nothing");
    TensorInfo t;
    t.name = name;
    t.file = path;
    const std::string dt = e["dtype"].get<std::string>();
    CPI_CHECK(dtype_from_name(dt, &t.dtype), "{}: unknown or unsupported dtype '{}' (supported: "
              "F32, BF16, F16, F64, I64, I32, I8, U8, BOOL)", where, dt);
    uint64_t numel = 1;
    for (const json& d : e["shape"]) {
      uint64_t v = non_negative(d, fmt::format("{}: every shape dimension", where));
      CPI_CHECK(!__builtin_mul_overflow(numel, v, &numel), "{}: shape {} overflows", where,
                json_excerpt(e["shape"]));
      t.shape.push_back(int64_t(v));
    }
    uint64_t nbytes = 0;
    CPI_CHECK(!__builtin_mul_overflow(numel, uint64_t(dtype_size(t.dtype)), &nbytes),
              "{}: shape {} overflows", where, json_excerpt(e["shape"]));
    const uint64_t begin = non_negative(e["data_offsets"][0], where + ": data_offsets[0]");
    const uint64_t end = non_negative(e["data_offsets"][1], where + ": data_offsets[1]");
    CPI_CHECK(begin <= end, "{}: data_offsets [{}, {}] has begin > end", where, begin, end);
    CPI_CHECK(end <= data_size, "{}: data_offsets [{}, {}] end past the data area ({} bytes "
              "after the header)", where, begin, end, data_size);
    CPI_CHECK(end - begin == nbytes, "{}: data_offsets [{}, {}] hold {} bytes, but shape {} "
              "{} needs {}", where, begin, end, end - begin, shape_str(t.shape), dt, nbytes);
    t.data = data + begin;
    t.nbytes = size_t(nbytes);
    out.push_back(std::move(t));
  }

  // No two tensors may share bytes (empty tensors occupy none).
  std::vector<const TensorInfo*> by_start;
  for (const TensorInfo& t : out)
    if (t.nbytes) by_start.push_back(&t);
  std::sort(by_start.begin(), by_start.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_start.size(); ++i) {
    const TensorInfo* a = by_start[i - 1];
    const TensorInfo* b = by_start[i];
    CPI_CHECK(a->data + a->nbytes <= b->data, "'{}': tensors '{}' [{}, {}) and '{}' [{}, {}) "
              "overlap", path, a->name, a->data - data, a->data - data + a->nbytes, b->name,
              b->data - data, b->data - data + b->nbytes);
  }
  return out;
}

namespace {

std::string read_text(const std::string& path) {
  std::string text;
  CPI_CHECK(read_whole_file(path, &text), "cannot open '{}': {}", path, std::strerror(errno));
  return text;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void SafetensorsStore::add_file(const std::string& file_path) {
  auto f = std::make_shared<MappedFile>(file_path);
  std::vector<TensorInfo> ts = parse_safetensors_header(f->data(), f->size(), file_path);
  for (TensorInfo& t : ts) {
    auto it = tensors_.find(t.name);
    CPI_CHECK(it == tensors_.end(), "tensor '{}' appears twice: in '{}' and in '{}'", t.name,
              it->second.file, file_path);
    std::string name = t.name;
    tensors_.emplace(std::move(name), std::move(t));
  }
  files_.push_back(std::move(f));
}

SafetensorsStore SafetensorsStore::open(const std::string& path) {
  SafetensorsStore s;
  s.source_ = path;
  const fs::path p(path);
  fs::path index;
  if (fs::is_directory(p)) {
    // transformers' order: the single file wins over an index.
    if (fs::is_regular_file(p / "model.safetensors")) {
      s.add_file((p / "model.safetensors").string());
      return s;
    } else if (fs::is_regular_file(p / kIndexName)) {
      index = p / kIndexName;
    } else {
      fail("no model.safetensors or {} in '{}'", kIndexName, path);
    }
  } else {
    CPI_CHECK(fs::exists(p), "'{}' does not exist", path);
    if (p.filename().string().size() > 11 &&
        p.filename().string().ends_with(".index.json")) {
      index = p;
    } else {
      s.add_file(path);
      return s;
    }
  }

  // Sharded: the index maps every tensor name to its shard file (next to the index).
  const std::string ipath = index.string();
  const std::string itext = read_text(ipath);
  json root = parse_json_text(itext, fmt::format("'{}'", ipath), "; not a safetensors index?");
  CPI_CHECK(root.is_object() && root.contains("weight_map") && root["weight_map"].is_object(),
            "'{}': expected an object with a \"weight_map\" object", ipath);
  const json& wm = root["weight_map"];
  std::map<std::string, std::string> first_tensor;  // shard -> a tensor it should hold
  for (auto it = wm.begin(); it != wm.end(); ++it) {
    CPI_CHECK(it.value().is_string(), "'{}': weight_map entry for tensor '{}' must be a file "
              "name, found {}", ipath, it.key(), json_excerpt(it.value()));
    const std::string shard = it.value().get<std::string>();
    CPI_CHECK(!shard.empty() && shard.find('/') == std::string::npos && shard != "." &&
                  shard != "..",
              "'{}': weight_map entry for tensor '{}' names '{}', expected a plain file name "
              "in the same directory", ipath, it.key(), shard);
    first_tensor.emplace(shard, it.key());
  }
  const fs::path dir = index.parent_path();
  for (const auto& [shard, tensor] : first_tensor) {
    const fs::path sp = dir / shard;
    CPI_CHECK(fs::is_regular_file(sp), "shard '{}' listed in '{}' (for tensor '{}' and maybe "
              "others) is missing", sp.string(), ipath, tensor);
    s.add_file(sp.string());
  }
  for (auto it = wm.begin(); it != wm.end(); ++it) {
    const std::string shard = (dir / it.value().get<std::string>()).string();
    auto t = s.tensors_.find(it.key());
    CPI_CHECK(t != s.tensors_.end(), "tensor '{}' is listed in '{}' but missing from its shard "
              "'{}'", it.key(), ipath, shard);
    CPI_CHECK(t->second.file == shard, "tensor '{}' is listed in '{}' for shard '{}' but found "
              "in '{}'", it.key(), ipath, shard, t->second.file);
  }
  return s;
}

SafetensorsStore SafetensorsStore::from_tensors(std::string source,
                                                std::vector<TensorInfo> tensors,
                                                std::shared_ptr<const void> keep) {
  SafetensorsStore s;
  s.source_ = std::move(source);
  s.keep_ = std::move(keep);
  for (TensorInfo& t : tensors) {
    const std::string name = t.name;
    CPI_CHECK(s.tensors_.emplace(name, std::move(t)).second, "tensor '{}' appears twice in "
              "'{}'", name, s.source_);
  }
  return s;
}

bool SafetensorsStore::contains(const std::string& name) const { return tensors_.count(name); }

const TensorInfo& SafetensorsStore::get(const std::string& name) const {
  auto it = tensors_.find(name);
  CPI_CHECK(it != tensors_.end(), "tensor '{}' is missing from '{}'", name, source_);
  return it->second;
}

const TensorInfo& SafetensorsStore::get_checked(const std::string& name,
                                                const std::vector<int64_t>& shape) const {
  const TensorInfo& t = get(name);
  CPI_CHECK(t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16 ||
                t.dtype == DType::Q8_0,
            "tensor '{}' in {} has dtype {}, expected F32, BF16 or F16 (or Q8_0 in a GGUF file)",
            name, t.file,
            dtype_name(t.dtype));
  CPI_CHECK(t.shape == shape, "tensor '{}' in {} has shape {}, expected {}", name, t.file,
            shape_str(t.shape), shape_str(shape));
  return t;
}

std::vector<std::string> SafetensorsStore::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

uint64_t SafetensorsStore::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.nbytes;
  return n;
}

// ---- writing -----------------------------------------------------------------------

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata, int threads) {
  const size_t n = tensors.size();
  std::vector<uint64_t> nbytes(n);
  std::set<std::string> seen;
  for (size_t i = 0; i < n; ++i) {
    const TensorToWrite& t = tensors[i];
    CPI_CHECK(!t.name.empty() && t.name != "__metadata__", "writing '{}': invalid tensor name "
              "'{}'", path, t.name);
    CPI_CHECK(seen.insert(t.name).second, "writing '{}': tensor '{}' is given twice", path,
              t.name);
    CPI_CHECK(t.fill || t.fill_range, "writing '{}': tensor '{}' has no fill function", path,
              t.name);
    CPI_CHECK(t.dtype != DType::Q8_0, "writing '{}': tensor '{}' is Q8_0, which safetensors "
              "cannot hold", path, t.name);
    nbytes[i] = tensor_bytes(path, t);
  }

  // Layout: stable by dtype size, largest first, so each tensor is aligned to its element.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].dtype) > dtype_size(tensors[b].dtype);
  });
  std::vector<uint64_t> offset(n);
  uint64_t data_size = 0;
  for (size_t i : order) {
    offset[i] = data_size;
    data_size += nbytes[i];
  }

  nlohmann::ordered_json hdr = nlohmann::ordered_json::object();
  if (!metadata.empty()) hdr["__metadata__"] = metadata;
  for (size_t i = 0; i < n; ++i) {
    const TensorToWrite& t = tensors[i];
    hdr[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                   {"shape", t.shape},
                   {"data_offsets", {offset[i], offset[i] + nbytes[i]}}};
  }
  std::string json_text = hdr.dump();
  json_text.resize((json_text.size() + 7) / 8 * 8, ' ');
  std::string header(8, '\0');
  for (int i = 0; i < 8; ++i) header[size_t(i)] = char(uint8_t(uint64_t(json_text.size()) >> (8 * i)));
  header += json_text;
  for (uint64_t& o : offset) o += header.size();
  write_tensor_file(path, header, tensors, offset, header.size() + data_size, threads);
}

}  // namespace cpinfer
