// Weight quantization at load time (--quantization): the linear layers, the LM head and the
// embedding converted from the checkpoint's dtype to Q8_0 (kernels/quantize.h), which the
// linear kernels read directly. Decode reads each weight once per token, so bytes per weight
// set its speed: Q8_0 is 34 bytes per 32 weights, 0.53x of bf16.
#pragma once
#include <cstdint>
#include <string>

#include "core/thread_pool.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace cpinfer {

enum class WeightQuantization { None, Int8 };

// "none" | "int8"; anything else is an Error naming the accepted values.
WeightQuantization parse_weight_quantization(const std::string& s);
const char* weight_quantization_name(WeightQuantization q);

struct QuantizationReport {
  int64_t tensors = 0;         // views converted
  int64_t source_bytes = 0;    // their bytes in the checkpoint's dtype
  int64_t quantized_bytes = 0; // their bytes as Q8_0 (held in ModelWeights::converted)
  double seconds = 0;
};

// Converts this rank's q, k, v, o, gate, up, down views, the LM head and the embedding to
// Q8_0 (per block of 32 input features: one f16 scale, ggml's rounding), each held in
// w.converted, and releases the mapped pages of the originals. A tied LM head stays a row
// slice of the quantized embedding. Every rank quantizes what it holds; blocks run along
// K, so a tensor-parallel shard (whole rows, or columns cut at heads / FFN shards) gets the
// same blocks as one rank holding the whole tensor, provided a column cut falls on a
// 32-column boundary (checked: Error naming the tensor otherwise).
QuantizationReport quantize_weights_q8_0(ModelWeights& w, const ModelConfig& c, ThreadPool& pool);

}  // namespace cpinfer
