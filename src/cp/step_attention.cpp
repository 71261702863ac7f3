#include "cp/step_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/merge_state.h"

namespace cpinfer {

namespace {

AttentionBatch batch_of(const AttentionWork& w, bool causal) {
  AttentionBatch b;
  b.num_seqs = w.num_seqs();
  b.q_indptr = w.q_indptr.data();
  b.kv_lens = w.kv_lens.data();
  b.page_indptr = w.page_indptr.data();
  b.page_indices = w.page_indices.data();
  b.causal = causal;
  return b;
}

}  // namespace

StepAttention::StepAttention(Comm* comm, const CpLayout& layout, int64_t hq, int64_t hkv,
                             int64_t D, int64_t max_pages)
    : comm_(comm), layout_(layout), hq_(hq), hkv_(hkv), D_(D) {
  CPI_ASSERT(layout.world() == 1 || comm != nullptr);
  // DCP gathers the q heads of a DCP group onto one KV head (a DCP group holds replicas of
  // the same KV head; ParallelLayout enforces tp > num_kv_heads).
  CPI_CHECK(layout.dcp == 1 || hkv == 1,
            "decode context parallelism needs one KV head per rank (tp > num_kv_heads); this "
            "rank holds {}",
            hkv);
  // Plans copy the step's page tables, at most every page of the cache: reserved once, so
  // planning never allocates for a longer context.
  paged_plan_.page_indices.reserve(size_t(max_pages));
  shard_plan_.page_indices.reserve(size_t(max_pages));
}

void StepAttention::plan(const RankStep& step, const KvCache& cache, ThreadPool& pool) {
  const int64_t T = step.num_tokens();
  planned_ = &step;
  lse_.resize(size_t(T * hq_));
  if (layout_.world() == 1) {
    plan_attention(paged_problem(batch_of(step.paged, true), hq_, cache.layer(0), pool.size()),
                   &paged_plan_);
    paged_ws_.reserve(paged_plan_);
    return;
  }
  const int64_t KD = hkv_ * D_, QD = hq_ * D_, N = step.new_kv_rows;
  const int64_t G = int64_t(step.gather_rows.size()), Gc = int64_t(step.chunk_rows.size());
  const int64_t Ns = step.num_shard_queries(), dcp = layout_.dcp, P = layout_.pcp;
  const int64_t GH = dcp * hq_;
  kbuf_.resize(size_t(N * KD));
  vbuf_.resize(size_t(N * KD));
  send_.resize(size_t(std::max(G * 2 * KD, Gc * QD)));
  gathered_.resize(size_t(std::max({P * G * 2 * KD, dcp * Ns * QD, P * Gc * QD})));
  qs_.resize(size_t(Ns * QD));
  qg_.resize(size_t(Ns * GH * D_));
  od_.resize(size_t(Ns * GH * D_));
  lsed_.resize(size_t(Ns * GH));
  lse_all_.resize(size_t(dcp * Ns * GH));
  scaled_.resize(size_t(dcp * Ns * QD));
  mine_.resize(size_t(Ns * QD));
  s_star_.resize(size_t(Ns * hq_));
  s_all_.resize(size_t(P * Ns * hq_));
  weights_.resize(size_t(std::max(dcp, P)));
  if (!step.causal.page_indices.empty()) {
    // The new K/V buffer as a paged cache of page size 1 whose "pages" are buffer rows.
    PagedKv shape{nullptr, nullptr, DType::F32, 1, hkv_, D_};
    plan_attention(paged_problem(batch_of(step.causal, true), hq_, shape, pool.size()),
                   &causal_plan_);
    causal_ws_.reserve(causal_plan_);
  }
  if (Ns > 0) {
    // Every shard query sees every context token of this rank's shard (non-causal: the
    // shard holds only positions before the query, plus a decode token itself).
    plan_attention(paged_problem(batch_of(step.shard, false), GH, cache.layer(0), pool.size()),
                   &shard_plan_);
    shard_ws_.reserve(shard_plan_);
  }
}

void StepAttention::run(const RankStep& step, int64_t layer, KvCache& cache, const float* q,
                        const float* k, const float* v, int64_t ld, float sm_scale, float* o,
                        ThreadPool& pool) {
  CPI_ASSERT(planned_ == &step);
  if (layout_.world() == 1) {
    cache.append(layer, k, v, ld, step.slots.data(), step.num_tokens());
    run_attention(paged_plan_, q, ld, cache.layer(layer), sm_scale, o, hq_ * D_, lse_.data(),
                  paged_ws_, pool);
    return;
  }
  // A step of decodes only has no new-token work (no gather, no buffer).
  if (!step.causal.page_indices.empty())
    new_tokens(step, layer, cache, q, k, v, ld, sm_scale, o, pool);
  // The owner writes a decode token's K/V before the shard attention, so its shard includes
  // it (§6).
  const int64_t KD = hkv_ * D_;
  for (size_t i = 0; i < step.decode_rows.size(); ++i) {
    const int64_t row = step.decode_rows[i];
    cache.append(layer, k + row * ld, v + row * ld, KD, &step.decode_slots[i], 1);
  }
  if (step.num_shard_queries() > 0) shard(step, layer, cache, q, ld, sm_scale, o, pool);
}

void StepAttention::new_tokens(const RankStep& step, int64_t layer, KvCache& cache,
                               const float* q, const float* k, const float* v, int64_t ld,
                               float sm_scale, float* o, ThreadPool& pool) {
  const int64_t KD = hkv_ * D_, T = step.num_tokens(), N = step.new_kv_rows;
  if (layout_.pcp > 1) {
    // Pack each gathered row as [k | v] so one all-gather moves both, then restore:
    // buffer row i = gathered row restore[i] (padded global order).
    const int64_t G = int64_t(step.gather_rows.size());
    for (int64_t i = 0; i < G; ++i) {
      const int64_t row = step.gather_rows[size_t(i)];
      std::memcpy(&send_[size_t(i * 2 * KD)], k + row * ld, size_t(KD) * 4);
      std::memcpy(&send_[size_t(i * 2 * KD + KD)], v + row * ld, size_t(KD) * 4);
    }
    comm_->all_gather(send_.data(), gathered_.data(), size_t(G * 2 * KD), DType::F32, Group::Pcp);
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
  // Each rank caches only the real new tokens it owns (slot -1 skips the rest).
  cache.append(layer, kbuf_.data(), vbuf_.data(), KD, step.new_kv_slots.data(), N);
  // A bf16 cache: attend to the new tokens as the cache holds them (rounded), as one rank
  // and the later context attention do, so that the layout does not change the answer.
  if (cache.shape().dtype == DType::BF16)
    for (std::vector<float>* buf : {&kbuf_, &vbuf_})
      for (int64_t i = 0; i < N * KD; ++i) (*buf)[size_t(i)] = float(bf16((*buf)[size_t(i)]));
  PagedKv kv{kbuf_.data(), vbuf_.data(), DType::F32, 1, hkv_, D_};
  run_attention(causal_plan_, q, ld, kv, sm_scale, o, hq_ * D_, lse_.data(), causal_ws_, pool);
}

void StepAttention::shard(const RankStep& step, int64_t layer, KvCache& cache, const float* q,
                          int64_t ld, float sm_scale, float* o, ThreadPool& pool) {
  const int64_t QD = hq_ * D_, Ns = step.num_shard_queries();
  const int64_t Td = int64_t(step.decode_rows.size()), Gc = int64_t(step.chunk_rows.size());
  const int64_t dcp = layout_.dcp, P = layout_.pcp, GH = dcp * hq_;
  // 0. The shard queries qs_: [Td decode rows][P blocks of Gc chunk rows]. Under PCP the
  //    chunk rows differ per PCP rank: all-gather them (block p = PCP rank p's rows).
  for (int64_t i = 0; i < Td; ++i)
    std::memcpy(&qs_[size_t(i * QD)], q + step.decode_rows[size_t(i)] * ld, size_t(QD) * 4);
  if (Gc > 0) {
    float* chunk_q = P > 1 ? send_.data() : &qs_[size_t(Td * QD)];
    for (int64_t i = 0; i < Gc; ++i)
      std::memcpy(chunk_q + i * QD, q + step.chunk_rows[size_t(i)] * ld, size_t(QD) * 4);
    if (P > 1)
      comm_->all_gather(send_.data(), &qs_[size_t(Td * QD)], size_t(Gc * QD), DType::F32,
                        Group::Pcp);
  }
  // 1. DCP Q all-gather: [dcp][Ns][QD] -> per query [dcp * hq heads][D] (DCP-rank order).
  if (dcp > 1) {
    comm_->all_gather(qs_.data(), gathered_.data(), size_t(Ns * QD), DType::F32, Group::Dcp);
    for (int64_t n = 0; n < dcp; ++n)
      for (int64_t i = 0; i < Ns; ++i)
        std::memcpy(&qg_[size_t((i * dcp + n) * QD)], &gathered_[size_t((n * Ns + i) * QD)],
                    size_t(QD) * 4);
  }
  const float* qg = dcp > 1 ? qg_.data() : qs_.data();
  // 2. Partial attention over this rank's shard.
  run_attention(shard_plan_, qg, GH * D_, cache.layer(layer), sm_scale, od_.data(), GH * D_,
                lsed_.data(), shard_ws_, pool);
  // 3. DCP combine: all-gather the LSEs, rescale by the merge weights, reduce-scatter the
  //    heads back to their owners. mine_: [Ns][QD] this rank's heads, s_star_: [Ns][hq].
  float* w = weights_.data();
  const float* od = od_.data();
  const float* lse_shard = lsed_.data();
  if (dcp > 1) {
    comm_->all_gather(lsed_.data(), lse_all_.data(), size_t(Ns * GH), DType::F32, Group::Dcp);
    const int64_t me = layout_.dcp_rank;
    // scaled_: [owner dcp rank][Ns][QD], the layout reduce-scatter splits by rank.
    for (int64_t i = 0; i < Ns; ++i)
      for (int64_t h = 0; h < GH; ++h) {
        const float s_star = merge_weights(dcp, &lse_all_[size_t(i * GH + h)], Ns * GH, w);
        const float wm = w[me];
        const int64_t owner = h / hq_, lh = h % hq_;
        const float* src = &od[size_t((i * GH + h) * D_)];
        float* dst = &scaled_[size_t(((owner * Ns + i) * hq_ + lh) * D_)];
        for (int64_t d = 0; d < D_; ++d) dst[d] = wm == 0.f ? 0.f : src[d] * wm;
        if (owner == me) s_star_[size_t(i * hq_ + lh)] = s_star;
      }
    comm_->reduce_scatter_sum(scaled_.data(), mine_.data(), size_t(Ns * QD), DType::F32,
                              Group::Dcp);
  } else {
    std::copy(od_.begin(), od_.begin() + Ns * QD, mine_.begin());
    std::copy(lse_shard, lse_shard + Ns * hq_, s_star_.begin());
  }
  // 4. PCP combine: all-gather s*, rescale, all-reduce; every PCP rank ends identical, and
  //    s_star_ becomes the LSE over the whole context (needed to merge chunk rows).
  if (P > 1) {
    comm_->all_gather(s_star_.data(), s_all_.data(), size_t(Ns * hq_), DType::F32, Group::Pcp);
    const int64_t me = layout_.pcp_rank;
    for (int64_t i = 0; i < Ns; ++i)
      for (int64_t h = 0; h < hq_; ++h) {
        s_star_[size_t(i * hq_ + h)] = merge_weights(P, &s_all_[size_t(i * hq_ + h)], Ns * hq_, w);
        float* dst = &mine_[size_t((i * hq_ + h) * D_)];
        for (int64_t d = 0; d < D_; ++d) dst[d] = w[me] == 0.f ? 0.f : dst[d] * w[me];
      }
    comm_->all_reduce_sum(mine_.data(), size_t(Ns * QD), DType::F32, Group::Pcp);
  }
  // 5. Decode rows take the combined state; chunk rows merge it (block pcp_rank: this
  //    rank's own chunk queries) into their causal state in o / lse_.
  for (int64_t i = 0; i < Td; ++i)
    std::memcpy(o + step.decode_rows[size_t(i)] * QD, &mine_[size_t(i * QD)], size_t(QD) * 4);
  const int64_t first = Td + (P > 1 ? layout_.pcp_rank : 0) * Gc;
  for (int64_t i = 0; i < Gc; ++i) {
    const int64_t row = step.chunk_rows[size_t(i)];
    merge_state(1, hq_, D_, o + row * QD, QD, &lse_[size_t(row * hq_)], hq_,
                &mine_[size_t((first + i) * QD)], QD, &s_star_[size_t((first + i) * hq_)], hq_,
                o + row * QD, QD, &lse_[size_t(row * hq_)], hq_);
  }
}

}  // namespace cpinfer
