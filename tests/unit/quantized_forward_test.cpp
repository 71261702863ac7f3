// --quantization int8 end to end on one rank (the real shapes' K = 896 / 4864 blocks are
// covered by linear_test; tensor-parallel shards by tests/cli/quantization_test.sh): the
// engine with Q8_0 weights and --int8-math exact (f32 activations) against the float64
// reference run on a copy of the model whose weights are those Q8_0 weights dequantized
// (written here as f32). The linear kernels compute with exactly d * q, so the same 1e-4
// bound as the f32 reference tests holds; a kernel reading the wrong block or scale is off
// by far more. The int8 logits must also differ from the unquantized ones (or the test would
// not show that quantization happened). With --int8-math dot (activations quantized too;
// linear_test checks those kernels against a float64 reference on the quantized
// activations) the logits must differ from the exact run's by more than 1e-4 (the
// activations were quantized); the test prints how far both are from the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "kernels/quantize.h"
#include "model/safetensors.h"
#include "support/nan_max.h"
#include "support/reference_compare.h"
#include "support/reference_model.h"
#include "support/test_models.h"

namespace cpinfer {
namespace {

namespace fs = std::filesystem;
constexpr double kTol = 1e-4;

bool is_quantized_tensor(const std::string& name) {
  const auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends("_proj.weight") || ends("embed_tokens.weight") || ends("lm_head.weight");
}

// A copy of `src` (config, tokenizer) whose quantized tensors hold dequant(Q8_0(w)) as f32.
std::string dequantized_copy(const std::string& src) {
  const std::string dst = testing::make_temp_dir("q8_dequantized");
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().extension() != ".safetensors") fs::copy(e.path(), fs::path(dst) / e.path().filename());
  const SafetensorsStore st = SafetensorsStore::open(src);
  std::vector<TensorToWrite> out;
  for (const std::string& name : st.names()) {
    const TensorInfo& t = st.get(name);
    EXPECT_EQ(t.dtype, DType::F32) << name;
    if (!is_quantized_tensor(name)) {
      out.push_back({name, t.dtype, t.shape,
                     [&t](uint8_t* d) { std::memcpy(d, t.data, t.nbytes); }, {}});
      continue;
    }
    out.push_back({name, DType::F32, t.shape, [&t](uint8_t* d) {
                     const int64_t cols = t.shape.back(), rows = t.numel() / cols;
                     std::vector<uint8_t> q(size_t(dtype_bytes(DType::Q8_0, cols)));
                     for (int64_t r = 0; r < rows; ++r) {
                       const auto* row = reinterpret_cast<const float*>(t.data) + r * cols;
                       quantize_row_q8_0(row, cols, q.data());
                       dequantize_row_q8_0(q.data(), cols, reinterpret_cast<float*>(d) + r * cols);
                     }
                   }, {}});
  }
  write_safetensors(dst + "/model.safetensors", out, {{"format", "pt"}});
  return dst;
}

// Prefill of n tokens (logits of rows 0, n/2, n-1), then 4 decode steps of given tokens.
std::vector<float> run(const std::string& dir, WeightQuantization q,
                       const std::vector<int32_t>& tokens, int64_t n,
                       Int8Math math = Int8Math::F32) {
  set_int8_math(math);
  struct Restore {
    ~Restore() { set_int8_math(Int8Math::Auto); }
  } restore;
  RunnerOptions ro;
  ro.max_cache_tokens = 1024;
  ro.quantization = q;
  ModelRunner runner(dir, ro, global_pool());
  const int64_t V = runner.config().vocab_size;
  SequenceState seq;
  const auto& l = runner.step({SequenceStep{&seq, tokens.data(), n, true}});
  std::vector<float> got;
  for (int64_t r : {int64_t(0), n / 2, n - 1})
    got.insert(got.end(), l.begin() + r * V, l.begin() + (r + 1) * V);
  for (int64_t p = n; p < int64_t(tokens.size()); ++p) {
    const auto& d = runner.step({SequenceStep{&seq, tokens.data() + p, 1, false}});
    got.insert(got.end(), d.begin(), d.end());
  }
  runner.release(seq);
  EXPECT_EQ(runner.page_pool().num_free(), runner.page_pool().num_pages());
  return got;
}

struct Case {
  std::string preset;
  int layers;
};

class QuantizedForward : public ::testing::TestWithParam<Case> {};

// The vocabulary cut to 4099 ids (make-model --vocab-size): the LM head is quantized and
// checked like every other matrix, and at the real 151936 rows it was most of the test's
// time (a dequantized f32 copy of it, and its float64 reference). Prompt ids below the cut's
// special tokens.
constexpr int64_t kVocab = 4099;

TEST_P(QuantizedForward, MatchesReferenceOfDequantizedWeights) {
  const std::string dir =
      testing::test_model(GetParam().preset, GetParam().layers, DType::F32, 1, kVocab);
  const std::string deq = dequantized_copy(dir);
  const int64_t n = 77;
  const std::vector<int32_t> tokens = testing::random_prompt(n + 4, 5, int32_t(kVocab - 257));
  const std::vector<float> int8 = run(dir, WeightQuantization::Int8, tokens, n);
  const std::vector<float> full = run(dir, WeightQuantization::None, tokens, n);

  testing::ReferenceModel ref(deq);
  const std::vector<int64_t> rows = {0, n / 2, n - 1, n, n + 1, n + 2, n + 3};
  const std::vector<double> want = ref.logits(tokens, rows);
  ASSERT_EQ(int8.size(), want.size());
  double err = 0, shift = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    testing::keep_max(err, std::fabs(double(int8[i]) - want[i]));
    testing::keep_max(shift, std::fabs(double(int8[i]) - double(full[i])));
  }
  std::printf("%s: int8 vs float64 reference of the dequantized weights: max |diff| %.3g; "
              "int8 vs unquantized: max |diff| %.3g (over %lld logits)\n",
              GetParam().preset.c_str(), err, shift, (long long)(want.size()));
  EXPECT_LE(err, kTol);
  EXPECT_GT(shift, 1e-3) << "the int8 run gives the unquantized logits: nothing was quantized";

  const std::vector<float> dot = run(dir, WeightQuantization::Int8, tokens, n, Int8Math::Dot);
  ASSERT_EQ(dot.size(), want.size());
  double dot_err = 0, dot_shift = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    testing::keep_max(dot_err, std::fabs(double(dot[i]) - want[i]));
    testing::keep_max(dot_shift, std::fabs(double(dot[i]) - double(int8[i])));
  }
  std::printf("%s: int8 dot (quantized activations) vs the same reference: max |diff| %.3g; "
              "vs int8 exact: %.3g\n", GetParam().preset.c_str(), dot_err, dot_shift);
  EXPECT_GT(dot_shift, 1e-4) << "--int8-math dot gives the exact logits: the activations "
                                "were not quantized";
  fs::remove_all(deq);
}

INSTANTIATE_TEST_SUITE_P(Models, QuantizedForward,
                         ::testing::Values(Case{"tiny", 2}),
                         [](const auto& info) {
                           std::string s = info.param.preset;
                           for (char& c : s) if (!isalnum(c)) c = '_';
                           return s;
                         });

}  // namespace
}  // namespace cpinfer
