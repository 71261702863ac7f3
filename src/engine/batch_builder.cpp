#include "engine/batch_builder.h"

#include "core/error.h"

namespace cpinfer {

int64_t pages_needed(int64_t tokens, int64_t page_size) {
  return (tokens + page_size - 1) / page_size;
}

void build_forward_batch(const std::vector<SequenceStep>& steps, int64_t page_size,
                         PagePool& pool, ForwardBatch* out) {
  ForwardBatch& b = *out;
  b.clear();
  b.q_indptr.push_back(0);
  b.page_indptr.push_back(0);
  for (const SequenceStep& s : steps) {
    CPI_CHECK(s.num_tokens > 0, "a sequence step must add at least one token");
    SequenceState& seq = *s.seq;
    const int64_t start = seq.num_cached, end = start + s.num_tokens;
    int64_t need = pages_needed(end, page_size) - int64_t(seq.pages.size());
    if (need > 0) pool.allocate_into(int32_t(need), &seq.pages);
    for (int64_t i = 0; i < s.num_tokens; ++i) {
      int64_t p = start + i;
      b.tokens.push_back(s.tokens[i]);
      b.positions.push_back(int32_t(p));
      b.slots.push_back(int64_t(seq.pages[size_t(p / page_size)]) * page_size + p % page_size);
    }
    const int64_t row0 = b.q_indptr.back();
    if (s.all_logits)
      for (int64_t i = 0; i < s.num_tokens; ++i) b.logit_rows.push_back(row0 + i);
    else
      b.logit_rows.push_back(row0 + s.num_tokens - 1);
    b.q_indptr.push_back(row0 + s.num_tokens);
    b.kv_lens.push_back(end);
    const int64_t used = pages_needed(end, page_size);
    b.page_indices.insert(b.page_indices.end(), seq.pages.begin(), seq.pages.begin() + used);
    b.page_indptr.push_back(int32_t(b.page_indices.size()));
  }
}

void commit_step(const std::vector<SequenceStep>& steps) {
  for (const SequenceStep& s : steps) s.seq->num_cached += s.num_tokens;
}

}  // namespace cpinfer
