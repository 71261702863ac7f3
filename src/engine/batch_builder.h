// Turns a step's sequences into a ForwardBatch: allocates the pages the new tokens need
// and computes their positions, cache slots and the CSR page table.
#pragma once
#include <vector>

#include "attention/page_pool.h"
#include "engine/sequence_state.h"
#include "model/forward_batch.h"

namespace cpinfer {

// Pages a sequence of `tokens` tokens needs: ceil(tokens / page_size).
int64_t pages_needed(int64_t tokens, int64_t page_size);

// Allocates pages (throws Error if the pool runs out: callers check capacity first) and
// fills `out`. Example, page_size 4, a sequence with 5 cached tokens in pages {3, 9}
// appending 4 tokens: positions 5..8, slots 9*4+1, 9*4+2, 9*4+3, p*4+0 with p a new page.
void build_forward_batch(const std::vector<SequenceStep>& steps, int64_t page_size,
                         PagePool& pool, ForwardBatch* out);

// Marks the step's tokens as cached (call after a successful forward).
void commit_step(const std::vector<SequenceStep>& steps);

}  // namespace cpinfer
