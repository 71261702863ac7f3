#include "model/decoder.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/linear_fused.h"
#include "kernels/sampling.h"
#include "model/rope.h"
#include "core/phase_profile.h"

namespace cpinfer {

Decoder::Decoder(const ModelConfig& config, const ModelWeights& weights, KvCache& cache,
                 ThreadPool& pool, Comm* comm, const CpLayout& cp)
    : config_(config),
      w_(weights),
      cache_(cache),
      pool_(pool),
      comm_(comm),
      attention_(comm, cp, weights.shard.num_q_heads, weights.shard.num_kv_heads,
                 config.head_dim, cache.shape().num_pages, config.num_layers),
      tp_size_(comm ? comm->size(Group::Tp) : 1),
      pcp_size_(int(cp.pcp)),
      inv_freq_(rope_inv_freq(config)),
      rope_scale_(rope_attention_factor(config)) {}

void Decoder::reserve(int64_t T) {
  if (T <= capacity_) return;
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, D = c.head_dim;
  const ShardSpec& sh = w_.shard;
  const int64_t qkv_width = (sh.num_q_heads + 2 * sh.num_kv_heads) * D;
  x_.reserve(size_t(T * H));
  h_.reserve(size_t(T * H));
  qkv_.reserve(size_t(T * qkv_width));
  attn_.reserve(size_t(T * sh.num_q_heads * D));
  gu_.reserve(size_t(T * 2 * sh.ffn_size));
  act_.reserve(size_t(T * sh.ffn_size));
  rope_cos_.resize(size_t(T * D / 2));
  rope_sin_.resize(size_t(T * D / 2));
  capacity_ = T;
}

void Decoder::forward(const RankStep& step, float* logits, int32_t* argmax_ids) {
  const ModelConfig& c = config_;
  // Local (this rank's TP shard) head counts and FFN width.
  const ShardSpec& sh = w_.shard;
  const int64_t T = step.num_tokens();
  const int64_t H = c.hidden_size, D = c.head_dim, I = sh.ffn_size;
  const int64_t Hq = sh.num_q_heads, Hkv = sh.num_kv_heads;
  const int64_t qd = Hq * D, kvd = Hkv * D, qkv_w = qd + 2 * kvd;
  // A PCP rank may run no row of a step (a decode-only step with fewer decodes than PCP
  // ranks): it still takes part in every collective.
  CPI_CHECK(T > 0 || step.layout.pcp > 1, "empty forward batch");
  CPI_ASSERT(int64_t(step.positions.size()) == T);
  reserve(T);
  const int32_t* tokens = step.tokens.data();

  // Plan for the step: RoPE tables and the attention work, shared by every layer.
  rope_tables(step.positions.data(), T, inv_freq_.data(), D / 2, rope_cos_.data(),
              rope_sin_.data(), rope_scale_);
  const float sm_scale = float(1.0 / std::sqrt(double(D)));
  attention_.plan(step, cache_, pool_);
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
    auto opt = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
    // q | k | v in one pass over the pool; each task normalises (Qwen3's q_norm / k_norm,
    // per head) and rotates the q and k heads it has just computed (in the epilogue, while
    // they are in cache).
    const LinearPart qkv_parts[3] = {
        {L.q, opt(L.q_bias), qkv, qkv_w, true, opt(L.q_norm)},
        {L.k, opt(L.k_bias), qkv + qd, qkv_w, true, opt(L.k_norm)},
        {L.v, opt(L.v_bias), qkv + qd + kvd, qkv_w, false}};
    const RotaryEpilogue rope{rope_cos_.data(), rope_sin_.data(), D, c.rms_norm_eps};
    {
      PhaseScope ps(Phase::QkvRope, pool_);
      linear_fused(h, T, H, qkv_parts, pool_, &rope);
    }
    {
      PhaseScope ps(Phase::Attention, pool_);
      attention_.run(step, l, cache_, qkv, qkv + qd, qkv + qd + kvd, qkv_w, sm_scale,
                     attn_.data(), pool_);
    }
    {
      PhaseScope ps(Phase::OProj, pool_);
      linear(attn_.data(), T, qd, L.o, nullptr, h, H, pool_);
    }
    if (tp_size_ > 1) {
      PhaseScope ps(Phase::TpAllReduce, pool_);
      TrafficScope traffic(comm_, Traffic::TpAllReduce);
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
      TrafficScope traffic(comm_, Traffic::TpAllReduce);
      comm_->all_reduce_sum(h, size_t(T * H), DType::F32, Group::Tp);
    }
  }

  // Final norm and LM head only for the rows whose logits are wanted.
  PhaseScope ps(Phase::LmHead, pool_);
  const int64_t R = int64_t(step.logit_rows.size());
  last_.resize(size_t(R * H));
  final_rows_.select(step, x_.data(), h_.data(), H, comm_, last_.data());
  if (R > 0) lm_head(R, logits, argmax_ids);
}

void Decoder::lm_head(int64_t R, float* logits, int32_t* argmax_ids) {
  const ModelConfig& c = config_;
  const ShardSpec& sh = w_.shard;
  const int64_t H = c.hidden_size;
  rms_norm(last_.data(), w_.final_norm.data(), DType::F32, R, H, c.rms_norm_eps, last_.data(),
           pool_);
  const int P = pcp_size_, ranks = tp_size_ * P;
  if (ranks == 1) {
    float* out = logits;
    if (argmax_ids) {
      local_logits_.resize(size_t(R * c.vocab_size));
      out = local_logits_.data();
    }
    linear(last_.data(), R, H, w_.lm_head, nullptr, out, c.vocab_size, pool_);
    if (argmax_ids) gather_argmax(R, 0, c.vocab_size, argmax_ids);
    return;
  }
  // Vocab-parallel LM head over every rank of the world: every rank holds the same rows
  // (TP ranks share them; under PCP every logit row comes through the final hidden gather),
  // so TP rank t computes its shard's vocabulary even_split(V, tp, t) and, under PCP,
  // only PCP rank p's part of it, even_split(shard, pcp, p). The pieces are gathered in world
  // rank order (g = p * tp + t) and interleaved back to [R, V]. Example, V 10, tp 2, pcp 1,
  // R 2: rank 0 sends [r0: v0..4 | r1: v0..4], rank 1 [r0: v5..9 | r1: v5..9].
  const int my_t = comm_->rank(Group::Tp), my_p = P > 1 ? comm_->rank(Group::Pcp) : 0;
  std::vector<int>& counts = lm_counts_;
  std::vector<int>& displs = lm_displs_;
  std::vector<int64_t>& vbegin = lm_vbegin_;
  counts.resize(size_t(ranks));
  displs.resize(size_t(ranks));
  vbegin.resize(size_t(ranks));
  int64_t my_begin = 0, my_n = 0;  // inside this TP rank's shard
  for (int p = 0, off = 0; p < P; ++p)
    for (int t = 0; t < tp_size_; ++t) {
      const auto [shard_begin, shard_n] = even_split(c.vocab_size, tp_size_, t);
      const auto [part_begin, part_n] = even_split(shard_n, P, p);
      const size_t g = size_t(p * tp_size_ + t);
      vbegin[g] = shard_begin + part_begin;
      counts[g] = int(R * part_n);
      displs[g] = off;
      off += int(R * part_n);
      if (t == my_t && p == my_p) my_begin = part_begin, my_n = part_n;
    }
  CPI_ASSERT(my_begin + my_n <= sh.vocab_size);
  WeightView part = w_.lm_head;  // rows [my_begin, my_begin + my_n) of the shard
  part.data = static_cast<const uint8_t*>(part.data) + dtype_bytes(part.dtype, my_begin * part.ld);
  part.rows = my_n;
  local_logits_.resize(size_t(R * my_n));
  if (my_n > 0) linear(last_.data(), R, H, part, nullptr, local_logits_.data(), my_n, pool_);
  if (argmax_ids) {  // greedy rows: one (value, id) pair per row and rank, not the logits
    gather_argmax(R, vbegin[size_t(my_p * tp_size_ + my_t)], my_n, argmax_ids);
    return;
  }
  gathered_.resize(size_t(R * c.vocab_size));
  TrafficScope traffic(comm_, Traffic::LogitsGather);
  comm_->all_gather_v(local_logits_.data(), size_t(R * my_n), gathered_.data(), counts, displs,
                      DType::F32, P > 1 ? Group::World : Group::Tp);
  for (size_t g = 0; g < size_t(ranks); ++g) {
    const int64_t vs = counts[g] / R;
    for (int64_t row = 0; row < R; ++row)
      std::copy_n(gathered_.data() + displs[g] + row * vs, vs,
                  logits + row * c.vocab_size + vbegin[g]);
  }
}

// Each rank's candidate for row r is the first largest logit of its part, kept as (the
// value's bits, its vocabulary id), id -1 for an empty part. The candidates are gathered
// over the LM head's ranks (world-rank order g = p * tp + t, as the logits would be) and
// merged in vocabulary order (TP shard t, then PCP part p) by merge_argmax_parts: ties keep
// the lowest id, as argmax() over the whole row. Example, V 10, tp 1, pcp 2, row
// [3 1 4 1 5 | 9 2 6 5 9]: rank 0 sends (5, id 4), rank 1 (9, id 5; the 9 at id 9 ties and
// loses) -> 5. 8 bytes per row and rank instead of the row's V / ranks logits.
void Decoder::gather_argmax(int64_t R, int64_t begin, int64_t n, int32_t* argmax_ids) {
  const int P = pcp_size_, ranks = tp_size_ * P;
  lm_best_.resize(size_t(2 * R));
  for (int64_t r = 0; r < R; ++r) {
    int32_t* mine = lm_best_.data() + 2 * r;
    mine[0] = 0;
    mine[1] = -1;
    if (n == 0) continue;
    const float* row = local_logits_.data() + r * n;
    const int32_t j = argmax_untimed(row, n, pool_);  // timed as the LM head
    std::memcpy(&mine[0], &row[j], sizeof(float));
    mine[1] = int32_t(begin + j);
  }
  lm_parts_.clear();
  if (ranks == 1) {
    lm_parts_.push_back(lm_best_.data());
  } else {
    lm_all_best_.resize(size_t(2 * R * ranks));
    {
      TrafficScope traffic(comm_, Traffic::LogitsGather);
      comm_->all_gather(lm_best_.data(), lm_all_best_.data(), size_t(2 * R), DType::I32,
                        P > 1 ? Group::World : Group::Tp);
    }
    for (int t = 0; t < tp_size_; ++t)
      for (int p = 0; p < P; ++p)
        lm_parts_.push_back(lm_all_best_.data() + size_t(p * tp_size_ + t) * size_t(2 * R));
  }
  merge_argmax_parts(lm_parts_, R, argmax_ids);
}

}  // namespace cpinfer
