// The per-core rates behind `cpinfer plan` (model/layout_cost.h), measured on the machine at
// hand with short runs of the engine's own kernels on the model's real shapes (random
// weights in the model's dtype, nothing loaded from disk):
//   prefill layer  one decoder layer's linear work as the decoder runs it (norms, q|k|v with
//                  RoPE in the epilogue, o, gate/up with SiLU, down) on 2048 rows: the rate
//                  counts only the linear FLOPs, so the norms and epilogues are in it (on
//                  this VM the rate fell ~10% from 1024 to 4096 rows; prompts are long)
//   attention      causal flash attention of one 2048-token sequence over a paged cache in
//                  the KV dtype, one KV head's group of q heads (the kernels prefill takes)
//   decode layer   the same layer on one row, over copies of its weights cycled so that the
//                  set (>= 256 MiB) is far larger than the caches, as a decode step streams
//                  every layer once: bytes of weights per second, pool dispatches included
//   LM head        the one-row GEMV over the [vocab, hidden] matrix (cold: it is far larger
//                  than the caches)
//   decode rows    the decode layer and the LM head again at each row count asked for
//                  (decode steps of several sequences: rank 0's rows of a layout), up to
//                  kMaxCalibratedDecodeRows; still counted in bytes of weights per second
//   decode alone   the decode layer on one row again, on one thread with the other cores
//                  idle (a PCP layout with fewer decodes than PCP ranks: the idle ranks leave
//                  the memory bus to the busy ones); measured when the pool has more than one
//                  thread
//   reads          bench peak's streaming read (the KV cache in decode)
// Every rate is per core with every thread of `pool` busy.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "core/thread_pool.h"
#include "model/model_config.h"

namespace cpinfer {

struct LayoutCalibration {
  double gemm_gflops_per_core = 0, attn_gflops_per_core = 0, read_gbps_per_core = 0;
  double weight_read_gbps_per_core = 0, lm_head_read_gbps_per_core = 0;
  // The one-row decode layer on one thread with the other cores idle, GB/s (0: not measured,
  // a one-thread pool).
  double weight_read_gbps_alone = 0;
  double read_gbps_1t = 0, fma_gflops_1t = 0;
  // Rows -> GB/s of weights per core, for the row counts asked for (> 1).
  std::map<int64_t, double> weight_read_gbps_at_rows, lm_head_read_gbps_at_rows;
  int threads = 1;
  int rounds = 1;  // interleaved rounds each rate is the median of (kCalibrationRounds)
};

// Decode row counts above this are not calibrated (their passes take long, and they are
// bound by the FLOPs, which the prefill GEMM rate models): the cost model's roofline.
inline constexpr int64_t kMaxCalibratedDecodeRows = 64;

// Every rate above is the median of this many interleaved rounds (time_interleaved_rounds).
inline constexpr int kCalibrationRounds = 3;

// One measurement: a call and the seconds to spend timing it.
struct TimedCall {
  double budget_s;
  std::function<void()> fn;
};

// Seconds per call of each of `calls`, measured in `rounds` interleaved rounds: after one
// warm-up call (in the first round), round r times every call (the median of as many calls as
// fit in budget_s / rounds by the warm-up's time, at least 1, at most 31) before round r + 1
// starts, and each result is the median of its rounds. A slow moment of a shared machine
// (another job, a throttled core) then spoils one round of the calls timed during it, not
// every sample of one of them. Example, 3 rounds, calls a and b: a0 b0 a1 b1 a2 b2,
// a = median(a0, a1, a2).
std::vector<double> time_interleaved_rounds(const std::vector<TimedCall>& calls,
                                            int rounds = kCalibrationRounds);

// kv_bytes: 2 (bf16 cache) or 4 (f32). decode_rows: row counts > 1 to calibrate the decode
// layer and the LM head at (those above kMaxCalibratedDecodeRows are skipped). Every rate is
// one call of one time_interleaved_rounds list, so a rate's rounds lie seconds apart. Takes a
// few seconds, plus about half a second per row count (more for 7B-class shapes: ~31 s
// for Llama-3.1-8B on a 2-core AMD EPYC Zen 3), and holds one block of random weights, the
// larger of the decode layer's copies and the LM head (a view of the same block), with the
// prefill pass's activations: ~0.47 GB peak for qwen2.5-0.5b, ~1.6 GB for Llama-3.1-8B.
LayoutCalibration calibrate_layout_rates(const ModelConfig& c, int64_t kv_bytes,
                                         ThreadPool& pool,
                                         const std::set<int64_t>& decode_rows = {});

}  // namespace cpinfer
