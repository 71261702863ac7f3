// Everything one rank needs to run a step under context parallelism (W = pcp * dcp > 1),
// planned once before layer 0 (architecture.md: "plan, then run"):
//   - which tokens this rank runs (PCP-split prefill chunks, replicated decodes),
//   - the K/V gather/restore for PCP prefill and which gathered rows this rank caches,
//   - the attention work: causal attention over contiguous K/V ("prefill buffer") and
//     sharded decode attention over this rank's pages, combined over DCP and PCP,
//   - which final hidden rows give logits.
//
// Sequence kinds in a step (C = tokens already cached, n = new tokens):
//   prefill (C == 0): with pcp > 1 split by partition_pcp and K/V all-gathered over PCP;
//                     with pcp == 1 run whole on every rank (no DCP traffic, §4).
//   decode  (C > 0, n == 1): run on every rank; the token's K/V goes to its owner only;
//                     attention over each rank's shard, then the DCP and PCP combines (§6).
//   C > 0 and n > 1 (chunked prefill over sharded context, §8) is refused with an Error.
#pragma once
#include <cstdint>
#include <vector>

#include "attention/page_pool.h"
#include "cp/kv_ownership.h"
#include "cp/pcp_partition.h"
#include "engine/sequence_state.h"

namespace cpinfer {

struct CpRanks {
  int64_t pcp = 1, pcp_rank = 0, dcp = 1, dcp_rank = 0, interleave = 1;
  int64_t world() const { return pcp * dcp; }          // W
  int64_t rank() const { return pcp_rank * dcp + dcp_rank; }  // R
};

struct CpStep {
  // Local tokens this rank runs, in request order.
  std::vector<int32_t> tokens;     // [T]
  std::vector<int32_t> positions;  // [T] true positions (pads: 0)
  // Rows of the local tokens that take part in the PCP gather (split prefill requests),
  // in local order; the gathered buffer is [pcp * size, ...] and `restore` puts it in
  // padded global order (§4 step 6). Empty when pcp == 1.
  std::vector<int64_t> gather_rows;
  std::vector<int64_t> restore;
  // The "prefill buffer": contiguous K/V that causal attention reads. With pcp > 1 it is
  // the restored gathered K/V (padded global order); with pcp == 1 it is a copy of every
  // local row's K/V. Its row count:
  int64_t prefill_buf_rows = 0;
  std::vector<int64_t> prefill_buf_slots;  // [prefill_buf_rows] cache slot to write, or -1
  // Causal attention over the prefill buffer, as a ragged batch of pseudo-sequences
  // (PCP: a head and a tail chunk per request): query rows [q_indptr[i], q_indptr[i+1]) of
  // the local tokens attend to buffer rows buf_rows[buf_indptr[i] ..] (bottom-right causal).
  std::vector<int64_t> pf_q_indptr, pf_kv_lens;
  std::vector<int32_t> pf_kv_indptr, pf_kv_rows;
  // Decode tokens: their local rows, the local KV length after this step's write, and the
  // local page table (CSR). Their K/V is written from the local row to local_slots.
  std::vector<int64_t> decode_rows;
  std::vector<int64_t> decode_kv_lens;
  std::vector<int32_t> decode_page_indptr, decode_pages;
  std::vector<int64_t> decode_slots;  // [decode_rows.size()] slot or -1 (not the owner)
  std::vector<int64_t> decode_q_indptr;  // 0, 1, ..., decode_rows.size() (one query each)
  // Logits: rows of the final hidden state, either local rows (from_gathered 0) or rows of
  // the restored PCP-gathered prefill hidden states (1).
  std::vector<int64_t> logit_rows;
  std::vector<uint8_t> logit_from_gathered;

  int64_t num_tokens() const { return int64_t(tokens.size()); }
};

// Plans the step and allocates this rank's pages (each rank keeps only its owned
// tokens: page count ceil(local_len / page_size)). Throws Error for unsupported shapes
// or when the pool is short (check capacity first).
void build_cp_step(const std::vector<SequenceStep>& steps, const CpRanks& ranks,
                   int64_t page_size, PagePool& pool, CpStep* out);

// Pages rank R needs for a sequence of L tokens under this layout.
int64_t cp_pages_needed(int64_t L, const CpRanks& ranks, int64_t page_size);

}  // namespace cpinfer
