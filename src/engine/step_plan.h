// What every rank executes in one engine step, decided by rank 0 and broadcast as a
// compact byte string (architecture.md: rank 0 is the only scheduler).
#pragma once
#include <cstdint>
#include <vector>

#include "attention/sequence_state.h"

namespace cpinfer {

// One change to the KV pages of one context-parallel rank, decided by rank 0's block
// manager (engine/block_manager.h) and applied, in plan order, by every rank of that CP
// rank (its TP ranks alike) before the step runs. Page ids are that rank's own.
struct PageOp {
  enum Kind : int32_t {
    Take = 0,        // sequence `seq` appends free page `page` (ref count 1)
    Share = 1,       // `seq` appends cached page `page` (one more reference)
    Copy = 2,        // `seq` appends free page `page`, holding a copy of the first `rows`
                     // slots of page `src` (its cached prefix ends inside that page)
    Ref = 3,         // the prefix cache keeps `page` (one more reference)
    Unref = 4,       // the prefix cache lets `page` go (one reference less)
    ReleaseSeq = 5,  // `seq` returns every page it holds and is forgotten
  };
  int32_t kind = Take;
  int32_t cp_rank = 0;  // the CP rank R whose pages these are; -1: every rank (ReleaseSeq)
  int64_t seq = 0;
  int32_t page = -1, src = -1;
  int32_t rows = 0, reserved = 0;
};

struct StepPlan {
  enum class Kind : int32_t {
    Forward = 0,   // apply page_ops, then run the listed sequences' new tokens
    Pages = 1,     // apply page_ops only (releases, cache evictions)
    Shutdown = 2,  // workers leave their loop
    Audit = 3,     // apply page_ops, then every rank reports its free KV pages to rank 0
  };
  struct Seq {
    int64_t id = 0;          // the engine's request id
    int64_t num_tokens = 0;  // new tokens this step (Forward)
    int32_t all_logits = 0;  // logits of every new token instead of only the last
    // What its logit row is wanted for. A step whose every row wants only its argmax (or
    // nothing) gathers one (value, id) pair per row and rank instead of the logits; a
    // sequence whose row nobody reads (RowUse::None) has no row in the step at all.
    RowUse row_use = RowUse::Logits;  // 4 bytes on the wire
    int64_t begin = 0;       // tokens already cached (the position of the first new token)
  };
  Kind kind = Kind::Forward;
  // 1: page_ops give every page the step needs (the engine's block manager decides); each
  // rank checks that its sequences hold exactly their share. 0: each rank's planner takes
  // pages from its own pool (generate, bench latency: one sequence, no sharing).
  int32_t pages_from_ops = 0;
  std::vector<PageOp> page_ops;
  std::vector<Seq> seqs;
  std::vector<int32_t> tokens;  // the new tokens of all sequences, back to back

  // Layout: [kind i32][pages_from_ops i32][num_ops i64][num_seqs i64][num_tokens i64]
  // [ops...][seqs...][tokens...] (host byte order: every rank runs the same binary on the
  // same architecture).
  std::vector<uint8_t> serialize() const;
  // Throws Error on a truncated or inconsistent buffer.
  static StepPlan deserialize(const std::vector<uint8_t>& bytes);
};

}  // namespace cpinfer
