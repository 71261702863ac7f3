// ParallelLayout against context-parallel.md §1-§3: the §1 table as an exact test vector,
// the §3 rules recomputed independently over tp x pcp x dcp grids, and the error messages.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/parallel_layout.h"
#include "support/expect_error.h"

namespace cpinfer {
namespace {

using testing::expect_error;

LayoutSpec spec_of(int tp, int pcp, int dcp, int interleave = 1, int page = 16) {
  LayoutSpec s;
  s.tp = tp;
  s.pcp = pcp;
  s.dcp = dcp;
  s.interleave = interleave;
  s.page_size = page;
  return s;
}

// §1 example: tp 4, pcp 2, dcp 2, 16 q heads, 2 KV heads. One row per global rank.
struct Row {
  int g, pcp, tp, q_begin, q_end, kv_head;
  std::vector<int> dcp_group, pcp_group;
  int R;
};
const Row kTable[] = {
    {0, 0, 0, 0, 3, 0, {0, 1}, {0, 4}, 0},     {1, 0, 1, 4, 7, 0, {0, 1}, {1, 5}, 1},
    {2, 0, 2, 8, 11, 1, {2, 3}, {2, 6}, 0},    {3, 0, 3, 12, 15, 1, {2, 3}, {3, 7}, 1},
    {4, 1, 0, 0, 3, 0, {4, 5}, {0, 4}, 2},     {5, 1, 1, 4, 7, 0, {4, 5}, {1, 5}, 3},
    {6, 1, 2, 8, 11, 1, {6, 7}, {2, 6}, 2},    {7, 1, 3, 12, 15, 1, {6, 7}, {3, 7}, 3},
};

TEST(ParallelLayout, Section1TableExactly) {
  for (const Row& row : kTable) {
    SCOPED_TRACE(fmt::format("g = {}", row.g));
    ParallelLayout l(spec_of(4, 2, 2), 16, 2, row.g);
    EXPECT_EQ(l.world_size(), 8);
    EXPECT_EQ(l.global_rank(), row.g);
    EXPECT_EQ(l.pcp_rank(), row.pcp);
    EXPECT_EQ(l.tp_rank(), row.tp);
    EXPECT_EQ(l.dcp_rank(), row.tp % 2);
    EXPECT_EQ(l.q_head_begin(), row.q_begin);
    EXPECT_EQ(l.q_head_begin() + l.num_local_q_heads() - 1, row.q_end);
    EXPECT_EQ(l.kv_head_begin(), row.kv_head);
    EXPECT_EQ(l.num_local_kv_heads(), 1);
    EXPECT_EQ(l.dcp_group(), row.dcp_group);
    EXPECT_EQ(l.pcp_group(), row.pcp_group);
    const int first = row.pcp * 4;
    EXPECT_EQ(l.tp_group(), (std::vector<int>{first, first + 1, first + 2, first + 3}));
    EXPECT_EQ(l.cp_world(), 4);
    EXPECT_EQ(l.cp_rank(), row.R);
  }
  // "KV head 0 ends up sharded over ranks {0,1,4,5} (R = 0..3), KV head 1 over {2,3,6,7}."
  for (int head = 0; head < 2; ++head) {
    std::set<int> ranks, rs;
    for (int g = 0; g < 8; ++g) {
      ParallelLayout l(spec_of(4, 2, 2), 16, 2, g);
      if (l.kv_head_begin() == head) ranks.insert(g), rs.insert(l.cp_rank());
    }
    EXPECT_EQ(ranks, head == 0 ? (std::set<int>{0, 1, 4, 5}) : (std::set<int>{2, 3, 6, 7}));
    EXPECT_EQ(rs, (std::set<int>{0, 1, 2, 3}));
  }
}

// The §3 rules (plus §2's divisibility), written out here independently of the library.
bool valid_by_rules(int tp, int dcp, int hq, int hkv) {
  if (hq % tp != 0) return false;
  if (tp <= hkv ? hkv % tp != 0 : tp % hkv != 0) return false;
  if (tp % dcp != 0) return false;
  if (dcp > 1) {
    if (tp <= hkv) return false;
    if (dcp > tp / hkv) return false;
    if ((hq / hkv) % dcp != 0) return false;
    if ((tp / hkv) % dcp != 0) return false;  // a DCP group holds replicas of one KV head
  }
  return true;
}

// The message fragment the first broken rule must produce.
std::string expected_fragment(int tp, int dcp, int hq, int hkv) {
  if (hq % tp != 0)
    return fmt::format("tensor-parallel-size {} does not divide num_attention_heads {}", tp, hq);
  if (tp % dcp != 0) return fmt::format("tp {} is not a multiple of dcp {}", tp, dcp);
  if (tp <= hkv)
    return fmt::format("decode-context-parallel-size {} needs tensor-parallel-size {} > "
                       "num_kv_heads {}",
                       dcp, tp, hkv);
  return fmt::format("decode-context-parallel-size {} exceeds tp/num_kv_heads = {}", dcp,
                     tp / hkv);
}

struct Model {
  const char* name;
  int hq, hkv;
};

TEST(ParallelLayout, GridOfSizesOnTinyAndQwen05B) {
  const Model models[] = {{"tiny", 16, 2}, {"qwen2.5-0.5b", 14, 2}};
  int valid_count = 0;
  for (const Model& m : models) {
    for (int tp : {1, 2, 4}) {
      for (int pcp : {1, 2, 4}) {
        for (int dcp : {1, 2, 4}) {
          SCOPED_TRACE(fmt::format("{}: tp {} pcp {} dcp {}", m.name, tp, pcp, dcp));
          const LayoutSpec s = spec_of(tp, pcp, dcp);
          if (!valid_by_rules(tp, dcp, m.hq, m.hkv)) {
            expect_error([&] { validate_layout(s, m.hq, m.hkv); },
                         {expected_fragment(tp, dcp, m.hq, m.hkv)});
            expect_error([&] { (void)ParallelLayout(s, m.hq, m.hkv, 0); },
                         {expected_fragment(tp, dcp, m.hq, m.hkv)});
            continue;
          }
          ++valid_count;
          EXPECT_NO_THROW(validate_layout(s, m.hq, m.hkv));
          // Every rank: its groups contain it at its group rank; q heads tile [0, hq);
          // a DCP group shares one KV head; KV heads follow §2.
          std::vector<int> q_owner(m.hq, 0);
          for (int g = 0; g < tp * pcp; ++g) {
            ParallelLayout l(s, m.hq, m.hkv, g);
            EXPECT_EQ(l.tp_group().at(l.tp_rank()), g);
            EXPECT_EQ(l.pcp_group().at(l.pcp_rank()), g);
            EXPECT_EQ(l.dcp_group().at(l.dcp_rank()), g);
            EXPECT_EQ(l.cp_rank(), l.pcp_rank() * dcp + l.dcp_rank());
            EXPECT_LT(l.cp_rank(), pcp * dcp);
            EXPECT_EQ(l.num_local_q_heads(), m.hq / tp);
            if (l.pcp_rank() == 0) {
              for (int64_t h = 0; h < l.num_local_q_heads(); ++h) ++q_owner[l.q_head_begin() + h];
            }
            if (tp <= m.hkv) {
              EXPECT_EQ(l.num_local_kv_heads(), m.hkv / tp);
              EXPECT_EQ(l.kv_head_begin(), l.tp_rank() * (m.hkv / tp));
            } else {
              EXPECT_EQ(l.num_local_kv_heads(), 1);
              EXPECT_EQ(l.kv_head_begin(), l.tp_rank() / (tp / m.hkv));
            }
            for (int peer : l.dcp_group()) {
              EXPECT_EQ(ParallelLayout(s, m.hq, m.hkv, peer).kv_head_begin(), l.kv_head_begin());
            }
          }
          for (int h = 0; h < m.hq; ++h) EXPECT_EQ(q_owner[h], 1) << "q head " << h;
        }
      }
    }
  }
  // tiny: tp 1/2/4 x dcp 1 (9 with pcp) + tp 4 dcp 2 (3); 0.5B: tp 1/2 x dcp 1 (6).
  EXPECT_EQ(valid_count, 12 + 6);
}

TEST(ParallelLayout, MessagesNameTheValues) {
  expect_error([] { validate_layout(spec_of(3, 1, 1), 16, 2); },
               {"tensor-parallel-size 3 does not divide num_attention_heads 16"});
  expect_error([] { validate_layout(spec_of(4, 1, 4), 16, 2); },
               {"decode-context-parallel-size 4 exceeds tp/num_kv_heads = 2 for this model"});
  expect_error([] { validate_layout(spec_of(4, 1, 3), 24, 2); },
               {"tp 4 is not a multiple of dcp 3 (tensor-parallel-size must be divisible by "
                "decode-context-parallel-size)"});
  expect_error([] { validate_layout(spec_of(4, 1, 1, 5, 16), 16, 2); },
               {"block-size 16 is not a multiple of cp-kv-cache-interleave-size 5"});
  expect_error([] { validate_layout(spec_of(0, 1, 1), 16, 2); },
               {"tensor-parallel-size 0 must be >= 1"});
  expect_error([] { validate_layout(spec_of(1, 0, 1), 16, 2); },
               {"prefill-context-parallel-size 0 must be >= 1"});
  expect_error([] { validate_layout(spec_of(1, 1, -1), 16, 2); },
               {"decode-context-parallel-size -1 must be >= 1"});
  expect_error([] { validate_layout(spec_of(1, 1, 1, 0), 16, 2); },
               {"cp-kv-cache-interleave-size 0 must be >= 1"});
  expect_error([] { validate_layout(spec_of(1, 1, 1, 1, 0), 16, 2); },
               {"block-size 0 must be >= 1"});
  // tp > Hkv but not a multiple of it.
  expect_error([] { validate_layout(spec_of(6, 1, 1), 24, 4); },
               {"tensor-parallel-size 6 is not a multiple of num_key_value_heads 4"});
  // tp < Hkv and not a divisor.
  expect_error([] { validate_layout(spec_of(3, 1, 1), 24, 4); },
               {"tensor-parallel-size 3 does not divide num_key_value_heads 4"});
  // (Hq / Hkv) % dcp != 0: tp 6, 6 q / 2 kv heads (3 per KV head), dcp 2.
  expect_error([] { validate_layout(spec_of(6, 1, 2), 6, 2); },
               {"decode-context-parallel-size 2 does not divide num_attention_heads/num_kv_heads "
                "= 6/2 = 3"});
  // dcp must divide the replicas: tp 6, 12 q / 2 kv, dcp 2 passes the rules above, but the
  // DCP group {2, 3} would hold KV heads 0 and 1.
  expect_error([] { validate_layout(spec_of(6, 1, 2), 12, 2); },
               {"decode-context-parallel-size 2 does not divide the 3 replicas"});
  // dcp > 1 without replication.
  expect_error([] { validate_layout(spec_of(2, 1, 2), 16, 2); },
               {"decode-context-parallel-size 2 needs tensor-parallel-size 2 > num_kv_heads 2"});
  expect_error([] { (void)ParallelLayout(spec_of(2, 2, 1), 16, 2, 4); },
               {"global rank 4 is outside the world of 4 ranks (tp 2 x pcp 2)"});
  expect_error([] { (void)ParallelLayout(spec_of(2, 2, 1), 16, 2, -1); }, {"global rank -1"});
}

TEST(ParallelLayout, KvHeadsWhenTpDividesThem) {
  // tp <= Hkv: 8 KV heads over tp 4 -> 2 each; no replication.
  ParallelLayout l(spec_of(4, 1, 1), 32, 8, 3);
  EXPECT_EQ(l.num_local_kv_heads(), 2);
  EXPECT_EQ(l.kv_head_begin(), 6);
  EXPECT_EQ(l.num_local_q_heads(), 8);
  EXPECT_EQ(l.q_head_begin(), 24);
  // tp 8, 2 KV heads, dcp 4: replicas 4, DCP groups of 4 hold one KV head each.
  for (int g = 0; g < 8; ++g) {
    ParallelLayout d(spec_of(8, 1, 4), 16, 2, g);
    EXPECT_EQ(d.kv_head_begin(), g / 4);
    EXPECT_EQ(d.dcp_group(), (std::vector<int>{g / 4 * 4, g / 4 * 4 + 1, g / 4 * 4 + 2,
                                               g / 4 * 4 + 3}));
  }
}

TEST(ParallelLayout, SingleRankAndDescribe) {
  ParallelLayout l(LayoutSpec{}, 14, 2, 0);
  EXPECT_EQ(l.world_size(), 1);
  EXPECT_EQ(l.tp_group(), std::vector<int>{0});
  EXPECT_EQ(l.pcp_group(), std::vector<int>{0});
  EXPECT_EQ(l.dcp_group(), std::vector<int>{0});
  EXPECT_EQ(l.num_local_kv_heads(), 2);
  EXPECT_EQ(ParallelLayout(spec_of(4, 2, 2, 8, 16), 16, 2, 0).describe(),
            "tp 4 x pcp 2 (dcp 2, interleave 8, block-size 16)");
}

}  // namespace
}  // namespace cpinfer
