// PCP partition (§4) and KV ownership (§5) against the spec's test vectors and brute force.
#include <gtest/gtest.h>

#include <map>

#include "cp/cp_layout.h"
#include "cp/pcp_partition.h"

namespace cpinfer {
namespace {

const std::vector<PcpRequest> kSpecBatch = {{1, true}, {5, false}, {8, false}};

TEST(PcpPartition, SpecTestVectorLocalCountsAndPositions) {
  PcpPartition r0 = partition_pcp(kSpecBatch, 2, 0), r1 = partition_pcp(kSpecBatch, 2, 1);
  EXPECT_EQ(r0.local_count, (std::vector<int64_t>{1, 4, 4}));
  EXPECT_EQ(r1.local_count, (std::vector<int64_t>{1, 4, 4}));
  EXPECT_EQ(r0.local_pos, (std::vector<int64_t>{0, 0, 1, 6, 7, 0, 1, 6, 7}));
  EXPECT_EQ(r1.local_pos, (std::vector<int64_t>{0, 2, 3, 4, 5, 2, 3, 4, 5}));
  // Pads [-, 3, 0]: request 1 (n 5, padded 8) has pads at positions 5, 6, 7.
  EXPECT_EQ(r0.padded_len, (std::vector<int64_t>{1, 8, 8}));
  EXPECT_EQ(r0.local_is_pad, (std::vector<uint8_t>{0, 0, 0, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(r1.local_is_pad, (std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(r0.local_src, (std::vector<int64_t>{0, 0, 1, -1, -1, 0, 1, 6, 7}));
  EXPECT_EQ(r0.local_offset, (std::vector<int64_t>{0, 1, 5}));
}

TEST(PcpPartition, SpecRestoreIndexWithAndWithoutDecodes) {
  EXPECT_EQ(restore_index_with_decodes(kSpecBatch, 2),
            (std::vector<int64_t>{0, 9, 1, 2, 10, 11, 12, 13, 3, 4, 5, 6, 14, 15, 16, 17, 7, 8}));
  PcpPartition r0 = partition_pcp(kSpecBatch, 2, 0);
  EXPECT_EQ(r0.gathered_tokens, 16);
  EXPECT_EQ(r0.restore,
            (std::vector<int64_t>{0, 1, 8, 9, 10, 11, 2, 3, 4, 5, 12, 13, 14, 15, 6, 7}));
  EXPECT_EQ(partition_pcp(kSpecBatch, 2, 1).restore, r0.restore);  // the same on every rank
  EXPECT_EQ(r0.padded_start, (std::vector<int64_t>{-1, 0, 8}));
}

TEST(PcpPartition, PadFreeGatherOfTheSpecBatch) {
  // [1 (decode), 5, 8] at P 2: the 5-token request's pads (relative 5, 6, 7) are not
  // gathered. Rank 0 sends 0 1 | (8's) 0 1 6 7, rank 1 sends 2 3 4 | (8's) 2 3 4 5.
  PcpPartition r0 = partition_pcp(kSpecBatch, 2, 0);
  EXPECT_EQ(r0.real_count, (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(r0.real_restore,
            (std::vector<int64_t>{0, 1, 6, 7, 8, -1, -1, -1, 2, 3, 9, 10, 11, 12, 4, 5}));
  EXPECT_EQ(partition_pcp(kSpecBatch, 2, 1).real_restore, r0.real_restore);
}

TEST(PcpPartition, SpecRealTokenMaskWithDecodes) {
  // Real-token mask in padded global order of the reference design:
  // [1,0, 1,1,1,1,1,0,0,0, 1,1,1,1,1,1,1,1] (decode copies: only the first is real).
  const int64_t P = 2;
  std::vector<int> gathered_real;  // rank-major, as gathered
  for (int64_t r = 0; r < P; ++r) {
    PcpPartition p = partition_pcp(kSpecBatch, P, r);
    for (size_t i = 0; i < p.local_is_pad.size(); ++i) {
      bool decode_copy = i == 0 && r > 0;  // the decode token is local row 0 on each rank
      gathered_real.push_back(!p.local_is_pad[i] && !decode_copy);
    }
  }
  std::vector<int> mask;
  for (int64_t g : restore_index_with_decodes(kSpecBatch, P)) mask.push_back(gathered_real[size_t(g)]);
  EXPECT_EQ(mask, (std::vector<int>{1, 0, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}));
}

// Generated cases: gathering every rank's local (padded-global) positions and applying the
// restore index gives 0, 1, 2, ... in order; every real token appears exactly once.
TEST(PcpPartition, GeneratedBatchesRestoreToPaddedGlobalOrder) {
  for (int64_t P : {1, 2, 3, 4, 8}) {
    for (uint64_t seed = 0; seed < 30; ++seed) {
      std::vector<PcpRequest> reqs;
      uint64_t x = seed * 2654435761u + uint64_t(P);
      int nreq = 1 + int(x % 5);
      for (int i = 0; i < nreq; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        bool decode = (x >> 60) % 3 == 0;
        int64_t n = decode ? 1 : 1 + int64_t((x >> 33) % 40);
        reqs.push_back({n, decode});
      }
      std::vector<int64_t> gathered, real_gathered;
      std::map<std::pair<size_t, int64_t>, int> seen;  // (request, src) -> count
      for (int64_t r = 0; r < P; ++r) {
        PcpPartition p = partition_pcp(reqs, P, r);
        const size_t real_before = real_gathered.size();
        for (size_t q = 0; q < reqs.size(); ++q) {
          for (int64_t i = 0; i < p.local_count[q]; ++i) {
            size_t t = size_t(p.local_offset[q] + i);
            if (p.local_src[t] >= 0 && (!reqs[q].is_decode || r == 0)) seen[{q, p.local_src[t]}]++;
            if (!reqs[q].is_decode) gathered.push_back(p.padded_start[q] + p.local_pos[t]);
            if (!reqs[q].is_decode && !p.local_is_pad[t])
              real_gathered.push_back(p.padded_start[q] + p.local_pos[t]);
          }
        }
        ASSERT_EQ(int64_t(real_gathered.size() - real_before), p.real_count[size_t(r)]);
        // Balanced: each rank holds the same number of tokens of each prefill request.
        for (size_t q = 0; q < reqs.size(); ++q)
          if (!reqs[q].is_decode) EXPECT_EQ(p.local_count[q] * P, p.padded_len[q]);
      }
      PcpPartition p0 = partition_pcp(reqs, P, 0);
      ASSERT_EQ(int64_t(gathered.size()), p0.gathered_tokens);
      for (size_t i = 0; i < gathered.size(); ++i)
        ASSERT_EQ(gathered[size_t(p0.restore[i])], int64_t(i)) << "P " << P << " seed " << seed;
      // The pad-free gather: real rows restore to their padded-global index, pads to -1.
      ASSERT_EQ(p0.real_restore.size(), gathered.size());
      int64_t pads = 0;
      for (size_t i = 0; i < gathered.size(); ++i) {
        const int64_t g = p0.real_restore[i];
        if (g < 0) { ++pads; continue; }
        ASSERT_EQ(real_gathered[size_t(g)], int64_t(i)) << "P " << P << " seed " << seed;
      }
      ASSERT_EQ(pads + int64_t(real_gathered.size()), p0.gathered_tokens);
      for (size_t q = 0; q < reqs.size(); ++q)
        for (int64_t s = 0; s < reqs[q].num_new_tokens; ++s) ASSERT_EQ((seen[{q, s}]), 1);
    }
  }
}

TEST(CpLayout, SpecExample) {
  CpLayout o;
  o.pcp = 4;
  o.interleave = 8;
  EXPECT_EQ(o.owner(0), 0);
  EXPECT_EQ(o.owner(7), 0);
  EXPECT_EQ(o.owner(8), 1);
  EXPECT_EQ(o.owner(24), 3);
  EXPECT_EQ(o.owner(32), 0);
  std::vector<int64_t> lens;
  for (int64_t R = 0; R < 4; ++R) lens.push_back(o.local_len(33, R));
  EXPECT_EQ(lens, (std::vector<int64_t>{9, 8, 8, 8}));
}

// Brute force: walk every position, count per owner, and check local indices are dense
// and in position order; also the per-rank capacity bound ceil(L / W) + one unit.
TEST(CpLayout, BruteForceCrossCheck) {
  for (int64_t W : {1, 2, 3, 4, 8})
    for (int64_t I : {1, 2, 3, 8, 16})
      for (int64_t L = 0; L <= 200; L += (L < 40 ? 1 : 7)) {
        CpLayout o;
        o.pcp = W;
        o.interleave = I;
        std::vector<int64_t> count(size_t(W), 0);
        for (int64_t p = 0; p < L; ++p) {
          int64_t R = o.owner(p);
          ASSERT_EQ(o.local_index(p), count[size_t(R)]) << W << " " << I << " " << p;
          count[size_t(R)]++;
        }
        int64_t total = 0;
        for (int64_t R = 0; R < W; ++R) {
          ASSERT_EQ(o.local_len(L, R), count[size_t(R)]) << "W " << W << " I " << I << " L " << L;
          ASSERT_LE(count[size_t(R)], (L + W - 1) / W + I);
          total += count[size_t(R)];
        }
        ASSERT_EQ(total, L);
      }
}

}  // namespace
}  // namespace cpinfer
