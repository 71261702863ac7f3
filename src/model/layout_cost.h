// The layout cost model behind `cpinfer plan`: for a model, a context length and a cluster
// (hosts x cores, link speed, memory), which (tp, pcp, dcp, interleave) layouts are valid and
// what each is predicted to cost: time to first token, inter-token latency, KV bytes per
// rank, bytes communicated per step, whether it fits in memory.
//
// The model, per rank (docs/benchmarks.md "Layout planner" validates it):
//   prefill  compute: linear FLOPs of the rank's tokens / (threads x gemm rate) + its share of
//            the causal attention FLOPs / (threads x attention rate) + its cut of the LM
//            head for the prompt's last row (as in decode); communication: the
//            bytes of model/comm_volume.h over the link each group uses, plus a latency per
//            collective step. No overlap (the engine's collectives block).
//   decode   a step of B decodes (B = the concurrency: sequences decoding together, each
//            after n cached tokens). Decode d runs its linear layers on PCP rank d % P, so
//            rank 0 runs ceil(B / P) rows of the layers' TP shard; the LM head is cut over
//            every rank (/ (tp pcp)) for all B rows; every rank reads its KV shard of every
//            sequence. The layers and the LM head take the rate calibrated at that many rows
//            (the decode GEMV's at one row: bound by reading the weights; at more rows the
//            FLOPs per weight byte grow and the rate is measured, see layout_calibration.h);
//            at a row count not calibrated, the larger of reading the weights at the
//            one-row rate and the FLOPs at the prefill GEMM rate. KV at the streaming read
//            rate, plus the step's communication (model/comm_volume.h for B decodes).
//   ranks    world rank g on host g / ranks_per_host; a TP group must stay inside a host.
//            More ranks than cores on a host (oversubscribed) time-share the cores.
// Rates are per core and come from calibration runs of this binary's kernels on the
// machine at hand (model/layout_calibration.h); a projection to other hosts assumes their cores match.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "model/comm_volume.h"
#include "model/model_config.h"

namespace cpinfer {

struct MachineSpec {
  int64_t hosts = 1, cores_per_host = 1;
  double memory_bytes_per_host = 0;
  double link_gbps = 25;             // between hosts, shared by the ranks of a host
  double link_latency_s = 50e-6;     // per collective step between hosts
  double local_gbps = 5;             // within a host, per rank (MPI shared memory), GB/s
  double local_latency_s = 5e-6;     // per collective step within a host
  double gemm_gflops_per_core = 50;  // prefill linear layers
  double attn_gflops_per_core = 50;  // causal attention
  double read_gbps_per_core = 10;    // streaming reads with every core busy, GB/s
  // The decode GEMV's rate over the weights, GB/s per core with every core busy (it does
  // not reach the streaming read rate); 0: read_gbps_per_core.
  double weight_read_gbps_per_core = 0;
  // The one-row LM head GEMV's rate over the [vocab, hidden] matrix, GB/s per core; 0: the
  // decode GEMV's rate.
  double lm_head_read_gbps_per_core = 0;
  // The same two rates at more rows than one (decode steps of several sequences): rows ->
  // GB/s of weights per core. A row count missing here takes the roofline described above.
  std::map<int64_t, double> weight_read_gbps_at_rows, lm_head_read_gbps_at_rows;
  // The one-row decode GEMV on one thread with the host's other cores idle, GB/s (0: unknown,
  // the all-busy rate applies). A decode step with fewer decodes than PCP ranks runs the
  // layers on the decodes' home ranks only: on one host their cores share the memory bus
  // with fewer busy ones and read faster, up to this rate.
  double weight_read_gbps_alone = 0;
  bool oversubscribe = false;        // allow more ranks than cores on a host
};

struct LayoutChoice {
  int64_t tp = 1, pcp = 1, dcp = 1, interleave = 1;
  int64_t threads_per_rank = 1;
};

struct LayoutEstimate {
  LayoutChoice layout;
  int64_t ranks = 1, ranks_per_host = 1;
  double ttft_s = 0, itl_s = 0;
  double prefill_compute_s = 0, prefill_comm_s = 0, decode_read_s = 0, decode_comm_s = 0;
  double kv_bytes_per_rank = 0, weight_bytes_per_rank = 0, memory_bytes_per_host = 0;
  double comm_bytes_per_step = 0;  // the prefill step (rank 0 receives)
  double comm_bytes_decode_step = 0;
  int64_t concurrency = 1;           // B: the decode step and the KV above hold B sequences
  double decode_tokens_per_s = 0;    // B / itl_s
  // The most sequences of n tokens whose KV fits beside the weights (0: not even one; -1:
  // memory unknown).
  int64_t max_concurrency = -1;
  bool fits = false;
};

// Every valid layout: tp divides the q heads and intermediate_size, tp * pcp ranks divide
// the cluster's cores evenly (or, oversubscribed on one host, up to 2 ranks per core), a TP
// group inside one host, dcp by the rules of docs/context-parallel.md §3, interleave 1 or
// the block size when the context is sharded (pcp * dcp > 1).
std::vector<LayoutChoice> candidate_layouts(const ModelConfig& c, const MachineSpec& m,
                                            int64_t block_size);

// kv_bytes: bytes per cached K/V element (f32 4, bf16 2); concurrency: B above.
LayoutEstimate estimate_layout(const ModelConfig& c, const LayoutChoice& l,
                               const MachineSpec& m, int64_t context_len, int64_t kv_bytes,
                               int64_t concurrency = 1);

// The rows of the linear layers' decode pass on the busiest rank of layout l in a step of
// `concurrency` decodes: ceil(B / pcp) (decode d runs on PCP rank d % pcp).
int64_t decode_layer_rows(const LayoutChoice& l, int64_t concurrency);

}  // namespace cpinfer
