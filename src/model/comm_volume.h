// How many bytes a step moves between ranks, from the model's shapes and the layout: the
// formulas of docs/context-parallel.md §11. bench latency reports them beside the bytes it
// counted (comm_bytes_model) and a test checks that the two agree; the layout planner uses
// the same functions.
//
// Bytes are those world rank 0 receives from other ranks (the textbook algorithm's volume,
// Comm's recv_bytes), per traffic kind: `prefill` of ONE request of n tokens into an empty
// cache (its logits: the last token only), `decode` of a step of B decodes (one token each,
// every row's logits gathered; B = 1 for one request). Control traffic (the step plans) is
// not modelled: it is a few hundred bytes per step.
#pragma once
#include <array>
#include <cstdint>

#include "dist/comm.h"
#include "model/model_config.h"

namespace cpinfer {

using TrafficVolume = std::array<double, kNumTraffic>;

struct CommModelLayout {
  int64_t tp = 1, pcp = 1, dcp = 1;
  int64_t kv_bytes = 4;  // bytes per K/V element in the cache (f32 4, bf16 2)
};

// Example, tiny with 2 layers (H 512, 16 q / 2 kv heads of 32, V 151936), tp 2, pcp 2, dcp 1,
// f32 cache, n 1000 (c 250: rank 0 holds relative tokens 0-249 and 750-999):
//   kv_gather     2 layers x 500 rows from rank 1 x 2 x 1 kv head x 32 x 4 B = 256,000
//   hidden_gather the last token is rank 0's: 0
//   logits_gather 1 row x (151936 - 37984) x 4 B = 455,808
//   tp_all_reduce 2 per layer x 2 layers x 2 (2-1) x 500 rows x 512 x 4 B / 2 = 4,096,000
TrafficVolume prefill_comm_bytes(const ModelConfig& c, const CommModelLayout& l, int64_t n);
// Under PCP decode d runs on PCP rank d % P, so rank 0 runs ceil(B / P) of the B decodes and
// receives the others' q, k and v rows and final hidden rows.
TrafficVolume decode_comm_bytes(const ModelConfig& c, const CommModelLayout& l,
                                int64_t decodes = 1);

double total_bytes(const TrafficVolume& v);

}  // namespace cpinfer
