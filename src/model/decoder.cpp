#include "model/decoder.h"

#include <cmath>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/linear_fused.h"
#include "model/rope.h"
#include "core/phase_profile.h"

namespace cpinfer {

Decoder::Decoder(const ModelConfig& config, const ModelWeights& weights, KvCache& cache,
                 ThreadPool& pool, Comm* comm, const CpRanks* cp_ranks)
    : config_(config),
      w_(weights),
      cache_(cache),
      pool_(pool),
      comm_(comm),
      tp_size_(comm ? comm->size(Group::Tp) : 1),
      inv_freq_(rope_inv_freq(config)) {
  // The plan copies the step's page table, at most every page of the cache (see
  // ModelRunner): reserved once, so planning never allocates for a longer context.
  attn_plan_.page_indices.reserve(size_t(cache.shape().num_pages));
  if (cp_ranks && cp_ranks->world() > 1) {
    CPI_ASSERT(comm);
    pcp_size_ = cp_ranks->pcp;
    cp_attention_ = std::make_unique<CpAttention>(*comm, *cp_ranks, w_.shard.num_q_heads,
                                                  w_.shard.num_kv_heads, config.head_dim);
  }
}

void Decoder::reserve(int64_t T) {
  if (T <= capacity_) return;
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, D = c.head_dim;
  const ShardSpec& sh = w_.shard;
  const int64_t qkv_width = (sh.num_q_heads + 2 * sh.num_kv_heads) * D;
  x_.resize(size_t(T * H));
  h_.resize(size_t(T * H));
  qkv_.resize(size_t(T * qkv_width));
  attn_.resize(size_t(T * sh.num_q_heads * D));
  lse_.resize(size_t(T * sh.num_q_heads));
  gu_.resize(size_t(T * 2 * sh.ffn_size));
  act_.resize(size_t(T * sh.ffn_size));
  rope_cos_.resize(size_t(T * D / 2));
  rope_sin_.resize(size_t(T * D / 2));
  capacity_ = T;
}

void Decoder::forward(const ForwardBatch& b, float* logits) {
  const ModelConfig& c = config_;
  // Local (this rank's TP shard) head counts and FFN width.
  const ShardSpec& sh = w_.shard;
  const CpStep* cp = b.cp;
  const int64_t T = cp ? cp->num_tokens() : b.num_tokens();
  const int64_t H = c.hidden_size, D = c.head_dim, I = sh.ffn_size;
  const int64_t Hq = sh.num_q_heads, Hkv = sh.num_kv_heads;
  const int64_t qd = Hq * D, kvd = Hkv * D, qkv_w = qd + 2 * kvd;
  CPI_CHECK(T > 0, "empty forward batch");
  CPI_ASSERT(cp_attention_ ? cp != nullptr : cp == nullptr);
  CPI_ASSERT(cp || (int64_t(b.positions.size()) == T && int64_t(b.slots.size()) == T));
  CPI_ASSERT(cp || (int64_t(b.q_indptr.size()) == b.num_seqs() + 1 && b.q_indptr.back() == T));
  reserve(T);
  const int32_t* tokens = cp ? cp->tokens.data() : b.tokens.data();
  const int32_t* positions = cp ? cp->positions.data() : b.positions.data();

  // Plan for the step: RoPE tables and the attention batch, shared by every layer.
  rope_tables(positions, T, inv_freq_.data(), D / 2, rope_cos_.data(), rope_sin_.data());
  AttentionBatch ab;
  ab.num_seqs = b.num_seqs();
  ab.q_indptr = b.q_indptr.data();
  ab.kv_lens = b.kv_lens.data();
  ab.page_indptr = b.page_indptr.data();
  ab.page_indices = b.page_indices.data();
  ab.causal = true;
  const float sm_scale = float(1.0 / std::sqrt(double(D)));
  // The attention plan (tasks, split-KV chunks, workspace) once per step; layers only run it.
  if (cp) {
    cp_attention_->plan(*cp, cache_, pool_);
  } else {
    plan_attention(paged_problem(ab, Hq, cache_.layer(0), pool_.size()), &attn_plan_);
    attn_ws_.reserve(attn_plan_);
  }
  float* x = x_.data();    // residual stream [T, H]
  float* h = h_.data();    // normed input of a sub-layer [T, H]
  float* qkv = qkv_.data();  // [T, q | k | v]
  {
    PhaseScope ps(Phase::Embedding, pool_);
    embedding_lookup(w_.embed, tokens, T, x, pool_);
  }

  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = w_.layers[size_t(l)];
    // h holds the previous layer's MLP output: x += h; h = norm(x).
    {
      PhaseScope ps(Phase::Norm, pool_);
      if (l == 0) rms_norm(x, L.input_norm.data(), DType::F32, T, H, c.rms_norm_eps, h, pool_);
      else add_rms_norm(x, h, L.input_norm.data(), DType::F32, T, H, c.rms_norm_eps, h, pool_);
    }
    auto bias = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
    // q | k | v in one pass over the pool; each task rotates the q and k heads it has just
    // computed (RoPE in the epilogue, while they are in cache).
    const LinearPart qkv_parts[3] = {{L.q, bias(L.q_bias), qkv, qkv_w, true},
                                     {L.k, bias(L.k_bias), qkv + qd, qkv_w, true},
                                     {L.v, bias(L.v_bias), qkv + qd + kvd, qkv_w, false}};
    const RotaryEpilogue rope{rope_cos_.data(), rope_sin_.data(), D};
    {
      PhaseScope ps(Phase::QkvRope, pool_);
      linear_fused(h, T, H, qkv_parts, pool_, &rope);
    }
    {
      PhaseScope ps(Phase::Attention, pool_);
      if (cp) {
        cp_attention_->run(*cp, l, cache_, qkv, qkv + qd, qkv + qd + kvd, qkv_w, sm_scale,
                           attn_.data(), pool_);
      } else {
        cache_.append(l, qkv + qd, qkv + qd + kvd, qkv_w, b.slots.data(), T);
        run_attention(attn_plan_, qkv, qkv_w, cache_.layer(l), sm_scale, attn_.data(), qd,
                      lse_.data(), attn_ws_, pool_);
      }
    }
    {
      PhaseScope ps(Phase::OProj, pool_);
      linear(attn_.data(), T, qd, L.o, nullptr, h, H, pool_);
    }
    if (tp_size_ > 1) {
      PhaseScope ps(Phase::TpAllReduce, pool_);
      comm_->all_reduce_sum(h, size_t(T * H), DType::F32, Group::Tp);
    }
    {
      // x += attn_out; h = norm(x)
      PhaseScope ps(Phase::Norm, pool_);
      add_rms_norm(x, h, L.post_attention_norm.data(), DType::F32, T, H, c.rms_norm_eps, h,
                   pool_);
    }
    {
      PhaseScope ps(Phase::GateUpSilu, pool_);
      linear_gate_up_silu(h, T, H, L.gate, L.up, gu_.data(), act_.data(), pool_);
    }
    {
      PhaseScope ps(Phase::Down, pool_);
      linear(act_.data(), T, I, L.down, nullptr, h, H, pool_);
    }
    if (tp_size_ > 1) {
      PhaseScope ps(Phase::TpAllReduce, pool_);
      comm_->all_reduce_sum(h, size_t(T * H), DType::F32, Group::Tp);
    }
  }

  // Final norm and LM head only for the rows whose logits are wanted.
  PhaseScope ps(Phase::LmHead, pool_);
  select_final_rows(b, T);
  const int64_t R = int64_t(cp ? cp->logit_rows.size() : b.logit_rows.size());
  if (R > 0) lm_head(R, logits);
}

void Decoder::select_final_rows(const ForwardBatch& b, int64_t T) {
  const int64_t H = config_.hidden_size;
  const float* x = x_.data();
  const float* h = h_.data();
  const CpStep* cp = b.cp;
  const std::vector<int64_t>& rows = cp ? cp->logit_rows : b.logit_rows;
  const int64_t R = int64_t(rows.size());
  last_.resize(size_t(R * H));
  // Under PCP the prefill requests' rows are spread over the ranks: all-gather the final
  // hidden state of the gathered rows and restore padded global order (§4 step 7).
  if (cp && pcp_size_ > 1 && !cp->gather_rows.empty()) {
    const int64_t G = int64_t(cp->gather_rows.size());
    final_send_.resize(size_t(G * H));
    for (int64_t i = 0; i < G; ++i) {
      const int64_t row = cp->gather_rows[size_t(i)];
      for (int64_t j = 0; j < H; ++j) final_send_[size_t(i * H + j)] = x[row * H + j] + h[row * H + j];
    }
    final_gathered_.resize(size_t(pcp_size_ * G * H));
    comm_->all_gather(final_send_.data(), final_gathered_.data(), size_t(G * H), DType::F32,
                      Group::Pcp);
  }
  for (int64_t r = 0; r < R; ++r) {
    const int64_t row = rows[size_t(r)];
    float* dst = &last_[size_t(r * H)];
    if (cp && cp->logit_from_gathered[size_t(r)]) {
      const float* src = &final_gathered_[size_t(cp->restore[size_t(row)] * H)];
      std::copy_n(src, H, dst);
    } else {
      CPI_ASSERT(row >= 0 && row < T);
      for (int64_t i = 0; i < H; ++i) dst[i] = x[row * H + i] + h[row * H + i];
    }
  }
}

void Decoder::lm_head(int64_t R, float* logits) {
  const ModelConfig& c = config_;
  const ShardSpec& sh = w_.shard;
  const int64_t H = c.hidden_size;
  rms_norm(last_.data(), w_.final_norm.data(), DType::F32, R, H, c.rms_norm_eps, last_.data(),
           pool_);
  if (tp_size_ == 1) {
    linear(last_.data(), R, H, w_.lm_head, nullptr, logits, c.vocab_size, pool_);
    return;
  }
  // Vocab-parallel LM head: each rank computes its rows of the vocabulary, then the
  // pieces are gathered rank-major and interleaved back to [R, V]. Example, V 10 at tp 2,
  // R 2: rank 0 sends [r0: v0..4 | r1: v0..4], rank 1 [r0: v5..9 | r1: v5..9].
  const int64_t Vs = sh.vocab_size;
  local_logits_.resize(size_t(R * Vs));
  linear(last_.data(), R, H, w_.lm_head, nullptr, local_logits_.data(), Vs, pool_);
  std::vector<int> counts(static_cast<size_t>(tp_size_)), displs(counts.size());
  std::vector<int64_t> vbegin(counts.size());
  for (int r = 0, off = 0; r < tp_size_; ++r) {
    auto [begin, vs] = even_split(c.vocab_size, tp_size_, r);
    vbegin[size_t(r)] = begin;
    counts[size_t(r)] = int(R * vs);
    displs[size_t(r)] = off;
    off += int(R * vs);
  }
  gathered_.resize(size_t(R * c.vocab_size));
  comm_->all_gather_v(local_logits_.data(), size_t(R * Vs), gathered_.data(), counts, displs,
                      DType::F32, Group::Tp);
  for (int r = 0; r < tp_size_; ++r) {
    const int64_t vs = counts[size_t(r)] / R;
    for (int64_t row = 0; row < R; ++row)
      std::copy_n(gathered_.data() + displs[size_t(r)] + row * vs, vs,
                  logits + row * c.vocab_size + vbegin[size_t(r)]);
  }
}

}  // namespace cpinfer
