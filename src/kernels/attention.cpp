// The attention backend: plan_attention (once per step), run_attention (per layer), the
// one-shot wrappers, and the straightforward reference path.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/attention_impl.h"
#include "kernels/merge_state.h"

namespace cpinfer {

namespace {

using attention_impl::FlashTask;
using attention_impl::kTileN;
using attention_impl::round_up;

attention_impl::FlashTaskFn flash_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return attention_impl::avx512::flash_task;
    case Isa::Avx2: return attention_impl::avx2::flash_task;
    default: return attention_impl::generic::flash_task;
  }
}

attention_impl::ReferenceTileFn reference_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return attention_impl::avx512::reference_tile;
    case Isa::Avx2: return attention_impl::avx2::reference_tile;
    default: return attention_impl::generic::reference_tile;
  }
}

// Split-KV: with more than one thread, items whose cost exceeds 1 / (kTasksPerThread *
// threads) of the step's total are cut into chunks of at least kMinChunk tokens.
constexpr int64_t kTasksPerThread = 4;
constexpr int64_t kMinChunk = 256;
constexpr int64_t kMaxChunks = 1024;  // states one merge_states row takes
constexpr float kLog2e = 1.4426950408889634f;

int64_t kv_len_of(const AttentionPlan& p, int64_t s) {
  return p.source == KvSource::Paged ? p.kv_lens[size_t(s)]
                                     : p.kv_indptr[size_t(s) + 1] - p.kv_indptr[size_t(s)];
}

// First KV token a causal block of rows [r0, r1) cannot see: row r sees j <= r + kv - q.
// Example, q_len 3, kv_len 5, rows [0, 2): row 1 sees 0..3, so the block's KV end is 4.
int64_t visible_kv_end(bool causal, int64_t r1, int64_t q_len, int64_t kv_len) {
  if (!causal) return kv_len;
  return std::clamp<int64_t>(r1 + kv_len - q_len, 0, kv_len);
}

}  // namespace

AttentionProblem paged_problem(const AttentionBatch& b, int64_t num_q_heads, const PagedKv& kv,
                               int num_threads) {
  AttentionProblem p;
  p.source = KvSource::Paged;
  p.num_seqs = b.num_seqs;
  p.q_indptr = b.q_indptr;
  p.kv_lens = b.kv_lens;
  p.page_indptr = b.page_indptr;
  p.page_indices = b.page_indices;
  p.page_size = kv.page_size;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = kv.num_kv_heads;
  p.head_dim = kv.head_dim;
  p.causal = b.causal;
  p.num_threads = num_threads;
  return p;
}

int64_t AttentionPlan::workspace_floats() const {
  return int64_t(num_threads) * scratch_floats + partial_floats +
         round_up(num_partials * partial_m, 16);
}

AttentionPlan plan_attention(const AttentionProblem& problem) {
  AttentionPlan plan;
  plan_attention(problem, &plan);
  return plan;
}

void plan_attention(const AttentionProblem& p, AttentionPlan* out) {
  const int64_t S = p.num_seqs, Hq = p.num_q_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  CPI_CHECK(S >= 0, "attention plan: num_seqs {} is negative", S);
  CPI_CHECK(Hkv > 0 && Hq > 0 && Hq % Hkv == 0,
            "attention plan: num_q_heads {} is not a positive multiple of num_kv_heads {}", Hq,
            Hkv);
  const int64_t G = Hq / Hkv;
  CPI_CHECK(G <= attention_impl::kMaxM, "attention plan: {} q heads per KV head exceed {}", G,
            attention_impl::kMaxM);
  CPI_CHECK(D >= 1 && D <= 512, "attention plan: head_dim {} is outside [1, 512]", D);
  CPI_CHECK(p.num_threads >= 1 && p.num_threads <= 1024,
            "attention plan: num_threads {} is outside [1, 1024]", p.num_threads);
  CPI_CHECK(p.max_kv_chunk >= 0, "attention plan: max_kv_chunk {} is negative", p.max_kv_chunk);
  CPI_CHECK(S == 0 || p.q_indptr != nullptr, "attention plan: q_indptr is null");

  // A fresh plan that takes over the previous one's vectors, emptied: the same plan as from
  // scratch, without heap allocations once they have grown to the step sizes seen.
  AttentionPlan plan;
  const auto reuse = [](auto& to, auto& from) {
    from.clear();
    to.swap(from);
  };
  reuse(plan.q_indptr, out->q_indptr);
  reuse(plan.kv_lens, out->kv_lens);
  reuse(plan.kv_indptr, out->kv_indptr);
  reuse(plan.page_indptr, out->page_indptr);
  reuse(plan.page_indices, out->page_indices);
  reuse(plan.tasks, out->tasks);
  reuse(plan.merges, out->merges);
  plan.source = p.source;
  plan.num_seqs = S;
  plan.num_q_heads = Hq;
  plan.num_kv_heads = Hkv;
  plan.head_dim = D;
  plan.causal = p.causal;
  plan.bf16_dot = p.bf16_math == Bf16Math::Dot ||
                  (p.bf16_math == Bf16Math::Auto && bf16_dot_chosen());
  plan.num_threads = p.num_threads;
  plan.q_indptr.assign(p.q_indptr, p.q_indptr + (S + 1));
  if (S == 0) plan.q_indptr = {0};
  CPI_CHECK(plan.q_indptr[0] == 0, "attention plan: q_indptr[0] is {}, not 0", plan.q_indptr[0]);
  for (int64_t s = 0; s < S; ++s)
    CPI_CHECK(plan.q_indptr[size_t(s) + 1] >= plan.q_indptr[size_t(s)],
              "attention plan: q_indptr decreases at sequence {}", s);
  plan.num_tokens = plan.q_indptr.back();

  if (p.source == KvSource::Paged) {
    CPI_CHECK(p.page_size >= 1 && p.page_size <= 256, "attention plan: page size {} is outside "
              "[1, 256]", p.page_size);
    // page_indices may be null when no sequence has a page (a CP rank owning no token yet).
    CPI_CHECK(S == 0 || (p.kv_lens && p.page_indptr && (p.page_indices || p.page_indptr[S] == 0)),
              "attention plan: paged KV needs kv_lens, page_indptr and page_indices");
    plan.page_size = p.page_size;
    plan.kv_lens.assign(p.kv_lens, p.kv_lens + S);
    plan.page_indptr.assign(p.page_indptr, p.page_indptr + (S + 1));
    if (S == 0) plan.page_indptr = {0};
    const int64_t num_indices = plan.page_indptr.back() - plan.page_indptr.front();
    CPI_CHECK(plan.page_indptr.front() >= 0 && num_indices >= 0,
              "attention plan: page_indptr [{}, {}] is invalid", plan.page_indptr.front(),
              plan.page_indptr.back());
    if (plan.page_indptr.back() > 0)
      plan.page_indices.assign(p.page_indices, p.page_indices + plan.page_indptr.back());
    for (int64_t s = 0; s < S; ++s) {
      const int64_t L = plan.kv_lens[size_t(s)];
      const int64_t have = plan.page_indptr[size_t(s) + 1] - plan.page_indptr[size_t(s)];
      CPI_CHECK(L >= 0, "attention plan: kv_len {} of sequence {} is negative", L, s);
      CPI_CHECK(have >= (L + p.page_size - 1) / p.page_size,
                "attention plan: sequence {} has {} KV tokens but only {} pages of {}", s, L,
                have, p.page_size);
      for (int64_t i = 0; i < (L + p.page_size - 1) / p.page_size; ++i)
        CPI_CHECK(plan.page_indices[size_t(plan.page_indptr[size_t(s)] + i)] >= 0,
                  "attention plan: sequence {} has a negative page index", s);
    }
  } else {
    CPI_CHECK(S == 0 || p.kv_indptr, "attention plan: ragged KV needs kv_indptr");
    plan.kv_indptr.assign(p.kv_indptr, p.kv_indptr + (S + 1));
    if (S == 0) plan.kv_indptr = {0};
    CPI_CHECK(plan.kv_indptr[0] >= 0, "attention plan: kv_indptr[0] {} is negative",
              plan.kv_indptr[0]);
    for (int64_t s = 0; s < S; ++s)
      CPI_CHECK(plan.kv_indptr[size_t(s) + 1] >= plan.kv_indptr[size_t(s)],
                "attention plan: kv_indptr decreases at sequence {}", s);
  }

  // Rows per task: about kTargetM lanes (rows x group heads). Example, group 8: 8 rows,
  // group 7: 9 rows (63 lanes), group 1: 64 rows, group 16: 4 rows.
  const int64_t R = std::max<int64_t>(1, attention_impl::kTargetM / G);
  plan.rows_per_block = R;
  const int64_t M = R * G;

  // Items (sequence, KV heads, row block) with their visible KV and a cost estimate. A
  // decode-shaped sequence (q_len * group <= kDecodeLanes) is one item over all its KV heads:
  // the kernel then reads each token's K (and V) row of all heads, contiguous in the NHD
  // page, instead of one head's slice of it per task (DRAM streams contiguous rows ~1.5x
  // faster than every other 256 bytes). Example, Hkv 2, D 128, bf16: 512 contiguous bytes
  // per token instead of 256 of every 512.
  struct Item {
    int32_t seq, head, heads;
    int64_t r0, r1, kv_end, cost;
  };
  thread_local std::vector<Item> items;  // scratch, kept between calls (no allocation)
  items.clear();
  int64_t total = 0;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t q_len = plan.q_indptr[size_t(s) + 1] - plan.q_indptr[size_t(s)];
    const int64_t kv_len = kv_len_of(plan, s);
    if (q_len > 0 && q_len * G <= attention_impl::kDecodeLanes) {
      const int64_t e = visible_kv_end(p.causal, q_len, q_len, kv_len);
      const int64_t cost = q_len * Hq * (e + kTileN);
      items.push_back({int32_t(s), 0, int32_t(Hkv), 0, q_len, e, cost});
      total += cost;
      continue;
    }
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t r0 = 0; r0 < q_len; r0 += R) {
        const int64_t r1 = std::min(q_len, r0 + R);
        const int64_t e = visible_kv_end(p.causal, r1, q_len, kv_len);
        const int64_t cost = (r1 - r0) * G * (e + kTileN);  // + a tile for the fixed work
        items.push_back({int32_t(s), int32_t(h), 1, r0, r1, e, cost});
        total += cost;
      }
  }

  // Split-KV chunks. Example: decode, 1 sequence, 2 threads, kv_len 32768: total = 1 item,
  // target = total / 8, so it becomes 8 chunks of 4096 tokens.
  const int64_t target = total / (kTasksPerThread * p.num_threads) + 1;
  thread_local std::vector<std::pair<int64_t, size_t>> order;  // (cost, task index) to sort
  order.clear();
  for (const Item& it : items) {
    int64_t chunks = 1;
    if (p.max_kv_chunk > 0) {
      chunks = std::max<int64_t>(1, (it.kv_end + p.max_kv_chunk - 1) / p.max_kv_chunk);
    } else if (p.num_threads > 1 && it.cost > target) {
      chunks = std::min((it.cost + target - 1) / target, it.kv_end / kMinChunk);
      chunks = std::max<int64_t>(1, chunks);
    }
    int64_t chunk = (it.kv_end + chunks - 1) / std::max<int64_t>(1, chunks);
    if (p.max_kv_chunk == 0) chunk = round_up(std::max<int64_t>(chunk, 1), kTileN);
    chunks = it.kv_end == 0 ? 1 : (it.kv_end + chunk - 1) / chunk;
    CPI_CHECK(chunks <= kMaxChunks, "attention plan: {} KV tokens in chunks of {} make {} "
              "chunks; at most {} merge", it.kv_end, chunk, chunks, kMaxChunks);
    if (chunks == 1) {
      order.push_back({it.cost, plan.tasks.size()});
      plan.tasks.push_back({it.seq, it.head, it.heads, it.r0, it.r1, 0, it.kv_end, -1});
      continue;
    }
    plan.merges.push_back({it.seq, it.head, it.heads, it.r0, it.r1, plan.num_partials, chunks});
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t kv0 = c * chunk, kv1 = std::min(it.kv_end, kv0 + chunk);
      order.push_back({(it.r1 - it.r0) * G * it.heads * (kv1 - kv0 + kTileN),
                       plan.tasks.size()});
      plan.tasks.push_back({it.seq, it.head, it.heads, it.r0, it.r1, kv0, kv1,
                            plan.num_partials++});
    }
  }
  // Largest first, ties in plan order: the pool's dynamic hand-out then balances well.
  // (std::sort with the index as tie-break: stable_sort would allocate a buffer per call.)
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  thread_local std::vector<AttentionPlan::Task> sorted;
  sorted.clear();
  for (const auto& o : order) sorted.push_back(plan.tasks[o.second]);
  plan.tasks.swap(sorted);  // the unsorted list's buffer becomes the next call's scratch

  plan.scratch_floats = round_up(std::max(attention_impl::flash_scratch_floats(M, D),
                                          attention_impl::decode_scratch_floats(Hkv, D)), 16);
  // A partial state holds the rows x q heads of its task: [rows, G, D] for one KV head, or
  // [rows, Hq, D] for a decode item over all heads (rows * G <= kDecodeLanes).
  plan.partial_m = std::max(M, attention_impl::kDecodeLanes * Hkv);
  plan.partial_floats = round_up(plan.num_partials * plan.partial_m * D, 16);
  *out = std::move(plan);
}

AttentionWorkspace::~AttentionWorkspace() { std::free(data_); }

void AttentionWorkspace::reserve(const AttentionPlan& plan) {
  const int64_t need = plan.workspace_floats();
  if (need <= floats_) return;
  std::free(data_);
  data_ = nullptr;
  floats_ = 0;
  const size_t bytes = size_t(round_up(std::max<int64_t>(need, 16), 16)) * 4;
  data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  CPI_CHECK(data_ != nullptr, "cannot allocate {} MiB of attention workspace", bytes >> 20);
  floats_ = need;
}

namespace {

// What differs between the KV sources: where sequence s's K/V start and how rows are found.
struct KvAddress {
  const void* k;
  const void* v;
  DType dtype;
  const int32_t* pages;  // sequence's page list (paged) or null
  int64_t page_size, k_row, v_row;
};

template <typename AddressFn>
void run_plan(const AttentionPlan& plan, const float* q, int64_t ldq, float sm_scale, float* o,
              int64_t ldo, float* lse, AttentionWorkspace& ws, ThreadPool& pool,
              AddressFn address) {
  const int64_t Hq = plan.num_q_heads, Hkv = plan.num_kv_heads, D = plan.head_dim;
  const int64_t G = Hq / Hkv, PM = plan.partial_m;
  CPI_CHECK(pool.size() <= plan.num_threads, "attention run: the pool has {} threads but the "
            "plan was made for {}", pool.size(), plan.num_threads);
  CPI_CHECK(ws.floats() >= plan.workspace_floats(), "attention run: the workspace holds {} "
            "floats, the plan needs {} (call reserve once per step)", ws.floats(),
            plan.workspace_floats());
  CPI_CHECK(ldq >= Hq * D && ldo >= Hq * D, "attention run: row strides ldq {} / ldo {} are "
            "below num_q_heads * head_dim = {}", ldq, ldo, Hq * D);
  CPI_CHECK(std::isfinite(sm_scale), "attention run: sm_scale {} is not finite", sm_scale);
  if (plan.num_tokens == 0) return;
  CPI_CHECK(q && o && lse, "attention run: q, o or lse is null");
  const attention_impl::FlashTaskFn flash = flash_for(active_isa());
  float* partial_o = ws.data() + int64_t(plan.num_threads) * plan.scratch_floats;
  float* partial_lse = partial_o + plan.partial_floats;
  const float scale_log2 = sm_scale * kLog2e;

  pool.run(int64_t(plan.tasks.size()), [&](int64_t i, int thread) {
    const AttentionPlan::Task& w = plan.tasks[size_t(i)];
    const int64_t q0 = plan.q_indptr[size_t(w.seq)];
    const int64_t q_len = plan.q_indptr[size_t(w.seq) + 1] - q0;
    const KvAddress a = address(w.seq);
    FlashTask t;
    t.q = q + (q0 + w.r0) * ldq + w.kv_head * G * D;
    t.ldq = ldq;
    t.rows = w.r1 - w.r0;
    t.group = G;
    t.head_dim = D;
    t.num_heads = w.num_heads;
    t.k = a.k;
    t.v = a.v;
    t.kv_dtype = a.dtype;
    t.pages = a.pages;
    t.page_size = a.page_size;
    t.k_row = a.k_row;
    t.v_row = a.v_row;
    t.head_off = w.kv_head * D;
    t.kv0 = w.kv0;
    t.kv1 = w.kv1;
    t.causal = plan.causal;
    t.diag = w.r0 + kv_len_of(plan, w.seq) - q_len;  // row w.r0 + r sees j <= r + diag
    t.scale_log2 = scale_log2;
    t.bf16_dot = plan.bf16_dot;
    if (w.partial < 0) {
      t.o = o + (q0 + w.r0) * ldo + w.kv_head * G * D;
      t.ldo = ldo;
      t.lse = lse + (q0 + w.r0) * Hq + w.kv_head * G;
      t.ld_lse = Hq;
    } else {  // partial state w.partial: [rows, heads * G, D] and [rows, heads * G]
      t.o = partial_o + w.partial * PM * D;
      t.ldo = w.num_heads * G * D;
      t.lse = partial_lse + w.partial * PM;
      t.ld_lse = w.num_heads * G;
    }
    t.scratch = ws.data() + int64_t(thread) * plan.scratch_floats;
    flash(t);
  });
  if (plan.merges.empty()) return;
  // Chunks of one item merge in chunk order: the result does not depend on the schedule.
  pool.run(int64_t(plan.merges.size()), [&](int64_t i, int) {
    const AttentionPlan::Merge& mg = plan.merges[size_t(i)];
    const int64_t q0 = plan.q_indptr[size_t(mg.seq)];
    const int64_t heads = mg.num_heads * G;
    merge_states(mg.count, mg.r1 - mg.r0, heads, D, partial_o + mg.first * PM * D, PM * D,
                 heads * D, partial_lse + mg.first * PM, PM, heads,
                 o + (q0 + mg.r0) * ldo + mg.kv_head * G * D, ldo,
                 lse + (q0 + mg.r0) * Hq + mg.kv_head * G, Hq);
  });
}

}  // namespace

void run_attention(const AttentionPlan& plan, const float* q, int64_t ldq, const PagedKv& kv,
                   float sm_scale, float* o, int64_t ldo, float* lse, AttentionWorkspace& ws,
                   ThreadPool& pool) {
  CPI_CHECK(plan.source == KvSource::Paged, "attention run: the plan is for ragged KV");
  CPI_CHECK(kv.num_kv_heads == plan.num_kv_heads && kv.head_dim == plan.head_dim &&
                kv.page_size == plan.page_size,
            "attention run: KV cache [page_size {}, kv_heads {}, head_dim {}] does not match "
            "the plan [{}, {}, {}]", kv.page_size, kv.num_kv_heads, kv.head_dim,
            plan.page_size, plan.num_kv_heads, plan.head_dim);
  CPI_CHECK(kv.dtype == DType::F32 || kv.dtype == DType::BF16,
            "attention run: KV dtype {} is not F32 or BF16", dtype_name(kv.dtype));
  CPI_CHECK(plan.num_tokens == 0 || (kv.k && kv.v), "attention run: KV cache is null");
  const int64_t row = kv.num_kv_heads * kv.head_dim;
  run_plan(plan, q, ldq, sm_scale, o, ldo, lse, ws, pool, [&](int64_t s) {
    return KvAddress{kv.k, kv.v, kv.dtype,
                     plan.page_indices.data() + plan.page_indptr[size_t(s)], kv.page_size, row,
                     row};
  });
}

void run_attention(const AttentionPlan& plan, const float* q, int64_t ldq, const RaggedKv& kv,
                   float sm_scale, float* o, int64_t ldo, float* lse, AttentionWorkspace& ws,
                   ThreadPool& pool) {
  CPI_CHECK(plan.source == KvSource::Ragged, "attention run: the plan is for paged KV");
  CPI_CHECK(kv.num_kv_heads == plan.num_kv_heads && kv.head_dim == plan.head_dim,
            "attention run: ragged KV [kv_heads {}, head_dim {}] does not match the plan "
            "[{}, {}]", kv.num_kv_heads, kv.head_dim, plan.num_kv_heads, plan.head_dim);
  const int64_t row = kv.num_kv_heads * kv.head_dim;
  CPI_CHECK(kv.ldk >= row && kv.ldv >= row, "attention run: ragged KV strides {} / {} are below "
            "num_kv_heads * head_dim = {}", kv.ldk, kv.ldv, row);
  CPI_CHECK(plan.num_tokens == 0 || plan.kv_indptr.back() == plan.kv_indptr.front() ||
                (kv.k && kv.v), "attention run: ragged K or V is null");
  run_plan(plan, q, ldq, sm_scale, o, ldo, lse, ws, pool, [&](int64_t s) {
    const int64_t first = plan.kv_indptr[size_t(s)];
    return KvAddress{kv.k + first * kv.ldk, kv.v + first * kv.ldv, DType::F32, nullptr, 1,
                     kv.ldk, kv.ldv};
  });
}

void paged_attention(const float* q, int64_t ldq, int64_t num_q_heads, const PagedKv& kv,
                     const AttentionBatch& batch, float sm_scale, float* o, int64_t ldo,
                     float* lse, ThreadPool& pool) {
  AttentionPlan plan = plan_attention(paged_problem(batch, num_q_heads, kv, pool.size()));
  AttentionWorkspace ws;
  ws.reserve(plan);
  run_attention(plan, q, ldq, kv, sm_scale, o, ldo, lse, ws, pool);
}

void ragged_attention(const float* q, int64_t ldq, int64_t num_q_heads, const RaggedKv& kv,
                      int64_t num_seqs, const int64_t* q_indptr, const int64_t* kv_indptr,
                      bool causal, float sm_scale, float* o, int64_t ldo, float* lse,
                      ThreadPool& pool) {
  AttentionProblem p;
  p.source = KvSource::Ragged;
  p.num_seqs = num_seqs;
  p.q_indptr = q_indptr;
  p.kv_indptr = kv_indptr;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = kv.num_kv_heads;
  p.head_dim = kv.head_dim;
  p.causal = causal;
  p.num_threads = pool.size();
  AttentionPlan plan = plan_attention(p);
  AttentionWorkspace ws;
  ws.reserve(plan);
  run_attention(plan, q, ldq, kv, sm_scale, o, ldo, lse, ws, pool);
}

void paged_attention_reference(const float* q, int64_t ldq, int64_t num_q_heads,
                               const PagedKv& kv, const AttentionBatch& batch, float sm_scale,
                               float* o, int64_t ldo, float* lse, ThreadPool& pool) {
  CPI_CHECK(kv.num_kv_heads > 0 && num_q_heads % kv.num_kv_heads == 0,
            "num_q_heads {} is not a multiple of num_kv_heads {}", num_q_heads, kv.num_kv_heads);
  CPI_CHECK(kv.head_dim > 0 && kv.head_dim <= 512, "head_dim {} is outside [1, 512]", kv.head_dim);
  // Tasks: (sequence, KV head, block of 16 query rows), listed up front.
  constexpr int64_t kRowsPerTask = 16;
  struct Task { int64_t seq, kv_head, r0, r1; };
  std::vector<Task> tasks;
  for (int64_t s = 0; s < batch.num_seqs; ++s) {
    int64_t q_len = batch.q_indptr[s + 1] - batch.q_indptr[s];
    for (int64_t g = 0; g < kv.num_kv_heads; ++g)
      for (int64_t r = 0; r < q_len; r += kRowsPerTask)
        tasks.push_back({s, g, r, std::min(q_len, r + kRowsPerTask)});
  }
  attention_impl::ReferenceTileFn tile = reference_for(active_isa());
  pool.run(int64_t(tasks.size()), [&](int64_t t, int) {
    const Task& w = tasks[size_t(t)];
    tile(q, ldq, num_q_heads, kv, batch, sm_scale, o, ldo, lse, w.seq, w.kv_head, w.r0, w.r1);
  });
}

}  // namespace cpinfer
