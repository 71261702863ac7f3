#include "cp/cp_step.h"

#include "core/error.h"

namespace cpinfer {

int64_t cp_pages_needed(int64_t L, const CpRanks& ranks, int64_t page_size) {
  KvOwnership own{ranks.world(), ranks.interleave};
  return (own.local_len(L, ranks.rank()) + page_size - 1) / page_size;
}

namespace {

// Grows a sequence's page list to hold its local share of L tokens.
void ensure_pages(SequenceState& seq, int64_t L, const CpRanks& ranks, int64_t page_size,
                  PagePool& pool) {
  int64_t need = cp_pages_needed(L, ranks, page_size) - int64_t(seq.pages.size());
  if (need <= 0) return;
  std::vector<int32_t> fresh = pool.allocate(int32_t(need));
  seq.pages.insert(seq.pages.end(), fresh.begin(), fresh.end());
}

// Slot of position p on this rank, or -1 if another rank owns it. W 4, I 8, page size 16:
// p 35 is owned by R0 (35 / 8 % 4 == 0), local index 11 -> page seq.pages[0], offset 11.
int64_t slot_of(const SequenceState& seq, int64_t p, const KvOwnership& own, int64_t R,
                int64_t page_size) {
  if (own.owner(p) != R) return -1;
  int64_t li = own.local_index(p);
  return int64_t(seq.pages[size_t(li / page_size)]) * page_size + li % page_size;
}

}  // namespace

void build_cp_step(const std::vector<SequenceStep>& steps, const CpRanks& ranks,
                   int64_t page_size, PagePool& pool, CpStep* out) {
  CpStep& s = *out;
  s = CpStep{};
  const int64_t P = ranks.pcp, R = ranks.rank();
  const KvOwnership own{ranks.world(), ranks.interleave};

  std::vector<PcpRequest> reqs;
  for (const SequenceStep& st : steps) {
    const int64_t C = st.seq->num_cached, n = st.num_tokens;
    CPI_CHECK(n >= 1, "a sequence step must add at least one token");
    CPI_CHECK(C == 0 || n == 1,
              "chunked prefill over cached context ({} cached + {} new tokens) is not "
              "supported with context parallelism (pcp * dcp > 1): prefill the prompt in one "
              "step",
              C, n);
    reqs.push_back({n, C > 0});
  }
  // With pcp == 1 nothing is split: partition with P = 1 would pad odd prompts, so the
  // local rows are simply every new token.
  PcpPartition part;
  if (P > 1) part = partition_pcp(reqs, P, ranks.pcp_rank);

  for (size_t i = 0; i < steps.size(); ++i) ensure_pages(*steps[i].seq,
      steps[i].seq->num_cached + steps[i].num_tokens, ranks, page_size, pool);

  // Pass 1: local tokens and positions; PCP gather rows.
  std::vector<int64_t> local_offset(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& st = steps[i];
    const int64_t C = st.seq->num_cached;
    local_offset[i] = s.num_tokens();
    if (P > 1 && !reqs[i].is_decode) {
      for (int64_t k = 0; k < part.local_count[i]; ++k) {
        size_t t = size_t(part.local_offset[i] + k);
        int64_t src = part.local_src[t];
        // A pad copies the request's first token and sits at position 0 (§4 step 1).
        s.gather_rows.push_back(s.num_tokens());
        s.tokens.push_back(st.tokens[src >= 0 ? src : 0]);
        s.positions.push_back(int32_t(src >= 0 ? part.local_pos[t] : 0));
      }
    } else {
      for (int64_t k = 0; k < st.num_tokens; ++k) {
        s.tokens.push_back(st.tokens[k]);
        s.positions.push_back(int32_t(C + k));
      }
    }
  }
  if (P > 1) s.restore = part.restore;
  s.prefill_buf_rows = P > 1 ? part.gathered_tokens : s.num_tokens();
  s.prefill_buf_slots.assign(size_t(s.prefill_buf_rows), -1);

  // Pass 2: attention work, cache writes and logit rows.
  s.pf_q_indptr.push_back(0);
  s.pf_kv_indptr.push_back(0);
  s.decode_page_indptr.push_back(0);
  auto add_causal = [&](int64_t q_begin, int64_t q_len, int64_t kv_begin, int64_t kv_len) {
    // Query rows [q_begin, +q_len) over buffer rows [kv_begin, +kv_len), bottom-right causal.
    CPI_ASSERT(s.pf_q_indptr.back() == q_begin);
    s.pf_q_indptr.push_back(q_begin + q_len);
    s.pf_kv_lens.push_back(kv_len);
    for (int64_t j = 0; j < kv_len; ++j) s.pf_kv_rows.push_back(int32_t(kv_begin + j));
    s.pf_kv_indptr.push_back(int32_t(s.pf_kv_rows.size()));
  };
  int64_t q_cursor = 0;  // prefill-attention query rows are local rows in order
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& st = steps[i];
    const SequenceState& seq = *st.seq;
    const int64_t C = seq.num_cached, n = st.num_tokens, off = local_offset[i];
    if (reqs[i].is_decode) {
      // Decode rows are not prefill-attention queries: skip them with an empty
      // pseudo-sequence so pf rows stay aligned with local rows.
      add_causal(q_cursor, 1, 0, 0);
      q_cursor += 1;
      s.decode_rows.push_back(off);
      s.decode_kv_lens.push_back(own.local_len(C + 1, R));
      int64_t used = cp_pages_needed(C + 1, ranks, page_size);
      s.decode_pages.insert(s.decode_pages.end(), seq.pages.begin(), seq.pages.begin() + used);
      s.decode_page_indptr.push_back(int32_t(s.decode_pages.size()));
      s.decode_slots.push_back(slot_of(seq, C, own, R, page_size));
      s.logit_rows.push_back(off);
      s.logit_from_gathered.push_back(0);
      continue;
    }
    if (P > 1) {
      // Head chunk r sees the first (r + 1) c tokens, tail chunk 2P-1-r the first (2P - r) c.
      const int64_t c = part.chunk[i], r = ranks.pcp_rank, start = part.padded_start[i];
      add_causal(q_cursor, c, start, (r + 1) * c);
      add_causal(q_cursor + c, c, start, (2 * P - r) * c);
      q_cursor += 2 * c;
      for (int64_t p = 0; p < n; ++p)
        s.prefill_buf_slots[size_t(start + p)] = slot_of(seq, p, own, R, page_size);
      for (int64_t p = st.all_logits ? 0 : n - 1; p < n; ++p) {
        s.logit_rows.push_back(start + p);
        s.logit_from_gathered.push_back(1);
      }
    } else {
      add_causal(q_cursor, n, off, n);
      q_cursor += n;
      for (int64_t p = 0; p < n; ++p)
        s.prefill_buf_slots[size_t(off + p)] = slot_of(seq, p, own, R, page_size);
      for (int64_t p = st.all_logits ? 0 : n - 1; p < n; ++p) {
        s.logit_rows.push_back(off + p);
        s.logit_from_gathered.push_back(0);
      }
    }
  }
  CPI_ASSERT(q_cursor == s.num_tokens());
  for (int64_t i = 0; i <= int64_t(s.decode_rows.size()); ++i) s.decode_q_indptr.push_back(i);
}

}  // namespace cpinfer
