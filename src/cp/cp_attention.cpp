#include "cp/cp_attention.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/attention.h"

namespace cpinfer {

float lse_combine_weights(const float* s, int64_t n, int64_t stride, float* w) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, s[i * stride]);
  if (m == -INFINITY) {  // every shard empty: the result is empty, never NaN
    for (int64_t i = 0; i < n; ++i) w[i] = 0.f;
    return -INFINITY;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp2(double(s[i * stride]) - m);
  const float s_star = float(double(m) + std::log2(sum));
  for (int64_t i = 0; i < n; ++i)
    w[i] = s[i * stride] == -INFINITY ? 0.f : float(std::exp2(double(s[i * stride]) - s_star));
  return s_star;
}

CpAttention::CpAttention(Comm& comm, const CpRanks& ranks, int64_t hq, int64_t hkv, int64_t D)
    : comm_(comm), ranks_(ranks), hq_(hq), hkv_(hkv), D_(D) {
  // DCP gathers the q heads of a DCP group onto one KV head (§3: a DCP group holds
  // replicas of the same KV head).
  CPI_CHECK(ranks.dcp == 1 || hkv == 1,
            "decode context parallelism needs one KV head per rank (tp > num_kv_heads); this "
            "rank holds {}",
            hkv);
}

void CpAttention::plan(const CpStep& step, const KvCache& cache, ThreadPool& pool) {
  const int64_t KD = hkv_ * D_, QD = hq_ * D_, T = step.num_tokens(), N = step.prefill_buf_rows;
  const int64_t Td = int64_t(step.decode_rows.size()), G = int64_t(step.gather_rows.size());
  const int64_t dcp = ranks_.dcp, P = ranks_.pcp, GH = dcp * hq_;
  planned_ = &step;
  kbuf_.resize(size_t(N * KD));
  vbuf_.resize(size_t(N * KD));
  send_.resize(size_t(G * 2 * KD));
  gathered_.resize(size_t(std::max(P * G * 2 * KD, dcp * Td * QD)));
  lse_.resize(size_t(T * hq_));
  qd_.resize(size_t(Td * QD));
  qg_.resize(size_t(Td * GH * D_));
  od_.resize(size_t(Td * GH * D_));
  lsed_.resize(size_t(Td * GH));
  lse_all_.resize(size_t(dcp * Td * GH));
  scaled_.resize(size_t(dcp * Td * QD));
  mine_.resize(size_t(Td * QD));
  s_star_.resize(size_t(Td * hq_));
  s_all_.resize(size_t(P * Td * hq_));
  weights_.resize(size_t(std::max(dcp, P)));
  if (!step.pf_kv_rows.empty()) {
    // The contiguous K/V as a paged cache of page size 1: the "page table" lists buffer rows,
    // so a head chunk and a tail chunk can both point at their request's prefix.
    AttentionBatch b;
    b.num_seqs = int64_t(step.pf_kv_lens.size());
    b.q_indptr = step.pf_q_indptr.data();
    b.kv_lens = step.pf_kv_lens.data();
    b.page_indptr = step.pf_kv_indptr.data();
    b.page_indices = step.pf_kv_rows.data();
    b.causal = true;
    PagedKv shape{nullptr, nullptr, DType::F32, 1, hkv_, D_};
    plan_attention(paged_problem(b, hq_, shape, pool.size()), &prefill_plan_);
    prefill_ws_.reserve(prefill_plan_);
  }
  if (Td > 0) {
    // Each decode query sees every token of this rank's shard (non-causal).
    AttentionBatch b;
    b.num_seqs = Td;
    b.q_indptr = step.decode_q_indptr.data();
    b.kv_lens = step.decode_kv_lens.data();
    b.page_indptr = step.decode_page_indptr.data();
    b.page_indices = step.decode_pages.data();
    b.causal = false;
    plan_attention(paged_problem(b, GH, cache.layer(0), pool.size()), &decode_plan_);
    decode_ws_.reserve(decode_plan_);
  }
}

void CpAttention::run(const CpStep& step, int64_t layer, KvCache& cache, const float* q,
                      const float* k, const float* v, int64_t ld, float sm_scale, float* o,
                      ThreadPool& pool) {
  CPI_ASSERT(planned_ == &step);
  // A step of decodes only has no prefill work (no gather, no contiguous K/V).
  if (!step.pf_kv_rows.empty())
    prefill_attention(step, layer, cache, q, k, v, ld, sm_scale, o, pool);
  if (!step.decode_rows.empty())
    decode_attention(step, layer, cache, q, k, v, ld, sm_scale, o, pool);
}

void CpAttention::prefill_attention(const CpStep& step, int64_t layer, KvCache& cache,
                                    const float* q, const float* k, const float* v, int64_t ld,
                                    float sm_scale, float* o, ThreadPool& pool) {
  const int64_t KD = hkv_ * D_, T = step.num_tokens(), N = step.prefill_buf_rows;
  if (ranks_.pcp > 1) {
    // Pack each gathered row as [k | v] so one all-gather moves both, then restore:
    // buffer row i = gathered row restore[i] (padded global order).
    const int64_t G = int64_t(step.gather_rows.size());
    for (int64_t i = 0; i < G; ++i) {
      int64_t row = step.gather_rows[size_t(i)];
      std::memcpy(&send_[size_t(i * 2 * KD)], k + row * ld, size_t(KD) * 4);
      std::memcpy(&send_[size_t(i * 2 * KD + KD)], v + row * ld, size_t(KD) * 4);
    }
    comm_.all_gather(send_.data(), gathered_.data(), size_t(G * 2 * KD), DType::F32, Group::Pcp);
    CPI_ASSERT(int64_t(step.restore.size()) == N);
    for (int64_t i = 0; i < N; ++i) {
      const float* src = &gathered_[size_t(step.restore[size_t(i)] * 2 * KD)];
      std::memcpy(&kbuf_[size_t(i * KD)], src, size_t(KD) * 4);
      std::memcpy(&vbuf_[size_t(i * KD)], src + KD, size_t(KD) * 4);
    }
  } else {
    for (int64_t i = 0; i < T; ++i) {
      std::memcpy(&kbuf_[size_t(i * KD)], k + i * ld, size_t(KD) * 4);
      std::memcpy(&vbuf_[size_t(i * KD)], v + i * ld, size_t(KD) * 4);
    }
  }
  // Each rank caches only the real tokens it owns (slot -1 skips the rest).
  cache.append(layer, kbuf_.data(), vbuf_.data(), KD, step.prefill_buf_slots.data(), N);
  // Causal attention over the contiguous buffer (planned with page size 1, see plan()).
  CPI_ASSERT(int64_t(lse_.size()) == T * hq_);
  PagedKv kv{kbuf_.data(), vbuf_.data(), DType::F32, 1, hkv_, D_};
  run_attention(prefill_plan_, q, ld, kv, sm_scale, o, hq_ * D_, lse_.data(), prefill_ws_, pool);
}

void CpAttention::decode_attention(const CpStep& step, int64_t layer, KvCache& cache,
                                   const float* q, const float* k, const float* v, int64_t ld,
                                   float sm_scale, float* o, ThreadPool& pool) {
  const int64_t Td = int64_t(step.decode_rows.size()), QD = hq_ * D_, KD = hkv_ * D_;
  const int64_t dcp = ranks_.dcp, P = ranks_.pcp;
  // The owner writes the token's K/V before attending, so its shard includes it (§6.2).
  for (int64_t i = 0; i < Td; ++i) {
    int64_t row = step.decode_rows[size_t(i)];
    cache.append(layer, k + row * ld, v + row * ld, KD, &step.decode_slots[size_t(i)], 1);
  }
  // 1. DCP Q all-gather: [dcp][Td][QD] -> per token [dcp * hq heads][D] (DCP-rank order).
  for (int64_t i = 0; i < Td; ++i)
    std::memcpy(&qd_[size_t(i * QD)], q + step.decode_rows[size_t(i)] * ld, size_t(QD) * 4);
  const int64_t GH = dcp * hq_;  // gathered heads
  if (dcp > 1) {
    comm_.all_gather(qd_.data(), gathered_.data(), size_t(Td * QD), DType::F32, Group::Dcp);
    for (int64_t n = 0; n < dcp; ++n)
      for (int64_t i = 0; i < Td; ++i)
        std::memcpy(&qg_[size_t((i * dcp + n) * QD)], &gathered_[size_t((n * Td + i) * QD)],
                    size_t(QD) * 4);
  } else {
    std::copy(qd_.begin(), qd_.end(), qg_.begin());
  }
  // 2. Partial attention over this rank's shard (non-causal: every local token is in the
  //    past of the query, the current one included when this rank owns it).
  run_attention(decode_plan_, qg_.data(), GH * D_, cache.layer(layer), sm_scale, od_.data(),
                GH * D_, lsed_.data(), decode_ws_, pool);
  // 3. DCP combine: all-gather the LSEs, rescale by 2^(s_n - s*), reduce-scatter the heads
  //    back to their owners. mine_: [Td][QD] this rank's heads, s_star_: [Td][hq].
  std::vector<float>& w = weights_;
  if (dcp > 1) {
    comm_.all_gather(lsed_.data(), lse_all_.data(), size_t(Td * GH), DType::F32, Group::Dcp);
    const int64_t me = ranks_.dcp_rank;
    // scaled_: [owner dcp rank][Td][QD], the layout reduce-scatter splits by rank.
    for (int64_t i = 0; i < Td; ++i)
      for (int64_t h = 0; h < GH; ++h) {
        float s_star = lse_combine_weights(&lse_all_[size_t(i * GH + h)], dcp, Td * GH, w.data());
        const float wm = w[size_t(me)];
        const int64_t owner = h / hq_, lh = h % hq_;
        const float* src = &od_[size_t((i * GH + h) * D_)];
        float* dst = &scaled_[size_t(((owner * Td + i) * hq_ + lh) * D_)];
        for (int64_t d = 0; d < D_; ++d) dst[d] = src[d] * wm;
        if (owner == me) s_star_[size_t(i * hq_ + lh)] = s_star;
      }
    comm_.reduce_scatter_sum(scaled_.data(), mine_.data(), size_t(Td * QD), DType::F32, Group::Dcp);
  } else {
    std::copy(od_.begin(), od_.end(), mine_.begin());
    std::copy(lsed_.begin(), lsed_.end(), s_star_.begin());
  }
  // 4. PCP combine: all-gather s*, rescale, all-reduce; every PCP rank ends identical.
  if (P > 1) {
    comm_.all_gather(s_star_.data(), s_all_.data(), size_t(Td * hq_), DType::F32, Group::Pcp);
    const int64_t me = ranks_.pcp_rank;
    for (int64_t i = 0; i < Td; ++i)
      for (int64_t h = 0; h < hq_; ++h) {
        lse_combine_weights(&s_all_[size_t(i * hq_ + h)], P, Td * hq_, w.data());
        float* dst = &mine_[size_t((i * hq_ + h) * D_)];
        for (int64_t d = 0; d < D_; ++d) dst[d] *= w[size_t(me)];
      }
    comm_.all_reduce_sum(mine_.data(), mine_.size(), DType::F32, Group::Pcp);
  }
  for (int64_t i = 0; i < Td; ++i)
    std::memcpy(o + step.decode_rows[size_t(i)] * QD, &mine_[size_t(i * QD)], size_t(QD) * 4);
}

}  // namespace cpinfer
