// What a forward costs, for MFU / MBU figures (bench latency): FLOPs of a prefill and bytes
// read per decoded token, counted from the model's shapes (projection biases and norms are
// ignored: < 0.1% of either).
#pragma once
#include <cstdint>

#include "model/model_config.h"

namespace cpinfer {

// Multiply-adds of one token through the linear layers of all decoder layers:
// q, k, v, o, gate, up, down.
int64_t linear_macs_per_token(const ModelConfig& c);

// FLOPs (2 per multiply-add) of prefilling S tokens at once: the linear layers for every
// token, causal attention (QK^T and PV: 2 * 2 * D per query-key pair, S (S + 1) / 2 pairs
// per q head and layer), and the LM head for the last token only.
// Example, qwen2.5-0.5b (H 896, I 4864, 24 layers, 14 q / 2 kv heads of 64, V 151936):
// linear 357.8 M MACs per token; S = 512: 2 * 512 * 357.8 M = 366.4 G, attention
// 4 * 64 * 131328 * 14 * 24 = 11.3 G, LM head 0.27 G: 378.0 GFLOP.
double prefill_flops(const ModelConfig& c, int64_t S);

// Bytes read to decode one token after `context` cached tokens: every linear weight and the
// LM head once (weight_bytes per element), one embedding row, and the K and V of the whole
// context (kv_bytes_per_token: all layers, K and V).
double decode_bytes_per_token(const ModelConfig& c, double weight_bytes, int64_t context,
                              int64_t kv_bytes_per_token);

// Bytes per element of the weights as config.json's torch_dtype names them (float32: 4,
// bfloat16 / float16: 2; anything else: 2).
int64_t weight_bytes_of(const ModelConfig& c);

}  // namespace cpinfer
