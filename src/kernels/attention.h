// The CPU attention backend in the FlashInfer mould: every call returns the output O and the
// base-2 LSE (context-parallel.md §7) so that partial states can be merged (merge_state.h).
//
//   plan_attention(problem)  once per step: the batch's query and KV lengths, page tables,
//                            head counts, causal flag and thread count -> an immutable
//                            AttentionPlan (tasks over threads, split-KV chunks for long
//                            decodes, workspace size).
//   run_attention(plan, ...) once per layer: no allocation, no index building; the
//                            caller's AttentionWorkspace is sized once per step.
//
// Two KV sources share one kernel core: the paged cache (PagedKv: [pages, page_size, Hkv, D],
// f32 or bf16) and ragged contiguous K/V (RaggedKv: [kv_tokens, Hkv, D] f32 rows, each
// sequence owning rows [kv_indptr[s], kv_indptr[s+1]); PCP's head/tail attention).
//
// GQA is native: one task covers a block of query rows times every q head that shares its
// KV head, so each K/V tile is read (and widened from bf16) once per group.
// paged_attention_reference is the straightforward version, kept as the oracle's twin and
// the benchmark's baseline.
#pragma once
#include <cstdint>
#include <vector>

#include "attention/kv_cache.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace cpinfer {

// A ragged batch: sequence i owns query rows [q_indptr[i], q_indptr[i+1]) and attends to
// its first kv_lens[i] cached tokens, whose pages are
// page_indices[page_indptr[i] .. page_indptr[i+1]) (token j sits in page j / page_size,
// offset j % page_size). Example, page_size 4, kv_len 6, pages {7, 2}: token 5 is page 2,
// offset 1.
struct AttentionBatch {
  int64_t num_seqs = 0;
  const int64_t* q_indptr = nullptr;     // [num_seqs + 1]
  const int64_t* kv_lens = nullptr;      // [num_seqs]
  const int32_t* page_indptr = nullptr;  // [num_seqs + 1]
  const int32_t* page_indices = nullptr;
  // Bottom-right aligned causal mask: row i of a q_len-row block sees KV column j iff
  // j <= i + kv_len - q_len. (q_len 3, kv_len 5: row 0 sees 0..2, row 2 sees 0..4.)
  bool causal = true;
};

// K and V that are not in the cache: rows of [Hkv, D] f32, token t of the buffer at
// k + t * ldk (v + t * ldv); head h of a row at offset h * D. The plan's kv_indptr says which
// rows belong to which sequence. Example: kv_indptr {0, 4, 10}: sequence 1's token 2 is
// buffer row 6.
struct RaggedKv {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t ldk = 0, ldv = 0;  // floats between consecutive token rows (>= Hkv * D)
  int64_t num_kv_heads = 0, head_dim = 0;
};

enum class KvSource : uint8_t { Paged, Ragged };

// What plan_attention sees. Pointers are read during the call only (the plan copies them).
struct AttentionProblem {
  KvSource source = KvSource::Paged;
  int64_t num_seqs = 0;
  const int64_t* q_indptr = nullptr;      // [num_seqs + 1]
  const int64_t* kv_lens = nullptr;       // [num_seqs]       Paged
  const int32_t* page_indptr = nullptr;   // [num_seqs + 1]   Paged
  const int32_t* page_indices = nullptr;  //                  Paged
  int64_t page_size = 0;                  //                  Paged
  const int64_t* kv_indptr = nullptr;     // [num_seqs + 1]   Ragged
  int64_t num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
  bool causal = true;  // bottom-right aligned, as in AttentionBatch
  int num_threads = 1; // the size of the pool run_attention will be given (at most)
  // Split-KV control. 0: automatic (split long items only when the pool has > 1 thread and
  // there are fewer than ~4 tasks' worth of work per thread). > 0: split every item's KV
  // range into chunks of at most this many tokens (tests use it to force the split path).
  int64_t max_kv_chunk = 0;
  // bf16 cache only: the arithmetic of its tasks (decode-shaped and prefill, head_dim a
  // multiple of 32) on AVX512_BF16 CPUs. Dot: bf16 dot products (vdpbf16ps), Q and P rounded
  // to bf16 like K and V already are; the error stays of the order of the cache's own
  // rounding (attention_test states the bound). F32: f32 arithmetic on the widened K/V.
  // Auto: the process-wide choice (bf16_dot_chosen(), core/cpu_features.h). Ragged (f32)
  // K/V and an f32 cache always run f32 arithmetic.
  Bf16Math bf16_math = Bf16Math::Auto;
};

// Paged problem from an AttentionBatch (the shape the engine builds once per step).
AttentionProblem paged_problem(const AttentionBatch& batch, int64_t num_q_heads,
                               const PagedKv& kv, int num_threads);

// The immutable result of plan_attention. Fields are public for inspection (tests, bench);
// only plan_attention writes them.
struct AttentionPlan {
  // One kernel call: query rows [r0, r1) of sequence seq (all q heads of KV heads
  // [kv_head, kv_head + num_heads)) against KV tokens [kv0, kv1). partial < 0: writes the
  // final O/LSE rows; otherwise writes partial state number `partial` in the workspace,
  // merged afterwards. Decode-shaped sequences get one task over all KV heads.
  struct Task {
    int32_t seq = 0, kv_head = 0, num_heads = 1;
    int64_t r0 = 0, r1 = 0, kv0 = 0, kv1 = 0;
    int64_t partial = -1;
  };
  // The merge of a split item: partial states [first, first + count) -> final rows.
  struct Merge {
    int32_t seq = 0, kv_head = 0, num_heads = 1;
    int64_t r0 = 0, r1 = 0, first = 0, count = 0;
  };

  KvSource source = KvSource::Paged;
  int64_t num_seqs = 0, num_tokens = 0;
  int64_t num_q_heads = 0, num_kv_heads = 0, head_dim = 0, page_size = 0;
  bool causal = true;
  bool bf16_dot = false;  // bf16 dot products over a bf16 cache (bf16_math resolved)
  int num_threads = 1;
  std::vector<int64_t> q_indptr, kv_lens, kv_indptr;  // kv_indptr: Ragged only
  std::vector<int32_t> page_indptr, page_indices;      // Paged only
  std::vector<Task> tasks;    // largest first (the pool hands them out in this order)
  std::vector<Merge> merges;  // one per split item
  int64_t rows_per_block = 0;         // query rows per task (x group heads = M lanes)
  int64_t scratch_floats = 0;         // per thread
  int64_t partial_m = 0;              // rows x q heads of one partial state (at most)
  int64_t partial_floats = 0;         // O of every partial state, [partial][partial_m, D]
  int64_t num_partials = 0;
  int64_t workspace_floats() const;   // threads x scratch + partial O + partial LSE
};

AttentionPlan plan_attention(const AttentionProblem& problem);
// The same into *plan, reusing its vectors: once they have grown to the sizes of the steps
// seen, planning allocates nothing (the per-step path). On an error *plan is left empty.
void plan_attention(const AttentionProblem& problem, AttentionPlan* plan);

// Memory for run_attention, 64-byte aligned. reserve() (once per step) grows it to what the
// plan needs; run_attention checks the size and never allocates.
class AttentionWorkspace {
 public:
  AttentionWorkspace() = default;
  AttentionWorkspace(const AttentionWorkspace&) = delete;
  AttentionWorkspace& operator=(const AttentionWorkspace&) = delete;
  ~AttentionWorkspace();
  void reserve(const AttentionPlan& plan);
  float* data() const { return data_; }
  int64_t floats() const { return floats_; }

 private:
  float* data_ = nullptr;
  int64_t floats_ = 0;
};

// q: [T, Hq, D] f32, row stride ldq floats (T = plan.num_tokens). o: [T, Hq, D] f32, row
// stride ldo; lse: [T, Hq] base-2 log-sum-exp of the scaled scores, -inf (and o = 0) for a
// row that sees no KV. q heads [g*Hq/Hkv, (g+1)*Hq/Hkv) share KV head g.
// pool.size() must be <= plan.num_threads; the workspace must be reserved for the plan.
void run_attention(const AttentionPlan& plan, const float* q, int64_t ldq, const PagedKv& kv,
                   float sm_scale, float* o, int64_t ldo, float* lse, AttentionWorkspace& ws,
                   ThreadPool& pool);
void run_attention(const AttentionPlan& plan, const float* q, int64_t ldq, const RaggedKv& kv,
                   float sm_scale, float* o, int64_t ldo, float* lse, AttentionWorkspace& ws,
                   ThreadPool& pool);

// One-shot conveniences (plan + workspace + run; they allocate): for callers outside the
// per-step loop and for tests.
// q: [T, Hq, D] (ldq); o: [T, Hq, D] (ldo); lse: [T, Hq].
void paged_attention(const float* q, int64_t ldq, int64_t num_q_heads, const PagedKv& kv,
                     const AttentionBatch& batch, float sm_scale, float* o, int64_t ldo,
                     float* lse, ThreadPool& pool);
// kv_indptr: [num_seqs + 1] rows of kv per sequence; q_indptr: [num_seqs + 1].
void ragged_attention(const float* q, int64_t ldq, int64_t num_q_heads, const RaggedKv& kv,
                      int64_t num_seqs, const int64_t* q_indptr, const int64_t* kv_indptr,
                      bool causal, float sm_scale, float* o, int64_t ldo, float* lse,
                      ThreadPool& pool);

// The straightforward version (per row and head: scalar-order dot products, online softmax
// in base 2): same contract as paged_attention. The benchmark's baseline.
void paged_attention_reference(const float* q, int64_t ldq, int64_t num_q_heads,
                               const PagedKv& kv, const AttentionBatch& batch, float sm_scale,
                               float* o, int64_t ldo, float* lse, ThreadPool& pool);

}  // namespace cpinfer
