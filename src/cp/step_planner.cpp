#include "cp/step_planner.h"

#include "core/error.h"

namespace cpinfer {

void AttentionWork::clear() {
  q_indptr.assign(1, 0);
  kv_lens.clear();
  page_indptr.assign(1, 0);
  page_indices.clear();
}

void AttentionWork::add(int64_t q_len, int64_t kv_len, const int32_t* pages, int64_t num_pages) {
  q_indptr.push_back(q_indptr.back() + q_len);
  kv_lens.push_back(kv_len);
  page_indices.insert(page_indices.end(), pages, pages + num_pages);
  page_indptr.push_back(int32_t(page_indices.size()));
}

void commit_step(const std::vector<SequenceStep>& steps) {
  for (const SequenceStep& s : steps) s.seq->num_cached += s.num_tokens;
}

namespace {
// The first of a sequence's new tokens whose row gives logits (rows first..n-1 do):
// 0 with all_logits, n when nobody reads the row (no row), else n - 1 (the last token).
int64_t first_logit_row(const SequenceStep& st) {
  if (st.all_logits) return 0;
  return st.row_use == RowUse::None ? st.num_tokens : st.num_tokens - 1;
}
}  // namespace

int64_t StepPlanner::slot_of(const SequenceState& seq, int64_t p) const {
  // W 4, I 8, page size 16: p 35 is owned by R0 (35 / 8 % 4 == 0), local index 11 -> page
  // seq.pages[0], offset 11.
  if (layout_.owner(p) != layout_.rank()) return -1;
  const int64_t li = layout_.local_index(p), B = layout_.page_size;
  return int64_t(seq.pages[size_t(li / B)]) * B + li % B;
}

void StepPlanner::plan(const std::vector<SequenceStep>& steps, PagePool& pool, RankStep* out) {
  RankStep& s = *out;
  s.layout = layout_;
  for (auto* v : {&s.slots, &s.gather_rows, &s.restore, &s.new_kv_slots, &s.decode_rows,
                  &s.decode_slots, &s.chunk_rows, &s.logit_rows, &s.hidden_rows})
    v->clear();
  for (auto* v : {&s.gather_counts, &s.gather_displs, &s.hidden_counts, &s.hidden_displs,
                  &s.decode_counts})
    v->clear();
  logit_req_.clear();
  s.tokens.clear();
  s.positions.clear();
  s.logit_from_gathered.clear();
  s.new_kv_rows = 0;
  for (AttentionWork* w : {&s.paged, &s.causal, &s.local, &s.remote, &s.shard}) w->clear();
  for (const SequenceStep& st : steps) {
    CPI_CHECK(st.num_tokens >= 1, "a sequence step must add at least one token");
    SequenceState& seq = *st.seq;
    const int64_t need = layout_.pages_needed(seq.num_cached + st.num_tokens) -
                         int64_t(seq.pages.size());
    if (need > 0) pool.allocate_into(int32_t(need), &seq.pages);
  }
  if (layout_.world() == 1) plan_single(steps, s);
  else plan_parallel(steps, s);
}

void StepPlanner::plan_single(const std::vector<SequenceStep>& steps, RankStep& s) {
  // Example, page size 4, 5 cached tokens in pages {3, 9}, 4 new: positions 5..8, slots
  // 9*4+1, 9*4+2, 9*4+3, p*4+0 with p the new page; one pseudo-sequence of 4 rows over 9.
  const int64_t B = layout_.page_size;
  for (const SequenceStep& st : steps) {
    const SequenceState& seq = *st.seq;
    const int64_t C = seq.num_cached, n = st.num_tokens, row0 = s.num_tokens();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = C + i;
      s.tokens.push_back(st.tokens[i]);
      s.positions.push_back(int32_t(p));
      s.slots.push_back(int64_t(seq.pages[size_t(p / B)]) * B + p % B);
    }
    for (int64_t i = first_logit_row(st); i < n; ++i) {
      s.logit_rows.push_back(row0 + i);
      s.logit_from_gathered.push_back(0);
    }
    s.paged.add(n, C + n, seq.pages.data(), layout_.pages_needed(C + n));
  }
}

void StepPlanner::plan_parallel(const std::vector<SequenceStep>& steps, RankStep& s) {
  const int64_t P = layout_.pcp;
  reqs_.clear();
  for (const SequenceStep& st : steps)
    reqs_.push_back({st.num_tokens, st.seq->num_cached > 0 && st.num_tokens == 1});
  if (P > 1) partition_pcp(reqs_, P, layout_.pcp_rank, &part_);

  // Pass 1: local rows (tokens, positions), the PCP gather rows, decode and chunk rows.
  // Prefill and chunk rows come first, in request order (the same count on every PCP rank,
  // so a request's local rows line up everywhere); then the decodes this rank runs. Under
  // PCP each decode runs on one PCP rank, its home: decode d (the step's decodes counted in
  // request order) on PCP rank d % P. Example, P 2, requests [decode, prefill of 5, decode,
  // decode]: decodes 0 and 2 (requests 0 and 3) run on rank 0, decode 1 (request 2) on
  // rank 1; rank 0's local rows are [4 prefill rows | request 0 | request 3].
  local_offset_.assign(steps.size(), -1);
  decode_index_.assign(steps.size(), -1);
  decode_req_.clear();
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& st = steps[i];
    const int64_t C = st.seq->num_cached;
    const bool decode = reqs_[i].is_decode, chunk = C > 0 && !decode;
    if (decode) {
      decode_index_[i] = int64_t(decode_req_.size());
      decode_req_.push_back(int64_t(i));
      continue;
    }
    local_offset_[i] = s.num_tokens();
    if (P > 1) {
      for (int64_t k = 0; k < part_.local_count[i]; ++k) {
        const size_t t = size_t(part_.local_offset[i] + k);
        const int64_t src = part_.local_src[t];
        if (chunk) s.chunk_rows.push_back(s.num_tokens());
        if (src >= 0) s.gather_rows.push_back(s.num_tokens());  // pads are not gathered
        s.tokens.push_back(st.tokens[src >= 0 ? src : 0]);
        s.positions.push_back(int32_t(src >= 0 ? C + part_.local_pos[t] : 0));
      }
      continue;
    }
    for (int64_t k = 0; k < st.num_tokens; ++k) {
      if (chunk) s.chunk_rows.push_back(s.num_tokens());
      s.tokens.push_back(st.tokens[k]);
      s.positions.push_back(int32_t(C + k));
    }
  }
  prefill_rows_ = s.num_tokens();
  const int64_t Dt = int64_t(decode_req_.size()), me = layout_.pcp_rank;
  s.decode_counts.assign(size_t(P), 0);
  for (int64_t d = 0; d < Dt; ++d) {
    s.decode_counts[size_t(d % P)]++;
    if (d % P != me) continue;
    const SequenceStep& st = steps[size_t(decode_req_[size_t(d)])];
    local_offset_[size_t(decode_req_[size_t(d)])] = s.num_tokens();
    s.decode_rows.push_back(s.num_tokens());
    s.tokens.push_back(st.tokens[0]);
    s.positions.push_back(int32_t(st.seq->num_cached));
  }
  if (P > 1) {
    s.restore = part_.real_restore;
    for (int64_t k = 0, off = 0; k < P; ++k) {
      s.gather_counts.push_back(int(part_.real_count[size_t(k)]));
      s.gather_displs.push_back(int(off));
      off += part_.real_count[size_t(k)];
    }
    CPI_ASSERT(s.gather_counts[size_t(layout_.pcp_rank)] == int(s.gather_rows.size()));
  }
  s.new_kv_rows = P > 1 ? part_.gathered_tokens : s.num_tokens();
  s.new_kv_slots.assign(size_t(s.new_kv_rows), -1);

  // Pass 2: causal work over the new K/V buffer, cache writes, logit rows, decode shards.
  // The buffer's "page table" lists buffer rows (page size 1), so a head chunk and a tail
  // chunk can both point at their request's first rows.
  auto add_rows = [](AttentionWork& w, int64_t q_len, int64_t kv_begin, int64_t kv_len) {
    w.q_indptr.push_back(w.q_indptr.back() + q_len);
    w.kv_lens.push_back(kv_len);
    for (int64_t j = 0; j < kv_len; ++j) w.page_indices.push_back(int32_t(kv_begin + j));
    w.page_indptr.push_back(int32_t(w.page_indices.size()));
  };
  auto add_causal = [&](int64_t q_len, int64_t kv_begin, int64_t kv_len) {
    add_rows(s.causal, q_len, kv_begin, kv_len);
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& st = steps[i];
    const SequenceState& seq = *st.seq;
    const int64_t C = seq.num_cached, n = st.num_tokens, off = local_offset_[i];
    if (reqs_[i].is_decode) {
      // Its logits: under PCP from its home rank through the final hidden gather.
      if (first_logit_row(st) == 0) {
        s.logit_rows.push_back(P > 1 ? 0 : off);
        s.logit_from_gathered.push_back(P > 1 ? 1 : 0);
        if (P > 1) logit_req_.push_back(int64_t(i));
      }
      continue;
    }
    if (P > 1) {
      // Head chunk r sees the first (r + 1) c new tokens, tail chunk 2P-1-r the first
      // (2P - r) c (bottom-right causal inside each). Split into own rows and other ranks'.
      // Example, P 2, c 3, rank 1: head chunk 1 (local rows off..off+2) sees its own rows
      // causally and buffer rows start+0..2 (chunk 0); tail chunk 2 (local rows off+3..off+5)
      // sees local rows off..off+5 (chunk 1 fully, itself causally) and buffer rows
      // start+0..2 (chunk 0).
      const int64_t c = part_.chunk[i], r = layout_.pcp_rank, start = part_.padded_start[i];
      add_rows(s.local, c, off, c);
      add_rows(s.local, c, off, 2 * c);
      add_rows(s.remote, c, start, r * c);  // chunks 0 .. r-1
      // chunks 0 .. 2P-2-r without chunk r (this rank's head, seen locally)
      s.remote.q_indptr.push_back(s.remote.q_indptr.back() + c);
      s.remote.kv_lens.push_back((2 * P - 2 - r) * c);
      for (int64_t j = 0; j < (2 * P - 1 - r) * c; ++j)
        if (j / c != r) s.remote.page_indices.push_back(int32_t(start + j));
      s.remote.page_indptr.push_back(int32_t(s.remote.page_indices.size()));
      for (int64_t p = 0; p < n; ++p) s.new_kv_slots[size_t(start + p)] = slot_of(seq, C + p);
      for (int64_t p = first_logit_row(st); p < n; ++p) {
        s.logit_rows.push_back(p);  // relative to the request: plan_hidden_gather maps it
        s.logit_from_gathered.push_back(1);
        logit_req_.push_back(int64_t(i));
      }
    } else {
      add_causal(n, off, n);
      for (int64_t p = 0; p < n; ++p) s.new_kv_slots[size_t(off + p)] = slot_of(seq, C + p);
      for (int64_t p = first_logit_row(st); p < n; ++p) {
        s.logit_rows.push_back(off + p);
        s.logit_from_gathered.push_back(0);
      }
    }
  }
  // The decode rows (after every prefill and chunk row) have no new-token work: empty
  // pseudo-sequences keep the query rows aligned with the local rows.
  for (size_t k = 0; k < s.decode_rows.size(); ++k) {
    if (P > 1) {
      add_rows(s.local, 1, 0, 0);
      add_rows(s.remote, 1, 0, 0);
    } else {
      add_causal(1, 0, 0);
    }
  }
  // Shard queries, P blocks (one without PCP): block p holds PCP rank p's decodes (decode
  // d = p, p + P, ...: the context and the token itself, local_len(C + 1); the owner writes
  // the token first), then its chunk rows, which for each chunk request are as many as this
  // rank's (2c under PCP, n without) and see the cached context [0, C).
  for (int64_t p = 0; p < P; ++p) {
    for (int64_t d = p; d < Dt; d += P) {
      const SequenceStep& st = steps[size_t(decode_req_[size_t(d)])];
      const SequenceState& seq = *st.seq;
      const int64_t C = seq.num_cached;
      s.decode_slots.push_back(slot_of(seq, C));
      s.shard.add(1, layout_.local_len(C + 1), seq.pages.data(), layout_.pages_needed(C + 1));
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      const SequenceStep& st = steps[i];
      const int64_t C = st.seq->num_cached;
      if (C == 0 || reqs_[i].is_decode) continue;
      const int64_t q_len = P > 1 ? part_.local_count[i] : st.num_tokens;
      s.shard.add(q_len, layout_.local_len(C), st.seq->pages.data(), layout_.pages_needed(C));
    }
  }
  if (P > 1 && !logit_req_.empty()) plan_hidden_gather(s);
  CPI_ASSERT((P > 1 ? s.local : s.causal).q_indptr.back() == s.num_tokens());
  CPI_ASSERT(P == 1 || s.remote.q_indptr.back() == s.num_tokens());
  CPI_ASSERT(s.num_shard_queries() == Dt + P * int64_t(s.chunk_rows.size()));
}

}  // namespace cpinfer

namespace cpinfer {

void StepPlanner::plan_hidden_gather(RankStep& s) {
  // New token j (relative) of request q lies in chunk k = j / c, held by PCP rank k (head)
  // or 2P-1-k (tail), at local row local_offset[q] + (k < P ? 0 : c) + j % c there (prefill
  // and chunk rows line up on every PCP rank). Decode d is row prefill_rows + d / P of its
  // home rank d % P (P 2, 3 prefill rows: decode 3 is rank 1's row 4). Example, P 2, one request of 8 (c 2): its last token
  // j 7 is in chunk 3, rank 0's tail, local row 2 + 1 = 3; rank 0 sends 1 row, rank 1 none.
  const int64_t P = layout_.pcp, me = layout_.pcp_rank;
  s.hidden_counts.assign(size_t(P), 0);
  // r: index into logit_rows, g: the same row's index among the gathered ones.
  auto owner_of = [&](size_t r, size_t g, int64_t* local_row) {
    const size_t q = size_t(logit_req_[g]);
    if (const int64_t d = decode_index_[q]; d >= 0) {  // decode d: row j = d / P of rank d % P
      *local_row = prefill_rows_ + d / P;
      return d % P;
    }
    const int64_t j = s.logit_rows[r], c = part_.chunk[q], k = j / c;
    *local_row = local_offset_[q] + (k < P ? 0 : c) + j % c;
    return k < P ? k : 2 * P - 1 - k;
  };
  size_t g = 0;  // index into logit_req_ (gathered logit rows only)
  for (size_t r = 0; r < s.logit_rows.size(); ++r) {
    if (!s.logit_from_gathered[r]) continue;
    int64_t row = 0;
    s.hidden_counts[size_t(owner_of(r, g++, &row))]++;
  }
  hidden_next_.assign(size_t(P), 0);
  for (int64_t k = 0, off = 0; k < P; ++k) {
    s.hidden_displs.push_back(int(off));
    hidden_next_[size_t(k)] = off;
    off += s.hidden_counts[size_t(k)];
  }
  g = 0;
  for (size_t r = 0; r < s.logit_rows.size(); ++r) {
    if (!s.logit_from_gathered[r]) continue;
    int64_t row = 0;
    const int64_t owner = owner_of(r, g++, &row);
    if (owner == me) s.hidden_rows.push_back(row);
    s.logit_rows[r] = hidden_next_[size_t(owner)]++;
  }
}

}  // namespace cpinfer
