// Helpers of the engine-vs-reference tests (tests/unit/forward_reference*_test.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cpinfer::testing {

// n ordinary (non-special) Qwen token ids, from a seeded generator: ids in [0, max_id]
// (151642: the real vocabulary's last ordinary id).
std::vector<int32_t> random_prompt(int64_t n, uint64_t seed, int32_t max_id = 151642);

// Max |engine - reference| over rows x V logits; also expects the reference logits to be
// spread (std > 0.5): a model whose logits are all alike would make the comparison weak.
double max_diff(const float* engine, const std::vector<double>& ref, int64_t rows, int64_t V);

// The model in `dir` on one rank against ReferenceModel(dir), on one random prompt of n
// tokens (seed): max |engine - reference| over the logits of `rows`, after
// - prefill_vs_reference: one prefill of the whole prompt (all rows kept);
// - chunked_decode_vs_reference: prefill in chunks of `chunk` tokens (page size 16, each
//   chunk attending to the cached ones), then `decode_steps` greedy decode steps; the rows
//   compared are the prompt's last and every decoded position.
double prefill_vs_reference(const std::string& dir, int64_t n, const std::vector<int64_t>& rows,
                            uint64_t seed);
double chunked_decode_vs_reference(const std::string& dir, int64_t n, int64_t chunk,
                                   int decode_steps, uint64_t seed);

}  // namespace cpinfer::testing
