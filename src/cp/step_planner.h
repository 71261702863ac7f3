// The one per-rank step planner (docs/context-parallel.md §4-§8). Every rank turns the
// step's sequences (rank 0's StepPlan, the same on every rank) into its own share, once per
// step before layer 0 ("plan, then run"): the tokens it runs and their positions, where
// their K/V goes in its cache, which final rows give logits, and the attention work.
//
// A sequence in a step has C cached tokens and n >= 1 new ones. Three kinds:
//   prefill  C == 0:          new tokens attend causally among themselves.
//   chunk    C > 0,  n > 1:   the same, plus every new query attends to the cached context
//                             [0, C), which is sharded over the W ranks (§8).
//   decode   C > 0,  n == 1:  one query (a decode step, or a prompt chunk of one token)
//                             against the context including itself.
//
// W == 1 (one rank holds everything): every new row is written to the cache first, then one
// paged causal attention over [0, C + n) covers all three kinds ("paged" work below).
//
// W > 1:
//   - prefill and chunk tokens: with pcp > 1 split DualChunkSwap-style (pcp_partition.h),
//     K/V all-gathered over PCP and restored to padded global order; with pcp == 1 run
//     whole. Causal attention over that contiguous "new K/V" buffer (head/tail chunks
//     under PCP), positions offset by C. Each rank writes the new tokens it owns.
//   - decode tokens: each runs on one PCP rank, its home (decode d of the step on PCP rank
//     d % P), after the prefill and chunk rows; under pcp > 1 its q, k and v rows are
//     all-gathered over PCP with the chunk queries, and the owner writes the token's K/V.
//   - the "shard" queries: the decode queries and, for chunks, the new queries (under
//     pcp > 1 all-gathered over PCP, so every PCP rank holds the same shard query set)
//     attend, non-causally, to this rank's local shard of the context: local_len(C + 1)
//     tokens for a decode, local_len(C) for a chunk. Their states are combined over DCP
//     and PCP (§6) and, for chunks, merged into the causal state of this rank's own rows.
//
// Worked example (docs/context-parallel.md §8): W 4 (pcp 2 x dcp 2), I 8, a 2-chunk prompt
// of 24 + 12 tokens. Step 2 (C 24, n 12, P 2 -> padded 12, c 3): PCP rank 0 runs relative
// tokens 0-2 and 9-11 (positions 24-26, 33-35), rank 1 runs 3-8 (27-32). Causal: rank 0's
// head chunk sees new tokens 0-2, its tail chunk 0-11. Context [0, 24): R0 holds 0-7, R1
// 8-15, R2 16-23, R3 none; each attends the 12 gathered queries to its shard, combines,
// and merges. New K/V: positions 24-31 go to R3 (24 / 8 % 4), 32-35 to R0.
#pragma once
#include <cstdint>
#include <vector>

#include "attention/page_pool.h"
#include "attention/sequence_state.h"
#include "cp/cp_layout.h"
#include "cp/pcp_partition.h"

namespace cpinfer {

// A ragged attention batch as plan_attention takes it (kernels/attention.h AttentionBatch).
struct AttentionWork {
  std::vector<int64_t> q_indptr;     // [S + 1] query rows of pseudo-sequence s
  std::vector<int64_t> kv_lens;      // [S]
  std::vector<int32_t> page_indptr;  // [S + 1] CSR into page_indices
  std::vector<int32_t> page_indices;
  int64_t num_seqs() const { return int64_t(kv_lens.size()); }
  void clear();
  // Appends one pseudo-sequence of q_len rows over kv_len tokens at pages[0, num_pages).
  void add(int64_t q_len, int64_t kv_len, const int32_t* pages, int64_t num_pages);
};

struct RankStep {
  CpLayout layout;
  // Local rows: the tokens this rank runs, in request order (PCP pads copy the request's
  // first token and sit at position 0); with W > 1 the prefill and chunk rows first, then
  // the decodes this rank runs.
  std::vector<int32_t> tokens;     // [T]
  std::vector<int32_t> positions;  // [T]

  // ---- W == 1: write row t to slots[t], then causal paged attention (`paged`).
  std::vector<int64_t> slots;  // [T]
  AttentionWork paged;

  // ---- W > 1.
  // PCP K/V gather (pcp > 1), pad-free: this rank sends the local rows of its real prefill
  // and chunk tokens (gather_rows, in local order); PCP rank k sends gather_counts[k] rows,
  // which land at row gather_displs[k] of the gathered buffer. `restore[i]`: the gathered
  // row of padded-global row i, or -1 for a pad (its buffer row is zero and never seen by
  // a real query: pads are the last positions of their request).
  std::vector<int64_t> gather_rows;
  std::vector<int> gather_counts, gather_displs;  // [pcp], in rows
  std::vector<int64_t> restore;
  // The new K/V buffer: pcp > 1: the restored gathered rows; pcp == 1: every local row.
  // new_kv_slots[i]: the cache slot of buffer row i on this rank, or -1 (not owned, a pad,
  // a decode row).
  int64_t new_kv_rows = 0;
  std::vector<int64_t> new_kv_slots;
  // pcp == 1: causal attention over the buffer (as a cache of page size 1 whose "pages" are
  // buffer rows): query rows are the local rows in order; decode rows are empty
  // pseudo-sequences.
  AttentionWork causal;
  // pcp > 1, the same attention in two parts merged by LSE, so that the first needs no
  // communication and runs while the K/V gather is in flight:
  //   local:  over this rank's own rows (pages = local rows): the head chunk causally over
  //           itself; the tail chunk over the head chunk and causally over itself (its
  //           local rows are head then tail, so one bottom-right causal block of kv 2c).
  //   remote: over the other ranks' chunks it must see (pages = buffer rows), non-causal:
  //           the head chunk r over chunks 0..r-1, the tail chunk 2P-1-r over chunks
  //           0..2P-2-r except r. Rank 0's head chunk has none (an empty state).
  // Both cover every local row (decode rows: empty pseudo-sequences).
  AttentionWork local, remote;
  // Decodes: the local rows of those this rank runs (all of them without PCP; under PCP
  // decode d of the step runs on PCP rank d % P); decode_counts[p]: how many PCP rank p runs
  // ([1] without PCP); decode_slots: per decode in shard order (below), its cache slot on
  // this rank, or -1 when another rank owns the token.
  std::vector<int64_t> decode_rows, decode_slots;
  std::vector<int> decode_counts;
  // Chunk rows (C > 0, n > 1): their local rows, in local order (same count on every PCP
  // rank). Under pcp > 1 their queries are all-gathered over PCP.
  std::vector<int64_t> chunk_rows;
  // Shard attention over this rank's cache. Query rows: pcp blocks (one without PCP), block
  // p = PCP rank p's [decode_counts[p] decodes, in its local order][chunk_rows.size() chunk
  // rows]. Example, P 2, decodes d0..d2, 2 chunk rows per rank: [d0 d2 c0 c1 | d1 c0' c1'].
  AttentionWork shard;

  // Logits: rows of the final hidden state, local rows (from_gathered 0) or rows of the
  // PCP-gathered final hidden rows (1). That gather carries only the rows that give logits:
  // this rank sends its local rows hidden_rows; PCP rank k sends hidden_counts[k] rows,
  // landing at hidden_displs[k] (a prefill's last token is held by one PCP rank).
  std::vector<int64_t> logit_rows;
  std::vector<uint8_t> logit_from_gathered;
  std::vector<int64_t> hidden_rows;
  std::vector<int> hidden_counts, hidden_displs;  // [pcp], in rows

  int64_t num_tokens() const { return int64_t(tokens.size()); }
  int64_t num_shard_queries() const { return shard.q_indptr.empty() ? 0 : shard.q_indptr.back(); }
};

// Plans one step for this rank and grows each sequence's page list to hold its local share
// of C + n tokens (the caller checks capacity first: throws Error when the pool runs out).
// Reuses out's vectors (and `scratch`): once warm, planning allocates nothing.
class StepPlanner {
 public:
  explicit StepPlanner(const CpLayout& layout) : layout_(layout) {}
  const CpLayout& layout() const { return layout_; }
  void plan(const std::vector<SequenceStep>& steps, PagePool& pool, RankStep* out);

 private:
  void plan_single(const std::vector<SequenceStep>& steps, RankStep& s);
  void plan_parallel(const std::vector<SequenceStep>& steps, RankStep& s);
  // Slot of position p on this rank, or -1 when another rank owns it.
  int64_t slot_of(const SequenceState& seq, int64_t p) const;

  // Turns the gathered logit rows (padded-global rows of request logit_req_[r]) into rows
  // of the final hidden gather.
  void plan_hidden_gather(RankStep& s);

  CpLayout layout_;
  std::vector<PcpRequest> reqs_;
  PcpPartition part_;
  std::vector<int64_t> local_offset_, logit_req_, hidden_next_;
  // The step's decodes: request index of decode d, and decode index of each request (-1 for
  // the others); local rows before the decodes (the same on every PCP rank).
  std::vector<int64_t> decode_req_, decode_index_;
  int64_t prefill_rows_ = 0;
};

// Marks the step's tokens as cached (after a successful forward).
void commit_step(const std::vector<SequenceStep>& steps);

}  // namespace cpinfer
