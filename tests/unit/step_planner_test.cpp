// The per-rank step planner (cp/step_planner.h) without MPI: a hand-worked step (cached
// context + a new chunk + a decode at W 4, I 8, page size 16), and generated steps over many
// layouts checked against a brute-force per-token model of what the step must compute:
//   - every real new token runs on each PCP rank's local rows exactly once overall, with its
//     true position and token id;
//   - every real new token's K/V is written exactly once per DCP column, by its owner, at the
//     slot its local index names in that rank's page list;
//   - every real query attends to exactly the positions 0..p of its sequence: the union of
//     its causal rows (new tokens, through the restore index) and the shard rows of every
//     rank (cached context, plus the token itself for a decode);
//   - the logits of each sequence come from its last new token;
//   - once warm, planning allocates nothing.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "cp/step_planner.h"
#include "support/counting_new.h"

namespace cpinfer {
namespace {

CpLayout make_layout(int64_t pcp, int64_t dcp, int64_t I, int64_t page, int64_t R) {
  CpLayout l;
  l.pcp = pcp;
  l.dcp = dcp;
  l.interleave = I;
  l.page_size = page;
  return l.as_rank(R);
}

// One rank's view: its pool and its copy of every sequence's KV state (each rank keeps its
// own page lists; the step plan is the same everywhere).
struct RankSim {
  CpLayout layout;
  PagePool pool{4096};
  std::vector<SequenceState> seqs;
  StepPlanner planner;
  RankStep step;
  explicit RankSim(const CpLayout& l, size_t n) : layout(l), seqs(n), planner(l) {}
};

struct SeqSpec {
  int64_t cached, n;
};

std::vector<int32_t> tokens_of(int64_t seq, int64_t n) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t(1000 * (seq + 1) + i));
  return t;
}

// Plans the step on every rank of the layout (after bringing each rank's sequences to their
// cached lengths with earlier steps of the planner itself).
std::vector<RankSim> plan_everywhere(int64_t pcp, int64_t dcp, int64_t I, int64_t page,
                                     const std::vector<SeqSpec>& specs,
                                     std::vector<std::vector<int32_t>>* toks) {
  std::vector<RankSim> ranks;
  const int64_t W = pcp * dcp;
  for (int64_t R = 0; R < W; ++R) ranks.emplace_back(make_layout(pcp, dcp, I, page, R), specs.size());
  toks->clear();
  for (size_t s = 0; s < specs.size(); ++s) toks->push_back(tokens_of(int64_t(s), specs[s].cached + specs[s].n));
  for (RankSim& r : ranks) {
    // Earlier steps: each sequence's context as one prefill (commit only; the planner
    // allocates the pages).
    std::vector<SequenceStep> warm;
    for (size_t s = 0; s < specs.size(); ++s)
      if (specs[s].cached > 0) warm.push_back({&r.seqs[s], (*toks)[s].data(), specs[s].cached});
    if (!warm.empty()) {
      r.planner.plan(warm, r.pool, &r.step);
      commit_step(warm);
    }
    std::vector<SequenceStep> steps;
    for (size_t s = 0; s < specs.size(); ++s)
      steps.push_back({&r.seqs[s], (*toks)[s].data() + specs[s].cached, specs[s].n});
    r.planner.plan(steps, r.pool, &r.step);
  }
  return ranks;
}

TEST(StepPlanner, HandWorkedChunkAndDecodeAtW4) {
  // pcp 2 x dcp 2 (W 4), I 8, page 16. Sequence A: 24 cached + 12 new (the worked example of
  // docs/context-parallel.md); sequence B: 40 cached + 1 (a decode).
  std::vector<std::vector<int32_t>> toks;
  std::vector<RankSim> r = plan_everywhere(2, 2, 8, 16, {{24, 12}, {40, 1}}, &toks);
  // R0 = (pcp 0, dcp 0): A's head chunk (relative 0-2) and tail chunk (9-11), then B (the
  // step's decode 0, so PCP rank 0 runs it).
  const RankStep& s0 = r[0].step;
  EXPECT_EQ(s0.positions, (std::vector<int32_t>{24, 25, 26, 33, 34, 35, 40}));
  EXPECT_EQ(s0.tokens[0], toks[0][24]);
  EXPECT_EQ(s0.tokens[6], toks[1][40]);
  EXPECT_EQ(s0.gather_rows, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(s0.chunk_rows, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(s0.decode_rows, (std::vector<int64_t>{6}));
  EXPECT_EQ(s0.decode_counts, (std::vector<int>{1, 0}));
  // R2 = (pcp 1, dcp 0): relative 3-8, and no decode.
  EXPECT_EQ(r[2].step.positions, (std::vector<int32_t>{27, 28, 29, 30, 31, 32}));
  EXPECT_TRUE(r[2].step.decode_rows.empty());
  EXPECT_EQ(r[2].step.decode_counts, (std::vector<int>{1, 0}));
  // Restore: padded order 0..11 <- rank 0 holds rel 0-2 (rows 0-2) and 9-11 (rows 3-5),
  // rank 1 holds rel 3-8 (rows 6-11).
  EXPECT_EQ(s0.restore, (std::vector<int64_t>{0, 1, 2, 6, 7, 8, 9, 10, 11, 3, 4, 5}));
  // Causal over the new tokens, in two parts. Own rows (local rows 0-5 = relative 0-2, 9-11):
  // the head chunk sees itself causally, the tail chunk the head chunk and itself causally.
  // Other ranks' rows: the head chunk (chunk 0) none; the tail chunk (chunk 3) chunks 1 and
  // 2, buffer rows 3-8. B is an empty pseudo-sequence in both.
  EXPECT_TRUE(s0.causal.kv_lens.empty());
  EXPECT_EQ(s0.local.q_indptr, (std::vector<int64_t>{0, 3, 6, 7}));
  EXPECT_EQ(s0.local.kv_lens, (std::vector<int64_t>{3, 6, 0}));
  EXPECT_EQ(s0.local.page_indices, (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(s0.remote.q_indptr, (std::vector<int64_t>{0, 3, 6, 7}));
  EXPECT_EQ(s0.remote.kv_lens, (std::vector<int64_t>{0, 6, 0}));
  EXPECT_EQ(s0.remote.page_indices, (std::vector<int32_t>{3, 4, 5, 6, 7, 8}));
  // R2 (PCP rank 1, relative 3-5 head = chunk 1, 6-8 tail = chunk 2): both see chunk 0.
  EXPECT_EQ(r[2].step.remote.kv_lens, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(r[2].step.remote.page_indices, (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  // Shard: PCP rank 0's block (B's decode over local_len(41), A's 6 queries over
  // local_len(24)), then PCP rank 1's (A's 6). Of B's 0-40, R0 holds 0-7 and 32-39, R1 8-15
  // and 40 ((40 / 8) % 4 = 1).
  EXPECT_EQ(s0.shard.q_indptr, (std::vector<int64_t>{0, 1, 7, 13}));
  EXPECT_EQ(s0.shard.kv_lens, (std::vector<int64_t>{16, 8, 8}));  // B: 0-7, 32-39
  EXPECT_EQ(r[1].step.shard.kv_lens, (std::vector<int64_t>{9, 8, 8}));   // B: 8-15, 40
  EXPECT_EQ(r[3].step.shard.kv_lens, (std::vector<int64_t>{8, 0, 0}));   // A: none of 0-23
  // New K/V: positions 24-31 go to R3 (buffer rows 0-7), 32-35 to R0 (rows 8-11), at local
  // indices 0-7 and 8-11; B's token 40 to R1 at local index 8.
  const int64_t a0 = r[0].seqs[0].pages[0], a3 = r[3].seqs[0].pages[0];
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(s0.new_kv_slots[size_t(i)], i >= 8 ? a0 * 16 + i : -1) << i;
    EXPECT_EQ(r[3].step.new_kv_slots[size_t(i)], i < 8 ? a3 * 16 + i : -1) << i;
  }
  // B's token 40: R1 (PCP rank 0, DCP rank 1) writes it, from its own row; every other rank
  // only attends to it.
  EXPECT_EQ(s0.decode_slots, (std::vector<int64_t>{-1}));
  EXPECT_EQ(r[1].step.decode_slots, (std::vector<int64_t>{r[1].seqs[1].pages[0] * 16 + 8}));
  EXPECT_EQ(r[2].step.decode_slots, (std::vector<int64_t>{-1}));
  // K/V gather: no pads here, 6 real rows per PCP rank.
  EXPECT_EQ(s0.gather_counts, (std::vector<int>{6, 6}));
  EXPECT_EQ(s0.gather_displs, (std::vector<int>{0, 6}));
  // Logits, both through the final hidden gather, both sent by PCP rank 0: A's last token
  // (relative 11: chunk 3, PCP rank 0's tail, its local row 5) and B's (rank 0's row 6).
  EXPECT_EQ(s0.logit_rows, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s0.logit_from_gathered, (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(s0.hidden_counts, (std::vector<int>{2, 0}));
  EXPECT_EQ(s0.hidden_displs, (std::vector<int>{0, 2}));
  EXPECT_EQ(s0.hidden_rows, (std::vector<int64_t>{5, 6}));
  EXPECT_TRUE(r[2].step.hidden_rows.empty());
  EXPECT_EQ(r[2].step.logit_rows, s0.logit_rows);
}

// The brute-force check of one planned step on every rank.
void check_step(int64_t pcp, int64_t dcp, const std::vector<SeqSpec>& specs,
                const std::vector<RankSim>& ranks, const std::vector<std::vector<int32_t>>& toks,
                const std::string& what) {
  const int64_t W = pcp * dcp;
  if (W == 1) {
    // One rank: row t is written to slots[t] and sees, through the paged causal work,
    // positions 0..p of its own sequence's pages.
    const RankSim& r = ranks[0];
    const RankStep& st = r.step;
    int64_t row = 0;
    for (size_t s = 0; s < specs.size(); ++s) {
      const int64_t C = specs[s].cached, n = specs[s].n, B = r.layout.page_size;
      const std::vector<int32_t>& pages = r.seqs[s].pages;
      ASSERT_EQ(st.paged.q_indptr[s + 1] - st.paged.q_indptr[s], n) << what;
      ASSERT_EQ(st.paged.kv_lens[s], C + n) << what;
      for (int64_t k = 0; k < n; ++k, ++row) {
        const int64_t p = C + k;
        ASSERT_EQ(st.positions[size_t(row)], p) << what;
        ASSERT_EQ(st.tokens[size_t(row)], toks[s][size_t(p)]) << what;
        ASSERT_EQ(st.slots[size_t(row)], int64_t(pages[size_t(p / B)]) * B + p % B) << what;
        // Bottom-right causal: row k of n over C + n tokens sees j <= k + C.
        ASSERT_EQ(k + st.paged.kv_lens[s] - n, p) << what;
      }
      for (int32_t i = st.paged.page_indptr[s]; i < st.paged.page_indptr[s + 1]; ++i)
        ASSERT_EQ(st.paged.page_indices[size_t(i)], pages[size_t(i - st.paged.page_indptr[s])]) << what;
      ASSERT_EQ(st.logit_rows[s], row - 1) << what;
    }
    return;
  }
  // The decodes in request order; decode d runs on PCP rank d % pcp, and the shard queries
  // list PCP rank p's decodes (d = p, p + pcp, ...) at the front of block p.
  std::vector<int64_t> decodes;
  for (size_t s = 0; s < specs.size(); ++s)
    if (specs[s].cached > 0 && specs[s].n == 1) decodes.push_back(int64_t(s));
  std::vector<int64_t> decodes_in_shard_order;
  for (int64_t p = 0; p < pcp; ++p)
    for (size_t d = size_t(p); d < decodes.size(); d += size_t(pcp))
      decodes_in_shard_order.push_back(decodes[d]);
  // Which (seq, position) each local row of PCP rank p is: the prefill and chunk requests in
  // order, by the spec's split (head chunk p, tail chunk 2P-1-p; rows past n are pads,
  // position -1 here), then the decodes PCP rank p runs.
  auto row_ids = [&](int64_t p, int64_t T) {
    std::vector<std::pair<int64_t, int64_t>> ids;  // (seq, pos or -1)
    for (size_t s = 0; s < specs.size(); ++s) {
      const int64_t C = specs[s].cached, n = specs[s].n;
      if (C > 0 && n == 1) continue;
      if (pcp == 1) {
        for (int64_t k = 0; k < n; ++k) ids.push_back({int64_t(s), C + k});
        continue;
      }
      const int64_t c = (n + 2 * pcp - 1) / (2 * pcp);
      for (int64_t k = 0; k < 2 * c; ++k) {
        const int64_t j = k < c ? p * c + k : (2 * pcp - 1 - p) * c + (k - c);
        ids.push_back({int64_t(s), j < n ? C + j : -1});
      }
    }
    for (size_t d = size_t(p); d < decodes.size(); d += size_t(pcp))
      ids.push_back({decodes[d], specs[size_t(decodes[d])].cached});
    EXPECT_EQ(int64_t(ids.size()), T) << what;
    return ids;
  };
  for (int64_t dcol = 0; dcol < dcp; ++dcol) {
    // Real rows over the PCP ranks of one DCP column: each new token exactly once (under
    // PCP) -- pads are the rows beyond n, recognised by their count.
    std::map<std::pair<int64_t, int64_t>, int> runs;
    for (int64_t p = 0; p < pcp; ++p) {
      const RankSim& r = ranks[size_t(p * dcp + dcol)];
      const RankStep& st = r.step;
      const auto ids = row_ids(p, st.num_tokens());
      // Causal visibility per local row, through the new-K/V buffer.
      // Positions each row attends to, with multiplicity: a position seen twice (once as
      // context and once as a new token) would be a double count in the softmax.
      std::vector<std::multiset<int64_t>> sees(ids.size());
      // Buffer row -> (seq, position): pcp > 1: padded-global order; else local rows.
      std::vector<std::pair<int64_t, int64_t>> buf(size_t(st.new_kv_rows), {-1, -1});
      if (pcp > 1) {
        int64_t cursor = 0;
        for (size_t s = 0; s < specs.size(); ++s) {
          const int64_t C = specs[s].cached, n = specs[s].n;
          if (C > 0 && n == 1) continue;
          const int64_t padded = (n + 2 * pcp - 1) / (2 * pcp) * (2 * pcp);
          for (int64_t j = 0; j < padded; ++j)
            buf[size_t(cursor + j)] = j < n ? std::make_pair(int64_t(s), C + j) : std::make_pair(int64_t(-1), int64_t(-1));
          cursor += padded;
        }
        ASSERT_EQ(cursor, st.new_kv_rows) << what;
        // The pad-free K/V gather: concatenate what each PCP rank of this column sends; the
        // restore index must find every real row there and mark every pad -1.
        std::vector<std::pair<int64_t, int64_t>> gathered;
        for (int64_t k = 0; k < pcp; ++k) {
          const RankStep& o = ranks[size_t(k * dcp + dcol)].step;
          ASSERT_EQ(st.gather_displs[size_t(k)], int64_t(gathered.size())) << what;
          ASSERT_EQ(st.gather_counts[size_t(k)], int64_t(o.gather_rows.size())) << what;
          const auto oids = row_ids(k, o.num_tokens());
          for (int64_t row : o.gather_rows) {
            ASSERT_GE(oids[size_t(row)].second, 0) << what << ": a pad is gathered";
            gathered.push_back(oids[size_t(row)]);
          }
        }
        for (size_t i = 0; i < buf.size(); ++i) {
          const int64_t g = st.restore[i];
          if (buf[i].first < 0) {
            ASSERT_EQ(g, -1) << what << ": pad " << i;
          } else {
            ASSERT_TRUE(g >= 0 && g < int64_t(gathered.size())) << what;
            ASSERT_EQ(gathered[size_t(g)], buf[i]) << what << ": buffer row " << i;
          }
        }
        // The final hidden gather: what each PCP rank sends, concatenated; a gathered logit
        // row must be its sequence's last new token.
        std::vector<std::pair<int64_t, int64_t>> hidden;
        for (int64_t k = 0; k < pcp && !st.hidden_counts.empty(); ++k) {
          const RankStep& o = ranks[size_t(k * dcp + dcol)].step;
          ASSERT_EQ(st.hidden_displs[size_t(k)], int64_t(hidden.size())) << what;
          ASSERT_EQ(st.hidden_counts[size_t(k)], int64_t(o.hidden_rows.size())) << what;
          const auto oids = row_ids(k, o.num_tokens());
          for (int64_t row : o.hidden_rows) hidden.push_back(oids[size_t(row)]);
        }
        for (size_t s = 0; s < specs.size(); ++s) {
          if (!st.logit_from_gathered[s]) continue;
          ASSERT_LT(st.logit_rows[s], int64_t(hidden.size())) << what;
          ASSERT_EQ(hidden[size_t(st.logit_rows[s])],
                    std::make_pair(int64_t(s), specs[s].cached + specs[s].n - 1)) << what;
        }
      } else {
        for (size_t i = 0; i < ids.size(); ++i) buf[i] = ids[i];
      }
      // pcp 1: `causal` over the buffer. pcp > 1: `local` (causal, pages = local rows) and
      // `remote` (non-causal, pages = buffer rows), each covering every local row.
      auto visit = [&](const AttentionWork& w, bool causal,
                       const std::vector<std::pair<int64_t, int64_t>>& rows_of_page) {
        ASSERT_EQ(w.q_indptr.back(), int64_t(ids.size())) << what;
        for (int64_t q = 0; q < w.num_seqs(); ++q) {
          const int64_t r0 = w.q_indptr[size_t(q)], r1 = w.q_indptr[size_t(q + 1)];
          const int64_t kv = w.kv_lens[size_t(q)], ql = r1 - r0;
          ASSERT_EQ(w.page_indptr[size_t(q + 1)] - w.page_indptr[size_t(q)], kv) << what;
          for (int64_t i = 0; i < ql; ++i)
            for (int64_t j = 0; j < (causal ? std::min(i + kv - ql + 1, kv) : kv); ++j) {
              const int64_t b = w.page_indices[size_t(w.page_indptr[size_t(q)] + j)];
              const auto& id = rows_of_page[size_t(b)];
              if (id.first >= 0 && id.second >= 0) sees[size_t(r0 + i)].insert(id.second);
            }
        }
      };
      if (pcp > 1) {
        ASSERT_TRUE(st.causal.kv_lens.empty()) << what;
        visit(st.local, true, ids);
        visit(st.remote, false, buf);
      } else {
        visit(st.causal, true, buf);
      }
      // Shard visibility: block p' = PCP rank p''s [decodes][chunk rows]; for each query,
      // every rank's shard.
      int64_t chunk_i = 0;
      std::vector<int64_t> chunk_of_row(ids.size(), -1);
      for (int64_t row : st.chunk_rows) chunk_of_row[size_t(row)] = chunk_i++;
      int64_t dec_i = 0;
      std::vector<int64_t> decode_of_row(ids.size(), -1);
      for (int64_t row : st.decode_rows) decode_of_row[size_t(row)] = dec_i++;
      const int64_t Td = int64_t(st.decode_rows.size()), Gc = int64_t(st.chunk_rows.size());
      ASSERT_EQ(st.decode_counts.size(), size_t(pcp)) << what;
      ASSERT_EQ(st.decode_counts[size_t(p)], Td) << what;
      int64_t block = 0;  // the first shard query of PCP rank p's block
      for (int64_t k = 0; k < p; ++k) block += st.decode_counts[size_t(k)] + Gc;
      for (size_t row = 0; row < ids.size(); ++row) {
        int64_t q = -1;
        if (decode_of_row[row] >= 0) q = block + decode_of_row[row];
        if (chunk_of_row[row] >= 0) q = block + Td + chunk_of_row[row];
        if (q < 0) continue;
        const int64_t s = ids[row].first;
        for (int64_t R = 0; R < W; ++R) {
          const RankStep& o = ranks[size_t(R)].step;
          ASSERT_EQ(o.num_shard_queries(), st.num_shard_queries()) << what;
          // The pseudo-sequence holding query q on rank R.
          int64_t ps = 0;
          while (o.shard.q_indptr[size_t(ps + 1)] <= q) ++ps;
          const int64_t kv = o.shard.kv_lens[size_t(ps)];
          for (int64_t li = 0; li < kv; ++li) {
            // Local index li on rank R is the li-th position that R owns.
            int64_t pos = -1, seen = 0;
            for (int64_t x = 0; pos < 0; ++x)
              if (ranks[size_t(R)].layout.owner(x) == R && seen++ == li) pos = x;
            sees[row].insert(pos);
          }
          // Its pages are the sequence's own pages on rank R.
          const int64_t pb = o.shard.page_indptr[size_t(ps)], pe = o.shard.page_indptr[size_t(ps + 1)];
          for (int64_t k = pb; k < pe; ++k)
            ASSERT_EQ(o.shard.page_indices[size_t(k)], ranks[size_t(R)].seqs[size_t(s)].pages[size_t(k - pb)]) << what;
        }
      }
      // Each real row: true token, position, and it sees exactly 0..pos; a pad sits at 0.
      for (size_t row = 0; row < ids.size(); ++row) {
        const auto [s, pos] = ids[row];
        if (pos < 0) {
          ASSERT_EQ(st.positions[row], 0) << what << ": a pad's position";
          continue;
        }
        ASSERT_EQ(st.positions[row], pos) << what;
        ASSERT_EQ(st.tokens[row], toks[size_t(s)][size_t(pos)]) << what;
        runs[{s, pos}]++;
        std::multiset<int64_t> want;
        for (int64_t x = 0; x <= pos; ++x) want.insert(x);
        ASSERT_EQ(sees[row], want) << what << ": seq " << s << " pos " << pos << " on pcp rank " << p;
      }
    }
    // Every real new token, a decode's too, runs exactly once in each DCP column.
    for (size_t s = 0; s < specs.size(); ++s)
      for (int64_t pos = specs[s].cached; pos < specs[s].cached + specs[s].n; ++pos)
        ASSERT_EQ((runs[{int64_t(s), pos}]), 1) << what << ": seq " << s << " pos " << pos;
  }
  // Cache writes: each real new token once over the W ranks, by its owner, at its slot.
  std::map<std::pair<int64_t, int64_t>, int> writes;
  for (int64_t R = 0; R < W; ++R) {
    const RankSim& r = ranks[size_t(R)];
    const RankStep& st = r.step;
    std::vector<std::pair<int64_t, int64_t>> buf;
    // The new-K/V buffer's rows: pcp > 1: prefill and chunk requests padded, back to back;
    // pcp == 1: the local rows (the decode rows, last, are in it but written through
    // decode_slots).
    for (size_t s = 0; s < specs.size(); ++s) {
      const int64_t C = specs[s].cached, n = specs[s].n;
      if (C > 0 && n == 1) continue;
      const int64_t count = pcp > 1 ? (n + 2 * pcp - 1) / (2 * pcp) * (2 * pcp) : n;
      for (int64_t j = 0; j < count; ++j)
        buf.push_back(j < n ? std::make_pair(int64_t(s), C + j) : std::make_pair(int64_t(-1), int64_t(-1)));
    }
    if (pcp == 1) buf.resize(buf.size() + decodes.size(), {-1, -1});
    ASSERT_EQ(int64_t(buf.size()), st.new_kv_rows) << what;
    auto check_slot = [&](int64_t s, int64_t pos, int64_t slot) {
      const CpLayout& l = r.layout;
      if (slot < 0) {
        ASSERT_NE(l.owner(pos), R) << what << ": owner skipped seq " << s << " pos " << pos;
        return;
      }
      ASSERT_EQ(l.owner(pos), R) << what;
      const int64_t li = l.local_index(pos);
      ASSERT_EQ(slot, int64_t(r.seqs[size_t(s)].pages[size_t(li / l.page_size)]) * l.page_size + li % l.page_size) << what;
      writes[{s, pos}]++;
    };
    for (size_t i = 0; i < buf.size(); ++i) {
      if (buf[i].first < 0) {
        ASSERT_EQ(st.new_kv_slots[i], -1) << what;
        continue;
      }
      check_slot(buf[i].first, buf[i].second, st.new_kv_slots[i]);
    }
    ASSERT_EQ(st.decode_slots.size(), decodes.size()) << what;
    for (size_t d = 0; d < decodes.size(); ++d) {
      const int64_t s = decodes_in_shard_order[d];
      check_slot(s, specs[size_t(s)].cached, st.decode_slots[d]);
    }
    // Logits: one per sequence, its last new token.
    ASSERT_EQ(st.logit_rows.size(), specs.size()) << what;
    const auto ids = row_ids(r.layout.pcp_rank, st.num_tokens());
    for (size_t s = 0; s < specs.size(); ++s) {
      const int64_t last = specs[s].cached + specs[s].n - 1;
      if (st.logit_from_gathered[s]) {
        ASSERT_GT(pcp, 1) << what;  // checked through the simulated hidden gather above
      } else {
        ASSERT_EQ(ids[size_t(st.logit_rows[s])], std::make_pair(int64_t(s), last)) << what;
      }
    }
  }
  for (size_t s = 0; s < specs.size(); ++s)
    for (int64_t pos = specs[s].cached; pos < specs[s].cached + specs[s].n; ++pos)
      ASSERT_EQ((writes[{int64_t(s), pos}]), 1) << what << ": K/V of seq " << s << " pos " << pos;
}

TEST(StepPlanner, GeneratedStepsMatchTheBruteForceModel) {
  std::mt19937 rng(17);
  int steps_checked = 0;
  for (int64_t pcp : {1, 2, 3})
    for (int64_t dcp : {1, 2})
      for (int64_t I : {1, 3, 8})
        for (int trial = 0; trial < 6; ++trial) {
          const int64_t page = trial % 2 ? 16 : 4;
          if (page % I != 0 && I != 3) continue;
          std::vector<SeqSpec> specs;
          const int nseq = 1 + int(rng() % 4);
          for (int i = 0; i < nseq; ++i) {
            const int kind = int(rng() % 3);  // prefill, chunk, decode
            const int64_t C = kind == 0 ? 0 : 1 + int64_t(rng() % 60);
            const int64_t n = kind == 2 ? 1 : 1 + int64_t(rng() % 40);
            specs.push_back({C, n});
          }
          std::vector<std::vector<int32_t>> toks;
          const auto ranks = plan_everywhere(pcp, dcp, I, page, specs, &toks);
          std::string what = "pcp " + std::to_string(pcp) + " dcp " + std::to_string(dcp) +
                             " I " + std::to_string(I) + " page " + std::to_string(page) + " seqs";
          for (const SeqSpec& s : specs) what += " " + std::to_string(s.cached) + "+" + std::to_string(s.n);
          check_step(pcp, dcp, specs, ranks, toks, what);
          if (::testing::Test::HasFatalFailure()) return;
          ++steps_checked;
        }
  EXPECT_GT(steps_checked, 80);
}

TEST(StepPlanner, WarmPlanningAllocatesNothing) {
  for (int64_t R = 0; R < 4; ++R) {
    RankSim r(make_layout(2, 2, 8, 16, R), 3);
    std::vector<int32_t> t = tokens_of(0, 400);
    // Context for two sequences, then a step shape: a chunk of 100, a decode, a prefill.
    std::vector<SequenceStep> ctx{{&r.seqs[0], t.data(), 200}, {&r.seqs[1], t.data(), 50}};
    r.planner.plan(ctx, r.pool, &r.step);
    commit_step(ctx);
    std::vector<SequenceStep> step{{&r.seqs[0], t.data(), 100}, {&r.seqs[1], t.data(), 1},
                                   {&r.seqs[2], t.data(), 30}};
    r.planner.plan(step, r.pool, &r.step);  // warm: the vectors grow to this shape
    const int64_t before = g_news.load();
    r.planner.plan(step, r.pool, &r.step);  // same shape again (pages already held)
    EXPECT_EQ(g_news.load() - before, 0) << "rank " << R;
  }
}

}  // namespace
}  // namespace cpinfer
