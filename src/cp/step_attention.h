// The attention of one layer for a planned RankStep, on any layout (docs/context-parallel.md
// §4-§8). The decoder calls run() once per layer; plan() once per step sizes every
// workspace and plans every attention call, so run() allocates nothing and builds no index.
//
// W == 1: write the new rows' K/V to the cache, then paged causal attention over it.
// W > 1, in this order:
//   1. new K/V: PCP all-gather of the real rows in the cache's dtype + restore (pcp > 1) or
//      a copy of the local rows, written to the cache by its owners; causal attention over
//      it. Under PCP in two parts merged by LSE: the rank's own rows (computed while the
//      gather is in flight on a comm worker thread) and the other ranks' rows.
//   2. shard queries: the decodes and the chunk queries; under PCP each PCP rank's (its own
//      decodes with their k and v rows, its chunk queries) all-gathered over PCP. The owner
//      of each decode token writes its K/V.
//   3. shard attention against this rank's shard of the context: DCP Q all-gather, partial
//      attention, DCP combine (one all-to-all of (O, LSE): each rank merges its own heads),
//      PCP combine (one all-to-all: each rank merges its own decodes and chunk rows); every
//      merge is merge_states (kernels/merge_state.h).
//   4. decode outputs are the combined states; chunk rows merge the combined context state
//      into their causal state (merge_state).
#pragma once
#include <string>
#include <vector>

#include "attention/kv_cache.h"
#include "core/thread_pool.h"
#include "cp/step_planner.h"
#include "dist/comm.h"
#include "dist/comm_worker.h"
#include "kernels/attention.h"

namespace cpinfer {

// When the PCP K/V gather runs beside the own-rows attention.
enum class OverlapMode { Auto, On, Off };
OverlapMode parse_overlap_mode(const std::string& s);  // "auto" | "on" | "off"

class StepAttention {
 public:
  // hq, hkv: this rank's (TP-local) q and KV heads; D: head_dim. comm: null for W == 1 and
  // tp == 1 (a single rank).
  StepAttention(Comm* comm, const CpLayout& layout, int64_t hq, int64_t hkv, int64_t head_dim,
                int64_t max_pages, int64_t num_layers);

  // Once per step, before layer 0.
  void plan(const RankStep& step, const KvCache& cache, ThreadPool& pool);

  // PCP K/V gather overlapped with the attention over the rank's own rows (off: gather
  // first, then the same two attention parts). Needs MPI_THREAD_SERIALIZED, else off.
  void set_overlap(bool on) { overlap_ = on; }
  bool overlap() const { return overlap_ && comm_ != nullptr && comm_->allows_helper_thread(); }
  // Seconds of the PCP K/V gathers since the last take, and of them the part this rank
  // waited for (not hidden behind its own attention), over `layers` layer calls.
  struct OverlapStats {
    double gather_s = 0, exposed_s = 0;
    int64_t layers = 0;
  };
  OverlapStats take_overlap_stats() {
    OverlapStats s = overlap_stats_;
    overlap_stats_ = {};
    return s;
  }
  // The last step's per-layer timeline of the PCP K/V gather (steady-clock seconds):
  // gather started, gather finished (on the worker), own-rows attention finished, wait over.
  struct LayerTimes {
    double gather_start = 0, gather_end = 0, local_end = 0, wait_end = 0;
  };
  const std::vector<LayerTimes>& layer_times() const { return layer_times_; }

  // Per layer, after plan(step): q, k, v: [T, heads * D] rows of the local tokens after
  // RoPE, row stride ld (views into one fused qkv buffer). o: [T, hq * D] (stride hq * D).
  void run(const RankStep& step, int64_t layer, KvCache& cache, const float* q, const float* k,
           const float* v, int64_t ld, float sm_scale, float* o, ThreadPool& pool);

 private:
  void new_tokens(const RankStep& step, int64_t layer, KvCache& cache, const float* q,
                  const float* k, const float* v, int64_t ld, float sm_scale, float* o,
                  ThreadPool& pool);
  void shard(const RankStep& step, int64_t layer, KvCache& cache, const float* q,
             const float* k, const float* v, int64_t ld, float sm_scale, float* o,
             ThreadPool& pool);

  Comm* comm_;
  CpLayout layout_;
  int64_t hq_, hkv_, D_;
  const RankStep* planned_ = nullptr;
  AttentionPlan paged_plan_, causal_plan_, remote_plan_, shard_plan_;
  AttentionWorkspace paged_ws_, causal_ws_, remote_ws_, shard_ws_;
  bool overlap_ = true;
  CommWorker worker_;
  int64_t gather_count_ = 0, gather_layer_ = 0;  // the gather the worker runs
  OverlapStats overlap_stats_;
  std::vector<LayerTimes> layer_times_;
  // Workspaces (grow to the largest step; reused by every layer).
  // The shard-query gather under PCP (floats): counts and displacements per PCP rank.
  std::vector<int> q_counts_, q_displs_;
  // Rows of each block of the PCP combine: the largest PCP rank's decodes plus the chunk rows.
  int64_t combine_rows_ = 0;
  std::vector<float> q_recv_;
  std::vector<float> lse_, send_, gathered_, kbuf_, vbuf_, qs_, qg_, od_, lsed_, mine_, s_star_,
      xsend_, xrecv_, merged_, merged_lse_, lkbuf_, lvbuf_, ro_, rlse_;
  // A bf16 cache: the new K/V rows again as bf16 (kbuf_ and lkbuf_ hold them rounded, so the
  // copy is exact), so that the new tokens' attention reads what one rank's reads from its
  // cache and takes the same kernels (bf16 dot products where chosen).
  bool bf16_rows_ = false;
  std::vector<bf16> kb16_, vb16_, lkb16_, lvb16_;
  // The attention's view of n rows of new K/V (page size 1: a "page" is a buffer row): the
  // f32 buffers, or for a bf16 cache their bf16 copies, refreshed here.
  PagedKv rows_view(const std::vector<float>& k, const std::vector<float>& v,
                    std::vector<bf16>& k16, std::vector<bf16>& v16, int64_t n);
  // The K/V gather in the cache's dtype (bytes), its counts and displacements (elements).
  DType kv_wire_ = DType::F32;
  std::vector<uint8_t> kv_send_, kv_recv_;
  std::vector<int> kv_counts_, kv_displs_;
};

}  // namespace cpinfer
