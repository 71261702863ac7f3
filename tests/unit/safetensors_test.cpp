// safetensors: write/read round trips (f32/bf16/f16, 0-d and empty tensors, shards) and
// every malformed-file case, each checking the message names the file and the tensor.
#include "support/temp_dir.h"
#include "model/safetensors.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/expect_error.h"

namespace cpinfer {
namespace {

namespace fs = std::filesystem;

using TempDir = testing::TempDir;

using testing::expect_error;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A raw file: 8-byte little-endian header length (as given), header, data.
std::string raw_file(const std::string& header, const std::string& data, uint64_t len) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(uint8_t(len >> (8 * i)));
  return s + header + data;
}
std::string raw_file(const std::string& header, const std::string& data) {
  return raw_file(header, data, header.size());
}

template <typename T>
TensorToWrite make_tensor(const std::string& name, DType dt, std::vector<int64_t> shape,
                          std::vector<T> values, bool ranged) {
  TensorToWrite t;
  t.name = name;
  t.dtype = dt;
  t.shape = std::move(shape);
  auto v = std::make_shared<std::vector<T>>(std::move(values));
  if (ranged) {
    t.fill_range = [v](uint8_t* dst, int64_t b, int64_t e) {
      std::memcpy(dst + b * int64_t(sizeof(T)), v->data() + b, size_t(e - b) * sizeof(T));
    };
  } else {
    t.fill = [v](uint8_t* dst) { std::memcpy(dst, v->data(), v->size() * sizeof(T)); };
  }
  return t;
}

template <typename T>
std::vector<T> read_back(const TensorInfo& t) {
  std::vector<T> out(size_t(t.numel()));
  EXPECT_EQ(t.nbytes, out.size() * sizeof(T));
  if (t.nbytes) std::memcpy(out.data(), t.data, t.nbytes);
  return out;
}

std::vector<uint16_t> bf16_bits(const std::vector<float>& f) {
  std::vector<uint16_t> out;
  for (float x : f) out.push_back(bf16(x).bits);
  return out;
}
std::vector<uint16_t> f16_bits(const std::vector<float>& f) {
  std::vector<uint16_t> out;
  for (float x : f) out.push_back(f16(x).bits);
  return out;
}

std::vector<TensorToWrite> sample_tensors(bool ranged) {
  std::vector<TensorToWrite> ts;
  // An odd-sized bf16 first: the writer must still align the f32 tensors.
  ts.push_back(make_tensor("b.bf16", DType::BF16, {3}, bf16_bits({1.5f, -2.0f, 0.25f}), ranged));
  ts.push_back(make_tensor("a.f32", DType::F32, {2, 3}, std::vector<float>{1, 2, 3, 4, 5, -6},
                           ranged));
  ts.push_back(make_tensor("c.f16", DType::F16, {2, 2}, f16_bits({0.5f, -1, 65504, 1e-3f}),
                           ranged));
  ts.push_back(make_tensor("scalar", DType::F32, {}, std::vector<float>{42.0f}, ranged));
  ts.push_back(make_tensor("empty", DType::F32, {0}, std::vector<float>{}, ranged));
  ts.push_back(make_tensor("empty2d", DType::BF16, {3, 0}, std::vector<uint16_t>{}, ranged));
  return ts;
}

void check_sample(const SafetensorsStore& s, const std::string& file) {
  EXPECT_EQ(s.names().size(), 6u);
  const TensorInfo& a = s.get_checked("a.f32", {2, 3});
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.file, file);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 4, 0u);
  EXPECT_EQ(read_back<float>(a), (std::vector<float>{1, 2, 3, 4, 5, -6}));
  const TensorInfo& b = s.get_checked("b.bf16", {3});
  EXPECT_EQ(b.dtype, DType::BF16);
  EXPECT_EQ(read_back<uint16_t>(b), bf16_bits({1.5f, -2.0f, 0.25f}));
  const TensorInfo& c = s.get_checked("c.f16", {2, 2});
  EXPECT_EQ(c.dtype, DType::F16);
  EXPECT_EQ(read_back<uint16_t>(c), f16_bits({0.5f, -1, 65504, 1e-3f}));
  const TensorInfo& sc = s.get_checked("scalar", {});
  EXPECT_TRUE(sc.shape.empty());
  EXPECT_EQ(sc.numel(), 1);
  EXPECT_EQ(read_back<float>(sc), std::vector<float>{42.0f});
  const TensorInfo& e = s.get_checked("empty", {0});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.nbytes, 0u);
  EXPECT_EQ(s.get_checked("empty2d", {3, 0}).nbytes, 0u);
  EXPECT_EQ(s.total_bytes(), 24u + 6u + 8u + 4u);
  EXPECT_TRUE(s.contains("scalar"));
  EXPECT_FALSE(s.contains("nope"));
}

TEST(Safetensors, RoundTripWholeAndRangedFills) {
  for (bool ranged : {false, true}) {
    for (int threads : {1, 3}) {
      TempDir d;
      const std::string f = d / "model.safetensors";
      write_safetensors(f, sample_tensors(ranged), {{"format", "pt"}}, threads);
      EXPECT_FALSE(fs::exists(f + ".tmp"));
      check_sample(SafetensorsStore::open(f), f);
      check_sample(SafetensorsStore::open(d.str()), f);  // the directory form
    }
  }
}

TEST(Safetensors, HeaderIsPaddedJsonWithMetadata) {
  TempDir d;
  const std::string f = d / "x.safetensors";
  write_safetensors(f, sample_tensors(false), {{"format", "pt"}, {"k", "v"}});
  std::ifstream in(f, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(all[size_t(i)]);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(all.size(), 8 + n + 42);
  const std::string header = all.substr(8, n);
  const size_t last = header.find_last_not_of(' ');
  EXPECT_EQ(header[last], '}');
  auto j = nlohmann::json::parse(header);
  EXPECT_EQ(j["__metadata__"]["format"], "pt");
  EXPECT_EQ(j["__metadata__"]["k"], "v");
  EXPECT_EQ(j["a.f32"]["dtype"], "F32");
  EXPECT_EQ(j["a.f32"]["data_offsets"], nlohmann::json::array({0, 24}));  // f32 laid out first
  EXPECT_EQ(j["scalar"]["shape"], nlohmann::json::array());
}

TEST(Safetensors, LargeRangedTensorSplitAcrossThreads) {
  TempDir d;
  const std::string f = d / "big.safetensors";
  const int64_t n = 3'000'001;  // several 4 MiB chunks, odd tail
  TensorToWrite t;
  t.name = "big";
  t.dtype = DType::F32;
  t.shape = {n};
  t.fill_range = [](uint8_t* dst, int64_t b, int64_t e) {
    float* p = reinterpret_cast<float*>(dst);
    for (int64_t i = b; i < e; ++i) p[i] = float(i % 1000);
  };
  write_safetensors(f, {t}, {}, 4);
  const SafetensorsStore s = SafetensorsStore::open(f);
  const float* p = reinterpret_cast<const float*>(s.get_checked("big", {n}).data);
  for (int64_t i = 0; i < n; i += 99991) ASSERT_EQ(p[i], float(i % 1000)) << i;
  EXPECT_EQ(p[n - 1], float((n - 1) % 1000));
}

TEST(Safetensors, ShardedIndexDirectory) {
  TempDir d;
  auto ts = sample_tensors(false);
  std::vector<TensorToWrite> s1(ts.begin(), ts.begin() + 3), s2(ts.begin() + 3, ts.end());
  write_safetensors(d / "model-00001-of-00002.safetensors", s1);
  write_safetensors(d / "model-00002-of-00002.safetensors", s2);
  nlohmann::json idx;
  idx["metadata"] = {{"total_size", 42}};
  for (auto& t : s1) idx["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (auto& t : s2) idx["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  write_bytes(d / "model.safetensors.index.json", idx.dump());
  const SafetensorsStore s = SafetensorsStore::open(d.str());
  EXPECT_EQ(s.names().size(), 6u);
  EXPECT_EQ(s.get("a.f32").file, d / "model-00001-of-00002.safetensors");
  EXPECT_EQ(s.get("scalar").file, d / "model-00002-of-00002.safetensors");
  EXPECT_EQ(read_back<float>(s.get("a.f32")), (std::vector<float>{1, 2, 3, 4, 5, -6}));
  // The index file itself can be opened too.
  EXPECT_EQ(SafetensorsStore::open(d / "model.safetensors.index.json").names().size(), 6u);
}

// ---- lookups ---------------------------------------------------------------------------

TEST(Safetensors, GetCheckedMessages) {
  TempDir d;
  const std::string f = d / "model.safetensors";
  std::vector<TensorToWrite> ts;
  ts.push_back(make_tensor("model.layers.0.self_attn.q_proj.weight", DType::F32, {896, 800},
                           std::vector<float>(896 * 800), false));
  ts.push_back(make_tensor("ids", DType::I32, {2}, std::vector<int32_t>{1, 2}, false));
  write_safetensors(f, ts);
  const SafetensorsStore s = SafetensorsStore::open(d.str());
  expect_error([&] { s.get_checked("model.layers.0.self_attn.q_proj.weight", {896, 896}); },
               {"tensor 'model.layers.0.self_attn.q_proj.weight' in " + f +
                " has shape [896, 800], expected [896, 896]"});
  expect_error([&] { s.get_checked("ids", {2}); }, {"'ids'", f, "I32", "F32, BF16 or F16"});
  expect_error([&] { s.get("model.norm.weight"); }, {"'model.norm.weight'", d.str(), "missing"});
  EXPECT_EQ(s.get("ids").dtype, DType::I32);  // plain get does not check dtypes
}

TEST(Safetensors, MissingFilesAndDirectories) {
  TempDir d;
  expect_error([&] { SafetensorsStore::open(d.str()); },
               {"model.safetensors", "model.safetensors.index.json", d.str()});
  expect_error([&] { SafetensorsStore::open(d / "nope.safetensors"); },
               {d / "nope.safetensors", "does not exist"});
}

// ---- malformed single files --------------------------------------------------------------

class BadFile : public ::testing::Test {
 protected:
  void expect_open_error(const std::string& bytes, std::vector<std::string> parts) {
    write_bytes(file_, bytes);
    parts.push_back(file_);
    expect_error([&] { SafetensorsStore::open(file_); }, parts);
  }
  TempDir dir_;
  std::string file_ = dir_ / "bad.safetensors";
};

TEST_F(BadFile, ShorterThanEightBytes) {
  expect_open_error("abcde", {"too short", "5 bytes"});
  expect_open_error("", {"too short", "0 bytes"});
}

TEST_F(BadFile, HeaderLengthPastEndOfFile) {
  expect_open_error(raw_file("{}", "", 1000), {"header length 1000", "past the end"});
}

TEST_F(BadFile, HeaderLengthAbsurd) {
  expect_open_error(raw_file("{}", "", uint64_t(1) << 40), {"absurd", "1099511627776"});
}

TEST_F(BadFile, HeaderNotJson) {
  expect_open_error(raw_file("{\"a\": ", ""), {"not valid JSON", "at byte"});
  expect_open_error(raw_file("[1, 2]  ", ""), {"must be a JSON object", "array"});
}

TEST_F(BadFile, MetadataNotObject) {
  expect_open_error(raw_file(R"({"__metadata__": 3})", ""), {"__metadata__"});
}

TEST_F(BadFile, EntryNotObject) {
  expect_open_error(raw_file(R"({"w": [1]})", ""), {"tensor 'w'", "object"});
}

TEST_F(BadFile, UnknownDtype) {
  expect_open_error(raw_file(R"({"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}})",
                             std::string(4, '\0')),
                    {"tensor 'w'", "dtype 'Q7'"});
  expect_open_error(raw_file(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})",
                             std::string(4, '\0')),
                    {"tensor 'w'", "'dtype'"});
}

TEST_F(BadFile, NegativeOrNonIntegerShape) {
  expect_open_error(raw_file(R"({"w": {"dtype": "F32", "shape": [-1, 2], "data_offsets": [0, 0]}})",
                             ""),
                    {"tensor 'w'", "shape dimension", "-1"});
  expect_open_error(raw_file(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})",
                             std::string(4, '\0')),
                    {"tensor 'w'", "shape dimension", "1.5"});
  expect_open_error(raw_file(R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})",
                             std::string(16, '\0')),
                    {"tensor 'w'", "'shape'"});
}

TEST_F(BadFile, DataOffsetsNotAPair) {
  expect_open_error(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})",
                             std::string(4, '\0')),
                    {"tensor 'w'", "data_offsets", "[begin, end]"});
  expect_open_error(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 2, 4]}})",
                             std::string(4, '\0')),
                    {"tensor 'w'", "data_offsets"});
  expect_open_error(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})",
                             std::string(4, '\0')),
                    {"tensor 'w'", "data_offsets[0]", "non-negative"});
}

TEST_F(BadFile, BeginAfterEnd) {
  expect_open_error(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})",
                             std::string(8, '\0')),
                    {"tensor 'w'", "[8, 4]", "begin > end"});
}

TEST_F(BadFile, EndPastDataArea) {
  expect_open_error(raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                             std::string(4, '\0')),
                    {"tensor 'w'", "past the data area", "4 bytes"});
}

TEST_F(BadFile, SizeDoesNotMatchShape) {
  expect_open_error(raw_file(R"({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})",
                             std::string(8, '\0')),
                    {"tensor 'w'", "hold 8 bytes", "[3] BF16 needs 6"});
}

TEST_F(BadFile, OverlappingTensors) {
  expect_open_error(
      raw_file(R"({"first": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
               R"( "second": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
               std::string(12, '\0')),
      {"'first'", "'second'", "overlap"});
  // Empty tensors occupy no bytes and overlap nothing.
  write_bytes(file_, raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                              R"( "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
                              std::string(8, '\0')));
  EXPECT_EQ(SafetensorsStore::open(file_).names().size(), 2u);
}

// ---- malformed sharded directories -------------------------------------------------------

class BadIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    write_safetensors(dir_ / "shard-1.safetensors",
                      {make_tensor("a", DType::F32, {1}, std::vector<float>{1}, false)});
    write_safetensors(dir_ / "shard-2.safetensors",
                      {make_tensor("b", DType::F32, {1}, std::vector<float>{2}, false)});
  }
  void write_index(const std::string& text) {
    write_bytes(dir_ / "model.safetensors.index.json", text);
  }
  TempDir dir_;
};

TEST_F(BadIndex, TensorMissingFromItsShard) {
  write_index(R"({"weight_map": {"a": "shard-1.safetensors", "c": "shard-2.safetensors"}})");
  expect_error([&] { SafetensorsStore::open(dir_.str()); },
               {"tensor 'c'", "model.safetensors.index.json", dir_ / "shard-2.safetensors"});
}

TEST_F(BadIndex, TensorInAnotherShard) {
  write_index(R"({"weight_map": {"a": "shard-2.safetensors", "b": "shard-2.safetensors",)"
              R"( "x": "shard-1.safetensors"}})");
  expect_error([&] { SafetensorsStore::open(dir_.str()); },
               {"tensor 'a'", dir_ / "shard-2.safetensors", dir_ / "shard-1.safetensors"});
}

TEST_F(BadIndex, ShardFileMissing) {
  write_index(R"({"weight_map": {"a": "shard-1.safetensors", "z": "shard-9.safetensors"}})");
  expect_error([&] { SafetensorsStore::open(dir_.str()); },
               {"shard-9.safetensors", "tensor 'z'", "missing"});
}

TEST_F(BadIndex, TensorInTwoShards) {
  write_safetensors(dir_ / "shard-3.safetensors",
                    {make_tensor("a", DType::F32, {1}, std::vector<float>{3}, false)});
  write_index(R"({"weight_map": {"a": "shard-1.safetensors", "b": "shard-3.safetensors"}})");
  expect_error([&] { SafetensorsStore::open(dir_.str()); }, {"tensor 'a'", "twice"});
}

TEST_F(BadIndex, IndexNotJsonOrWithoutWeightMap) {
  write_index("{\"weight_map\": ");
  expect_error([&] { SafetensorsStore::open(dir_.str()); },
               {"model.safetensors.index.json", "not valid JSON"});
  write_index(R"({"metadata": {}})");
  expect_error([&] { SafetensorsStore::open(dir_.str()); },
               {"model.safetensors.index.json", "weight_map"});
  write_index(R"({"weight_map": {"a": 7}})");
  expect_error([&] { SafetensorsStore::open(dir_.str()); }, {"tensor 'a'", "file name"});
  write_index(R"({"weight_map": {"a": "../shard-1.safetensors"}})");
  expect_error([&] { SafetensorsStore::open(dir_.str()); }, {"tensor 'a'", "plain file name"});
}

TEST_F(BadIndex, BadShardContentNamesTheShard) {
  write_bytes(dir_ / "shard-2.safetensors", "xyz");
  write_index(R"({"weight_map": {"a": "shard-1.safetensors", "b": "shard-2.safetensors"}})");
  expect_error([&] { SafetensorsStore::open(dir_.str()); },
               {dir_ / "shard-2.safetensors", "too short"});
}

// ---- writer errors -----------------------------------------------------------------------

TEST(SafetensorsWrite, Errors) {
  TempDir d;
  auto t = make_tensor("w", DType::F32, {1}, std::vector<float>{1}, false);
  const std::string bad_path = d / "no/such/dir/model.safetensors";
  expect_error([&] { write_safetensors(bad_path, {t}); }, {bad_path});
  expect_error([&] { write_safetensors(d / "x.safetensors", {t, t}); }, {"'w'", "twice"});
  TensorToWrite neg = t;
  neg.shape = {-2};
  expect_error([&] { write_safetensors(d / "x.safetensors", {neg}); }, {"'w'", "negative"});
  TensorToWrite nofill;
  nofill.name = "nf";
  nofill.dtype = DType::F32;
  nofill.shape = {1};
  expect_error([&] { write_safetensors(d / "x.safetensors", {nofill}); }, {"'nf'", "fill"});
  TensorToWrite throws = t;
  throws.fill = [](uint8_t*) { throw Error("generator broke"); };
  expect_error([&] { write_safetensors(d / "y.safetensors", {throws}, {}, 2); },
               {d / "y.safetensors", "generator broke"});
  EXPECT_FALSE(fs::exists(d / "y.safetensors"));
  EXPECT_FALSE(fs::exists(d / "y.safetensors.tmp"));
}

TEST(SafetensorsWrite, OverwritesAnExistingFile) {
  TempDir d;
  const std::string f = d / "m.safetensors";
  write_safetensors(f, {make_tensor("w", DType::F32, {2}, std::vector<float>{1, 2}, false)});
  write_safetensors(f, {make_tensor("v", DType::F32, {1}, std::vector<float>{3}, false)});
  const SafetensorsStore s = SafetensorsStore::open(f);
  EXPECT_EQ(s.names(), std::vector<std::string>{"v"});
}

}  // namespace
}  // namespace cpinfer
