// What one forward step computes: a ragged batch of sequences, each contributing some
// new tokens (a prefill chunk or one decode token) whose K/V go to the given cache slots.
#pragma once
#include <cstdint>
#include <vector>

namespace cpinfer {

struct CpStep;

struct ForwardBatch {
  std::vector<int32_t> tokens;       // [T] token ids, sequences back to back
  std::vector<int32_t> positions;    // [T] absolute position of each token (for RoPE)
  std::vector<int64_t> slots;        // [T] KV-cache slot (page * page_size + offset), -1: skip
  std::vector<int64_t> q_indptr;     // [S + 1] token rows of sequence s: [q_indptr[s], q_indptr[s+1])
  std::vector<int64_t> kv_lens;      // [S] tokens of sequence s in the cache after this step
  std::vector<int32_t> page_indptr;  // [S + 1] CSR into page_indices
  std::vector<int32_t> page_indices; // pages of each sequence in order
  std::vector<int64_t> logit_rows;   // rows of T whose logits are wanted (e.g. each last row)
  // Under context parallelism (pcp * dcp > 1) the step is planned by build_cp_step and the
  // fields above are unused: tokens, positions, cache writes and logit rows come from here.
  const CpStep* cp = nullptr;

  // Empties the batch for the next step, keeping the vectors' capacity (no allocation per
  // step once the buffers have grown to the step sizes seen).
  void clear() {
    for (auto* v : {&tokens, &positions, &page_indptr, &page_indices}) v->clear();
    for (auto* v : {&slots, &q_indptr, &kv_lens, &logit_rows}) v->clear();
    cp = nullptr;
  }

  int64_t num_tokens() const { return int64_t(tokens.size()); }
  int64_t num_seqs() const { return int64_t(kv_lens.size()); }
};

}  // namespace cpinfer
