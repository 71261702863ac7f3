// A GGUF file as a cpinfer model: its metadata as a ModelConfig, its tensors under
// Hugging Face names (llama's Q/K rows put back in Hugging Face's order), and the name
// table the writer (model/gguf_writer.h) uses in the other direction.
// Architectures: llama, qwen2, qwen3 (general.architecture).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace cpinfer {

// The GGUF file a model path stands for, or "" when it holds a Hugging Face model:
// PATH itself when it names a .gguf file; for a directory without config.json, its one
// .gguf file (an Error when there are several, naming them). A directory with
// config.json is a Hugging Face model even if .gguf files lie next to it.
std::string find_gguf_model(const std::string& path);

// The config of a GGUF model: general.architecture and the <arch>.* keys (context_length,
// embedding_length, block_count, feed_forward_length, attention.head_count[_kv],
// attention.layer_norm_rms_epsilon, attention.key_length, rope.freq_base, rope.scaling.*,
// rope_freqs.weight), the vocabulary size from token_embd.weight, tied embeddings when
// output.weight is absent, q/k/v biases when blk.0.attn_q.bias is present, and the
// tokenizer.ggml.{bos,eos,eot,eom}_token_id ids. Validated like config.json
// (model_config.h); a missing required key is an Error naming the file and the key.
ModelConfig gguf_model_config(const GgufFile& g);

// The model's tensors under Hugging Face names (model.embed_tokens.weight, ...), pointing
// into the mapping, except llama's q/k weights and biases, which are un-permuted into
// buffers the store owns. Tensors cpinfer does not use are left out.
SafetensorsStore gguf_weight_store(const MappedGguf& m, const ModelConfig& c);

// GGUF tensor name of a Hugging Face one ("model.layers.3.self_attn.q_proj.weight" ->
// "blk.3.attn_q.weight"); "" when the name has no GGUF counterpart.
std::string gguf_tensor_name(const std::string& hf_name);
// The reverse ("blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"); "" when
// unknown.
std::string hf_tensor_name(const std::string& gguf_name);

// llama.cpp's rope_freqs.weight for a config with rope scaling (its form of Llama 3
// scaling): per rotated pair, the unscaled inverse frequency over the scaled one, as f32.
// Example: llama3 with factor 32 gives 1 for the fastest pairs and 32 for the slowest.
std::vector<float> rope_freq_factors(const ModelConfig& c);

// llama.cpp's convert_hf_to_gguf.py reorders the rows of llama's q and k projections (and
// biases) within every head, from Hugging Face's rotate-half RoPE layout (pair i = rows i
// and i + D/2) to GGML's interleaved one (pair i = rows 2i and 2i + 1). With D the head
// size, the Hugging Face row h*D + i*(D/2) + j (half i in {0, 1}, j < D/2) becomes GGUF row
// h*D + 2j + i. Example, D = 4, one head: HF rows [a0 a1 b0 b1] -> GGUF [a0 b0 a1 b1].
// Copies `rows` rows of `row_bytes` bytes from src to dst (which must not overlap),
// n_heads heads of rows / n_heads rows each; to_gguf picks the direction.
void permute_rope_rows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t row_bytes,
                       int64_t n_heads, bool to_gguf);

}  // namespace cpinfer
