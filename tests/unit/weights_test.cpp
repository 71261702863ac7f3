// A tensor-parallel rank's column windows (o_proj and down_proj split by input features)
// become contiguous copies at load: the same bytes as the window of the full matrix, row
// stride = cols, held in ModelWeights::converted; row shards (q, k, v, gate, up, the LM
// head) stay views of the mapped file; one rank (the full shard) copies nothing. With a
// conversion to follow (release_checked), the windows are left to it, and after
// --quantization int8 every view is contiguous, GGUF Q8_0 windows included.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "model/weight_quantization.h"
#include "model/weights.h"
#include "support/test_models.h"

namespace cpinfer {
namespace {

// Rank 1 of tp 2 for small_config's shapes (4 q / 2 KV heads of 32, intermediate 256).
ShardSpec second_of_two(const ModelConfig& c) {
  ShardSpec s;
  s.q_head_begin = c.num_q_heads / 2;
  s.num_q_heads = c.num_q_heads / 2;
  s.kv_head_begin = c.num_kv_heads / 2;
  s.num_kv_heads = c.num_kv_heads / 2;
  s.ffn_begin = c.intermediate_size / 2;
  s.ffn_size = c.intermediate_size / 2;
  std::tie(s.vocab_begin, s.vocab_size) = even_split(c.vocab_size, 2, 1);
  return s;
}

// Expects `part` to be contiguous and to hold, row by row, the bytes of columns
// [col0, col0 + part.cols) of `full`.
void expect_window_copy(const WeightView& part, const WeightView& full, int64_t col0,
                        const std::string& what) {
  ASSERT_EQ(part.dtype, full.dtype) << what;
  ASSERT_EQ(part.rows, full.rows) << what;
  EXPECT_EQ(part.ld, part.cols) << what << ": not contiguous";
  const int64_t row_bytes = dtype_bytes(part.dtype, part.cols);
  const auto* p = static_cast<const uint8_t*>(part.data);
  const auto* f = static_cast<const uint8_t*>(full.data) + dtype_bytes(full.dtype, col0);
  for (int64_t r = 0; r < part.rows; ++r)
    ASSERT_EQ(std::memcmp(p + r * row_bytes, f + r * dtype_bytes(full.dtype, full.ld),
                          size_t(row_bytes)), 0)
        << what << ": row " << r;
}

void expect_windows_copied(const ModelConfig& c, const ModelWeights& part,
                           const ModelWeights& full) {
  const int64_t q0 = part.shard.q_head_begin * c.head_dim, f0 = part.shard.ffn_begin;
  for (size_t l = 0; l < part.layers.size(); ++l) {
    const std::string tag = "layer " + std::to_string(l);
    expect_window_copy(part.layers[l].o, full.layers[l].o, q0, tag + " o_proj");
    expect_window_copy(part.layers[l].down, full.layers[l].down, f0, tag + " down_proj");
  }
}

TEST(Weights, TensorParallelColumnWindowsAreContiguousCopies) {
  const ModelConfig c = testing::small_config("qwen2.5-0.5b");
  const std::string dir = testing::test_model_config("weights_small_bf16", c, DType::BF16);
  const ModelWeights full = load_model_weights(c, dir, full_shard(c));
  EXPECT_TRUE(full.converted.empty()) << "one rank copied weights";
  const ModelWeights part = load_model_weights(c, dir, second_of_two(c));
  ASSERT_EQ(part.layers.size(), size_t(c.num_layers));
  EXPECT_EQ(part.converted.size(), size_t(2 * c.num_layers));  // o and down of every layer
  EXPECT_LT(part.layers[0].o.cols, full.layers[0].o.cols);
  expect_windows_copied(c, part, full);
  // Row shards stay views of the file (rank 1's q rows start qd / 2 rows in), not copies.
  const int64_t q0 = part.shard.q_head_begin * c.head_dim;
  const WeightView& q = part.layers[0].q;
  const size_t q_bytes = size_t(dtype_bytes(q.dtype, q.rows * q.cols));
  EXPECT_EQ(std::memcmp(q.data, static_cast<const uint8_t*>(full.layers[0].q.data) +
                                    dtype_bytes(DType::BF16, q0 * c.hidden_size), q_bytes), 0);
  for (const std::vector<uint8_t>& buf : part.converted)
    EXPECT_FALSE(q.data >= static_cast<const void*>(buf.data()) &&
                 q.data < static_cast<const void*>(buf.data() + buf.size()))
        << "q_proj was copied";
}

TEST(Weights, ConversionMakesEveryWindowContiguous) {
  const ModelConfig c = testing::small_config("qwen2.5-0.5b");
  ThreadPool pool(1);
  for (const bool gguf_q8 : {false, true}) {
    SCOPED_TRACE(gguf_q8 ? "GGUF with Q8_0 matrices" : "bf16 safetensors");
    const std::string dir =
        gguf_q8 ? testing::test_model_config("weights_small_q8", c, DType::F32, 1, "gguf", true)
                : testing::test_model_config("weights_small_bf16", c, DType::BF16);
    // Windows kept for the conversion to read (release_checked).
    ModelWeights part = load_model_weights(c, dir, second_of_two(c), true);
    EXPECT_GT(part.layers[0].o.ld, part.layers[0].o.cols);
    quantize_weights_q8_0(part, c, pool);
    for (const LayerWeights& L : part.layers) {
      EXPECT_EQ(L.o.dtype, DType::Q8_0);
      EXPECT_EQ(L.o.ld, L.o.cols);
      EXPECT_EQ(L.down.ld, L.down.cols);
    }
    if (gguf_q8) {  // the file's own Q8_0 blocks, copied as they are
      const ModelWeights full = load_model_weights(c, dir, full_shard(c));
      expect_windows_copied(c, part, full);
      // And the same copies when no conversion follows.
      expect_windows_copied(c, load_model_weights(c, dir, second_of_two(c)), full);
    }
  }
}

}  // namespace
}  // namespace cpinfer
