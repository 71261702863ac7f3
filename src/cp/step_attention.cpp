#include "cp/step_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/merge_state.h"

namespace cpinfer {

namespace {

double timeline_clock() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

OverlapMode parse_overlap_mode(const std::string& s) {
  if (s == "auto") return OverlapMode::Auto;
  if (s == "on") return OverlapMode::On;
  if (s == "off") return OverlapMode::Off;
  fail("--overlap-comm '{}' is not one of auto, on, off", s);
}

StepAttention::StepAttention(Comm* comm, const CpLayout& layout, int64_t hq, int64_t hkv,
                             int64_t D, int64_t max_pages, int64_t num_layers)
    : comm_(comm), layout_(layout), hq_(hq), hkv_(hkv), D_(D), layer_times_(size_t(num_layers)) {
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
  const int64_t Gc = int64_t(step.chunk_rows.size()), Td = int64_t(step.decode_rows.size());
  const int64_t Ns = step.num_shard_queries(), dcp = layout_.dcp, P = layout_.pcp;
  const int64_t GH = dcp * hq_;
  // The K/V gather ships the cache's dtype: a bf16 cache stores rounded K/V anyway.
  kv_wire_ = cache.shape().dtype == DType::BF16 ? DType::BF16 : DType::F32;
  int64_t gathered_rows = 0;
  kv_counts_.clear();
  kv_displs_.clear();
  for (size_t k = 0; k < step.gather_counts.size(); ++k) {
    kv_counts_.push_back(int(step.gather_counts[k] * 2 * KD));
    kv_displs_.push_back(int(step.gather_displs[k] * 2 * KD));
    gathered_rows += step.gather_counts[k];
  }
  const size_t esz = dtype_size(kv_wire_);
  kv_send_.resize(size_t(int64_t(step.gather_rows.size()) * 2 * KD) * esz);
  kv_recv_.resize(size_t(gathered_rows * 2 * KD) * esz);
  kbuf_.resize(size_t(N * KD));
  vbuf_.resize(size_t(N * KD));
  bf16_rows_ = kv_wire_ == DType::BF16;
  if (bf16_rows_) {
    kb16_.resize(size_t(N * KD));
    vb16_.resize(size_t(N * KD));
  }
  // The shard-query gather (pcp > 1): each PCP rank sends its decodes' [q | k | v] rows and
  // its chunk queries; counts and displacements in floats.
  int64_t Dmax = 0;
  q_counts_.clear();
  q_displs_.clear();
  for (int64_t p = 0, off = 0; p < int64_t(step.decode_counts.size()); ++p) {
    const int64_t dp = step.decode_counts[size_t(p)];
    Dmax = std::max(Dmax, dp);
    q_counts_.push_back(int(dp * (QD + 2 * KD) + Gc * QD));
    q_displs_.push_back(int(off));
    off += q_counts_.back();
  }
  send_.resize(P > 1 ? size_t(Td * (QD + 2 * KD) + Gc * QD) : 0);  // no gather without PCP
  q_recv_.resize(P > 1 ? size_t(q_displs_.back() + q_counts_.back()) : 0);
  gathered_.resize(size_t(dcp * Ns * QD));
  qs_.resize(size_t(Ns * QD));
  qg_.resize(size_t(Ns * GH * D_));
  od_.resize(size_t(Ns * GH * D_));
  lsed_.resize(size_t(Ns * GH));
  mine_.resize(size_t(Ns * QD));
  s_star_.resize(size_t(Ns * hq_));
  // Exchange blocks of partial states, [O rows | LSEs] per destination rank; the PCP
  // combine's blocks hold the largest rank's decodes and chunk rows.
  combine_rows_ = Dmax + Gc;
  xsend_.resize(size_t(std::max(dcp * Ns, P * combine_rows_) * hq_ * (D_ + 1)));
  xrecv_.resize(xsend_.size());
  merged_.resize(size_t((Td + Gc) * QD));
  merged_lse_.resize(size_t((Td + Gc) * hq_));
  // The new K/V buffers as paged caches of page size 1 whose "pages" are buffer rows.
  const PagedKv rows_shape{nullptr, nullptr, kv_wire_, 1, hkv_, D_};
  if (P == 1 && !step.causal.page_indices.empty()) {
    plan_attention(paged_problem(batch_of(step.causal, true), hq_, rows_shape, pool.size()),
                   &causal_plan_);
    causal_ws_.reserve(causal_plan_);
  }
  if (P > 1 && N > 0) {
    plan_attention(paged_problem(batch_of(step.local, true), hq_, rows_shape, pool.size()),
                   &causal_plan_);
    causal_ws_.reserve(causal_plan_);
    plan_attention(paged_problem(batch_of(step.remote, false), hq_, rows_shape, pool.size()),
                   &remote_plan_);
    remote_ws_.reserve(remote_plan_);
    lkbuf_.resize(size_t(T * KD));
    lvbuf_.resize(size_t(T * KD));
    if (bf16_rows_) {
      lkb16_.resize(size_t(T * KD));
      lvb16_.resize(size_t(T * KD));
    }
    ro_.resize(size_t(T * QD));
    rlse_.resize(size_t(T * hq_));
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
  if (layout_.pcp > 1 ? step.new_kv_rows > 0 : !step.causal.page_indices.empty())
    new_tokens(step, layer, cache, q, k, v, ld, sm_scale, o, pool);
  if (step.num_shard_queries() > 0) shard(step, layer, cache, q, k, v, ld, sm_scale, o, pool);
}

namespace {

// Packs row `row` of k and v ([KD] each) as [k | v] in the wire dtype at dst.
void pack_kv(const float* k, const float* v, int64_t KD, DType wire, uint8_t* dst) {
  if (wire == DType::BF16) {
    bf16* d = reinterpret_cast<bf16*>(dst);
    for (int64_t j = 0; j < KD; ++j) d[j] = bf16(k[j]);
    for (int64_t j = 0; j < KD; ++j) d[KD + j] = bf16(v[j]);
  } else {
    std::memcpy(dst, k, size_t(KD) * 4);
    std::memcpy(dst + KD * 4, v, size_t(KD) * 4);
  }
}

// The inverse: one gathered [k | v] row into f32 rows k and v.
void unpack_kv(const uint8_t* src, int64_t KD, DType wire, float* k, float* v) {
  if (wire == DType::BF16) {
    const bf16* s = reinterpret_cast<const bf16*>(src);
    for (int64_t j = 0; j < KD; ++j) k[j] = float(s[j]);
    for (int64_t j = 0; j < KD; ++j) v[j] = float(s[KD + j]);
  } else {
    std::memcpy(k, src, size_t(KD) * 4);
    std::memcpy(v, src + KD * 4, size_t(KD) * 4);
  }
}

}  // namespace

PagedKv StepAttention::rows_view(const std::vector<float>& k, const std::vector<float>& v,
                                 std::vector<bf16>& k16, std::vector<bf16>& v16, int64_t n) {
  if (!bf16_rows_) return PagedKv{k.data(), v.data(), DType::F32, 1, hkv_, D_};
  const size_t count = size_t(n * hkv_ * D_);
  for (size_t i = 0; i < count; ++i) {
    k16[i] = bf16(k[i]);  // exact: the values are bf16 already
    v16[i] = bf16(v[i]);
  }
  return PagedKv{k16.data(), v16.data(), DType::BF16, 1, hkv_, D_};
}

void StepAttention::new_tokens(const RankStep& step, int64_t layer, KvCache& cache,
                               const float* q, const float* k, const float* v, int64_t ld,
                               float sm_scale, float* o, ThreadPool& pool) {
  const int64_t KD = hkv_ * D_, T = step.num_tokens(), N = step.new_kv_rows;
  const bool round_to_bf16 = cache.shape().dtype == DType::BF16;
  if (layout_.pcp == 1) {
    for (int64_t i = 0; i < T; ++i) {
      std::memcpy(&kbuf_[size_t(i * KD)], k + i * ld, size_t(KD) * 4);
      std::memcpy(&vbuf_[size_t(i * KD)], v + i * ld, size_t(KD) * 4);
    }
    // A bf16 cache: attend to the new tokens as the cache holds them (rounded), as one rank
    // and the later context attention do, so that the layout does not change the answer.
    if (round_to_bf16)
      for (std::vector<float>* buf : {&kbuf_, &vbuf_})
        for (int64_t i = 0; i < N * KD; ++i) (*buf)[size_t(i)] = float(bf16((*buf)[size_t(i)]));
    // Each rank caches only the real new tokens it owns (slot -1 skips the rest).
    cache.append(layer, kbuf_.data(), vbuf_.data(), KD, step.new_kv_slots.data(), N);
    const PagedKv kv = rows_view(kbuf_, vbuf_, kb16_, vb16_, N);
    run_attention(causal_plan_, q, ld, kv, sm_scale, o, hq_ * D_, lse_.data(), causal_ws_, pool);
    return;
  }
  // PCP: pack each real local row as [k | v] in the cache's dtype so one all-gather moves
  // both (no pads), and gather them -- on the comm worker while this rank attends to its
  // own rows (`local`), or first when overlap is off. Then restore (buffer row i = gathered
  // row restore[i], padded global order; a pad's row is zero: no real query sees it), write
  // the owned rows to the cache, attend to the other ranks' rows (`remote`) and merge.
  const int64_t G = int64_t(step.gather_rows.size());
  const size_t row_bytes = size_t(2 * KD) * dtype_size(kv_wire_);
  for (int64_t i = 0; i < G; ++i) {
    const int64_t row = step.gather_rows[size_t(i)];
    pack_kv(k + row * ld, v + row * ld, KD, kv_wire_, &kv_send_[size_t(i) * row_bytes]);
  }
  // The timeline starts when the collective does (after packing), so a gather's time is
  // the time spent inside it, as Comm's statistics count it.
  LayerTimes& lt = layer_times_[size_t(layer)];
  lt = {};
  lt.gather_start = timeline_clock();
  gather_count_ = G * 2 * KD;
  gather_layer_ = layer;
  // Captures only `this`, so std::function stores it in place: no allocation per layer.
  auto gather = [this] {
    TrafficScope traffic(comm_, Traffic::KvGather);
    comm_->all_gather_v(kv_send_.data(), size_t(gather_count_), kv_recv_.data(), kv_counts_,
                        kv_displs_, kv_wire_, Group::Pcp);
    layer_times_[size_t(gather_layer_)].gather_end = timeline_clock();
  };
  const bool overlap = this->overlap();
  if (overlap) worker_.start(gather);
  else gather();
  // Own rows as the cache will hold them (rounded for a bf16 cache, like the gathered ones).
  for (int64_t i = 0; i < T; ++i) {
    float* kd = &lkbuf_[size_t(i * KD)];
    float* vd = &lvbuf_[size_t(i * KD)];
    for (int64_t j = 0; j < KD; ++j) {
      kd[j] = round_to_bf16 ? float(bf16(k[i * ld + j])) : k[i * ld + j];
      vd[j] = round_to_bf16 ? float(bf16(v[i * ld + j])) : v[i * ld + j];
    }
  }
  const PagedKv local = rows_view(lkbuf_, lvbuf_, lkb16_, lvb16_, T);
  run_attention(causal_plan_, q, ld, local, sm_scale, o, hq_ * D_, lse_.data(), causal_ws_, pool);
  lt.local_end = timeline_clock();
  if (overlap) worker_.wait();
  lt.wait_end = timeline_clock();
  overlap_stats_.gather_s += lt.gather_end - lt.gather_start;
  overlap_stats_.exposed_s += overlap ? lt.wait_end - lt.local_end : lt.gather_end - lt.gather_start;
  overlap_stats_.layers += 1;
  CPI_ASSERT(int64_t(step.restore.size()) == N);
  for (int64_t i = 0; i < N; ++i) {
    const int64_t r = step.restore[size_t(i)];
    float* kd = &kbuf_[size_t(i * KD)];
    float* vd = &vbuf_[size_t(i * KD)];
    if (r < 0) {
      std::fill_n(kd, KD, 0.f);
      std::fill_n(vd, KD, 0.f);
    } else {
      unpack_kv(&kv_recv_[size_t(r) * row_bytes], KD, kv_wire_, kd, vd);
    }
  }
  // Each rank caches only the real new tokens it owns (slot -1 skips the rest).
  cache.append(layer, kbuf_.data(), vbuf_.data(), KD, step.new_kv_slots.data(), N);
  const PagedKv remote = rows_view(kbuf_, vbuf_, kb16_, vb16_, N);
  run_attention(remote_plan_, q, ld, remote, sm_scale, ro_.data(), hq_ * D_, rlse_.data(),
                remote_ws_, pool);
  merge_state(T, hq_, D_, o, hq_ * D_, lse_.data(), hq_, ro_.data(), hq_ * D_, rlse_.data(), hq_,
              o, hq_ * D_, lse_.data(), hq_, &pool);
}

void StepAttention::shard(const RankStep& step, int64_t layer, KvCache& cache, const float* q,
                          const float* k, const float* v, int64_t ld, float sm_scale, float* o,
                          ThreadPool& pool) {
  const int64_t QD = hq_ * D_, KD = hkv_ * D_, Ns = step.num_shard_queries();
  const int64_t Td = int64_t(step.decode_rows.size()), Gc = int64_t(step.chunk_rows.size());
  const int64_t dcp = layout_.dcp, P = layout_.pcp, GH = dcp * hq_;
  // 0. The shard queries qs_: P blocks, block p = PCP rank p's [decodes][Gc chunk rows]
  //    (one block without PCP: this rank's rows). Under PCP they differ per PCP rank: one
  //    all-gather of [decode q | k | v rows][chunk q rows] from every PCP rank. Each decode
  //    token's owner writes its K/V before the attention, so its shard includes it (§6).
  //    Example, P 2, rank 0 runs decodes d0 d2, rank 1 d1, Gc 2: qs_ = [d0 d2 c0 c1 | d1 c0'
  //    c1'], decode_slots in the order d0 d2 d1.
  if (P == 1) {
    for (int64_t i = 0; i < Td; ++i) {
      const int64_t row = step.decode_rows[size_t(i)];
      std::memcpy(&qs_[size_t(i * QD)], q + row * ld, size_t(QD) * 4);
      cache.append(layer, k + row * ld, v + row * ld, KD, &step.decode_slots[size_t(i)], 1);
    }
    for (int64_t i = 0; i < Gc; ++i)
      std::memcpy(&qs_[size_t((Td + i) * QD)], q + step.chunk_rows[size_t(i)] * ld,
                  size_t(QD) * 4);
  } else {
    float* out = send_.data();
    for (int64_t i = 0; i < Td; ++i, out += QD + 2 * KD) {
      const int64_t row = step.decode_rows[size_t(i)];
      std::memcpy(out, q + row * ld, size_t(QD) * 4);
      std::memcpy(out + QD, k + row * ld, size_t(KD) * 4);
      std::memcpy(out + QD + KD, v + row * ld, size_t(KD) * 4);
    }
    for (int64_t i = 0; i < Gc; ++i, out += QD)
      std::memcpy(out, q + step.chunk_rows[size_t(i)] * ld, size_t(QD) * 4);
    {
      TrafficScope traffic(comm_, Traffic::QueryGather);
      comm_->all_gather_v(send_.data(), send_.size(), q_recv_.data(), q_counts_, q_displs_,
                          DType::F32, Group::Pcp);
    }
    int64_t row = 0, d = 0;  // shard query row, decode index in shard order
    for (int64_t p = 0; p < P; ++p) {
      const float* in = &q_recv_[size_t(q_displs_[size_t(p)])];
      for (int64_t i = 0; i < step.decode_counts[size_t(p)]; ++i, ++d, ++row) {
        std::memcpy(&qs_[size_t(row * QD)], in, size_t(QD) * 4);
        cache.append(layer, in + QD, in + QD + KD, KD, &step.decode_slots[size_t(d)], 1);
        in += QD + 2 * KD;
      }
      for (int64_t i = 0; i < Gc; ++i, ++row, in += QD)
        std::memcpy(&qs_[size_t(row * QD)], in, size_t(QD) * 4);
    }
    CPI_ASSERT(row == Ns);
  }
  // 1. DCP Q all-gather: [dcp][Ns][QD] -> per query [dcp * hq heads][D] (DCP-rank order).
  if (dcp > 1) {
    TrafficScope traffic(comm_, Traffic::QueryGather);
    comm_->all_gather(qs_.data(), gathered_.data(), size_t(Ns * QD), DType::F32, Group::Dcp);
    for (int64_t n = 0; n < dcp; ++n)
      for (int64_t i = 0; i < Ns; ++i)
        std::memcpy(&qg_[size_t((i * dcp + n) * QD)], &gathered_[size_t((n * Ns + i) * QD)],
                    size_t(QD) * 4);
  }
  const float* qg = dcp > 1 ? qg_.data() : qs_.data();
  // 2. Partial attention over this rank's shard: od_ [Ns][GH][D], lsed_ [Ns][GH].
  run_attention(shard_plan_, qg, GH * D_, cache.layer(layer), sm_scale, od_.data(), GH * D_,
                lsed_.data(), shard_ws_, pool);
  // 3. DCP combine, one all-to-all: DCP rank n gets every rank's partial state of its own
  //    heads n * hq .. n * hq + hq - 1 and merges them (merge_states, in rank order).
  //    Block n of the exchange: [Ns][hq][D] O rows, then [Ns][hq] LSEs. mine_: [Ns][QD]
  //    this rank's heads over the DCP group's shards, s_star_: [Ns][hq] their LSEs.
  if (dcp > 1) {
    TrafficScope traffic(comm_, Traffic::DcpCombine);
    const int64_t blk = Ns * hq_ * (D_ + 1);
    for (int64_t n = 0; n < dcp; ++n) {
      float* ob = &xsend_[size_t(n * blk)];
      float* lb = ob + Ns * QD;
      for (int64_t i = 0; i < Ns; ++i) {
        std::memcpy(ob + i * QD, &od_[size_t((i * GH + n * hq_) * D_)], size_t(QD) * 4);
        std::memcpy(lb + i * hq_, &lsed_[size_t(i * GH + n * hq_)], size_t(hq_) * 4);
      }
    }
    comm_->all_to_all(xsend_.data(), xrecv_.data(), size_t(blk), DType::F32, Group::Dcp);
    merge_states(dcp, Ns, hq_, D_, xrecv_.data(), blk, QD, xrecv_.data() + Ns * QD, blk, hq_,
                 mine_.data(), QD, s_star_.data(), hq_, &pool);
  } else {
    std::copy(od_.begin(), od_.begin() + Ns * QD, mine_.begin());
    std::copy(lsed_.begin(), lsed_.begin() + Ns * hq_, s_star_.begin());
  }
  // 4. PCP combine, one all-to-all: PCP rank p needs the states of its block of shard
  //    queries (its decodes and its chunk rows). Block p of the exchange, for the largest
  //    block Mx = max decodes + Gc: [Mx][hq][D] O rows (rank p's decodes, then its chunk
  //    rows; the rest unused), then [Mx][hq] LSEs. merged_ / merged_lse_: [Td decodes][Gc
  //    chunk rows] of this rank, over the whole context.
  const int64_t M = Td + Gc;
  if (P > 1) {
    TrafficScope traffic(comm_, Traffic::PcpCombine);
    const int64_t Mx = combine_rows_, blk = Mx * hq_ * (D_ + 1);
    for (int64_t p = 0, first = 0; p < P; ++p) {
      const int64_t rows = step.decode_counts[size_t(p)] + Gc;
      float* ob = &xsend_[size_t(p * blk)];
      float* lb = ob + Mx * QD;
      std::memcpy(ob, &mine_[size_t(first * QD)], size_t(rows * QD) * 4);
      std::memcpy(lb, &s_star_[size_t(first * hq_)], size_t(rows * hq_) * 4);
      first += rows;
    }
    comm_->all_to_all(xsend_.data(), xrecv_.data(), size_t(blk), DType::F32, Group::Pcp);
    merge_states(P, M, hq_, D_, xrecv_.data(), blk, QD, xrecv_.data() + Mx * QD, blk, hq_,
                 merged_.data(), QD, merged_lse_.data(), hq_, &pool);
  } else {
    std::copy(mine_.begin(), mine_.begin() + M * QD, merged_.begin());
    std::copy(s_star_.begin(), s_star_.begin() + M * hq_, merged_lse_.begin());
  }
  // 5. Decode rows take the combined state; chunk rows merge it into their causal state in
  //    o / lse_.
  for (int64_t i = 0; i < Td; ++i)
    std::memcpy(o + step.decode_rows[size_t(i)] * QD, &merged_[size_t(i * QD)], size_t(QD) * 4);
  for (int64_t i = 0; i < Gc; ++i) {
    const int64_t row = step.chunk_rows[size_t(i)];
    merge_state(1, hq_, D_, o + row * QD, QD, &lse_[size_t(row * hq_)], hq_,
                &merged_[size_t((Td + i) * QD)], QD, &merged_lse_[size_t((Td + i) * hq_)], hq_,
                o + row * QD, QD, &lse_[size_t(row * hq_)], hq_);
  }
}

}  // namespace cpinfer
