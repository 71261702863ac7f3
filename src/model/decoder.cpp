#include "model/decoder.h"

#include <cmath>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "model/rope.h"

namespace cpinfer {

Decoder::Decoder(const ModelConfig& config, const ModelWeights& weights, KvCache& cache,
                 ThreadPool& pool)
    : config_(config), w_(weights), cache_(cache), pool_(pool), inv_freq_(rope_inv_freq(config)) {}

void Decoder::reserve(int64_t T) {
  if (T <= capacity_) return;
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, D = c.head_dim;
  const int64_t qkv_width = (c.num_q_heads + 2 * c.num_kv_heads) * D;
  x_.resize(size_t(T * H));
  h_.resize(size_t(T * H));
  qkv_.resize(size_t(T * qkv_width));
  attn_.resize(size_t(T * c.num_q_heads * D));
  lse_.resize(size_t(T * c.num_q_heads));
  gu_.resize(size_t(T * 2 * c.intermediate_size));
  act_.resize(size_t(T * c.intermediate_size));
  rope_cos_.resize(size_t(T * D / 2));
  rope_sin_.resize(size_t(T * D / 2));
  capacity_ = T;
}

void Decoder::forward(const ForwardBatch& b, float* logits) {
  const ModelConfig& c = config_;
  const int64_t T = b.num_tokens(), H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t Hq = c.num_q_heads, Hkv = c.num_kv_heads;
  const int64_t qd = Hq * D, kvd = Hkv * D, qkv_w = qd + 2 * kvd;
  CPI_CHECK(T > 0, "empty forward batch");
  CPI_ASSERT(int64_t(b.positions.size()) == T && int64_t(b.slots.size()) == T);
  CPI_ASSERT(int64_t(b.q_indptr.size()) == b.num_seqs() + 1 && b.q_indptr.back() == T);
  reserve(T);

  // Plan for the step: RoPE tables and the attention batch, shared by every layer.
  rope_tables(b.positions.data(), T, inv_freq_.data(), D / 2, rope_cos_.data(), rope_sin_.data());
  AttentionBatch ab;
  ab.num_seqs = b.num_seqs();
  ab.q_indptr = b.q_indptr.data();
  ab.kv_lens = b.kv_lens.data();
  ab.page_indptr = b.page_indptr.data();
  ab.page_indices = b.page_indices.data();
  ab.causal = true;
  const float sm_scale = float(1.0 / std::sqrt(double(D)));

  float* x = x_.data();    // residual stream [T, H]
  float* h = h_.data();    // normed input of a sub-layer [T, H]
  float* qkv = qkv_.data();  // [T, q | k | v]
  embedding_lookup(w_.embed, b.tokens.data(), T, x, pool_);

  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = w_.layers[size_t(l)];
    // h holds the previous layer's MLP output: x += h; h = norm(x).
    if (l == 0) rms_norm(x, L.input_norm.data(), DType::F32, T, H, c.rms_norm_eps, h, pool_);
    else add_rms_norm(x, h, L.input_norm.data(), DType::F32, T, H, c.rms_norm_eps, h, pool_);
    auto bias = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
    linear(h, T, H, L.q, bias(L.q_bias), qkv, qkv_w, pool_);
    linear(h, T, H, L.k, bias(L.k_bias), qkv + qd, qkv_w, pool_);
    linear(h, T, H, L.v, bias(L.v_bias), qkv + qd + kvd, qkv_w, pool_);
    rope_apply(qkv, T, Hq, D, qkv_w, rope_cos_.data(), rope_sin_.data(), pool_);
    rope_apply(qkv + qd, T, Hkv, D, qkv_w, rope_cos_.data(), rope_sin_.data(), pool_);
    cache_.append(l, qkv + qd, qkv + qd + kvd, qkv_w, b.slots.data(), T);
    paged_attention(qkv, qkv_w, Hq, cache_.layer(l), ab, sm_scale, attn_.data(), qd,
                    lse_.data(), pool_);
    linear(attn_.data(), T, qd, L.o, nullptr, h, H, pool_);
    // x += attn_out; h = norm(x)
    add_rms_norm(x, h, L.post_attention_norm.data(), DType::F32, T, H, c.rms_norm_eps, h, pool_);
    linear(h, T, H, L.gate, nullptr, gu_.data(), 2 * I, pool_);
    linear(h, T, H, L.up, nullptr, gu_.data() + I, 2 * I, pool_);
    silu_mul(gu_.data(), T, I, act_.data(), pool_);
    linear(act_.data(), T, I, L.down, nullptr, h, H, pool_);
  }

  // Final norm and LM head only for the rows whose logits are wanted.
  const int64_t R = int64_t(b.logit_rows.size());
  if (R == 0) return;
  last_.resize(size_t(R * H));
  for (int64_t r = 0; r < R; ++r) {
    int64_t row = b.logit_rows[size_t(r)];
    CPI_ASSERT(row >= 0 && row < T);
    for (int64_t i = 0; i < H; ++i) last_[size_t(r * H + i)] = x[row * H + i] + h[row * H + i];
  }
  rms_norm(last_.data(), w_.final_norm.data(), DType::F32, R, H, c.rms_norm_eps, last_.data(),
           pool_);
  linear(last_.data(), R, H, w_.lm_head, nullptr, logits, c.vocab_size, pool_);
}

}  // namespace cpinfer
