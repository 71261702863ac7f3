// The decoder's weights as views into the mmapped safetensors (large matrices stay
// in the file's dtype; norms and biases, being small, are widened to f32 once).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dist/parallel_layout.h"
#include "kernels/linear.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace cpinfer {

struct LayerWeights {
  WeightView q, k, v, o;       // [Hq*D, H], [Hkv*D, H], [Hkv*D, H], [H, Hq*D]
  WeightView gate, up, down;   // [I, H], [I, H], [H, I]
  std::vector<float> q_bias, k_bias, v_bias;  // empty when the model has none
  std::vector<float> q_norm, k_norm;  // [D] per-head RMSNorm weights (Qwen3); else empty
  std::vector<float> input_norm, post_attention_norm;  // [H]
};

// The slice of the model one rank holds under tensor parallelism (context-parallel.md §2):
// q heads [q_head_begin, +num_q_heads), KV heads [kv_head_begin, +num_kv_heads) (a
// replicated head when tp > Hkv), FFN columns [ffn_begin, +ffn_size), LM-head (vocab) rows
// [vocab_begin, +vocab_size). The embedding is replicated.
// Example, qwen2.5-0.5b (14 q / 2 kv heads, ffn 4864) at tp 2, rank 1: q heads 7..13,
// KV head 1, FFN 2432..4863, vocab 75968..151935.
struct ShardSpec {
  int64_t q_head_begin = 0, num_q_heads = 0;
  int64_t kv_head_begin = 0, num_kv_heads = 0;
  int64_t ffn_begin = 0, ffn_size = 0;
  int64_t vocab_begin = 0, vocab_size = 0;
};
ShardSpec full_shard(const ModelConfig& config);
// Splits n items into `parts` near-equal contiguous pieces (the first n % parts get one
// more) and returns {begin, size} of piece `part`. Example: n 10, parts 4 -> sizes 3,3,2,2.
std::pair<int64_t, int64_t> even_split(int64_t n, int64_t parts, int64_t part);
// tp_rank of tp: checks intermediate_size % tp (and the head rules through the layout).
ShardSpec tp_shard(const ModelConfig& config, const ParallelLayout& layout);

struct ModelWeights {
  std::shared_ptr<SafetensorsStore> store;  // keeps the mapping alive
  WeightView embed;                          // [V, H]
  WeightView lm_head;                        // [shard vocab, H] (rows of the embedding when tied)
  ShardSpec shard;
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;             // [H]
  // Weights converted at load (model/weight_quantization.h) live here; the views above
  // then point into these buffers instead of the mapped files.
  std::vector<std::vector<uint8_t>> converted;
};

// model_dir: a Hugging Face directory (safetensors) or a GGUF model (model/gguf_model.h:
// tensors renamed, llama's q/k un-permuted, Q8_0 matrices used as they are).
// Checks every tensor's presence, dtype and shape against the config (errors name the
// tensor, the file, the expected and found shape) and builds the views.
// Only this rank's shard is read from the mapped file.
// release_checked: drop each matrix's mapped pages from the resident set right after its
// check (for weights that will be converted, e.g. quantized: the converter reads them again
// from the page cache, and the process never holds the whole checkpoint at once).
// Under tensor parallelism o_proj and down_proj are split by columns: a rank's shard is a
// window of every row of the checkpoint's matrix (ld > cols). Unless release_checked (a
// conversion follows, which writes contiguous copies itself), such a window is copied into
// its own contiguous matrix in `converted` (the same dtype and bytes, the rank's shard only)
// and the mapped pages of the original are released: the decode GEMV streams a window per
// row at a third to a half of its contiguous rate (bench/linear_bench ".../down_tp2_window"
// against ".../down_tp2"; AMD EPYC Zen 4, bf16, one thread: 8.1 against 19.0 GB/s).
ModelWeights load_model_weights(const ModelConfig& config, const std::string& model_dir,
                                const ShardSpec& shard, bool release_checked = false);

// A contiguous copy of the [rows, cols] window v (row stride v.ld >= cols): the same dtype
// and values with ld = cols, held in w.converted. Q8_0 windows are whole blocks (col_slice).
WeightView contiguous_copy(ModelWeights& w, const WeightView& v);

}  // namespace cpinfer
