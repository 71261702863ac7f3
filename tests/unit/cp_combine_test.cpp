// The §6 LSE combine as the CP attention uses it (merge_weights): one decode query's
// KV split over W ranks by interleaved ownership (§5), partial attention per shard, then the
// combine; equal to attention over the whole context. W up to 8, with empty shards.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attention/kv_cache.h"
#include "cp/cp_layout.h"
#include "kernels/merge_state.h"
#include "kernels/attention.h"

namespace cpinfer {
namespace {

// Attention of `hq` heads (one KV head) for one query over the tokens `rows` of k/v [L, D].
void attend(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
            const std::vector<int64_t>& rows, int64_t hq, int64_t D, std::vector<float>* o,
            std::vector<float>* lse, ThreadPool& pool) {
  const int64_t n = int64_t(rows.size());
  // The shard as a paged cache with page size 1 (page j = its j-th token).
  KvCacheShape shape{1, std::max<int64_t>(n, 1), 1, 1, D, DType::F32};
  KvCache cache(shape);
  std::vector<int64_t> slots(static_cast<size_t>(n));
  std::vector<int32_t> pages(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    slots[size_t(j)] = j;
    pages[size_t(j)] = int32_t(j);
    cache.append(0, &k[size_t(rows[size_t(j)] * D)], &v[size_t(rows[size_t(j)] * D)], D,
                 &slots[size_t(j)], 1);
  }
  std::vector<int64_t> q_indptr{0, 1}, kv_lens{n};
  std::vector<int32_t> page_indptr{0, int32_t(n)};
  AttentionBatch b{1, q_indptr.data(), kv_lens.data(), page_indptr.data(), pages.data(), false};
  o->assign(size_t(hq * D), 0.f);
  lse->assign(size_t(hq), 0.f);
  paged_attention(q.data(), hq * D, hq, cache.layer(0), b, float(1.0 / std::sqrt(double(D))),
                  o->data(), hq * D, lse->data(), pool);
}

TEST(CpCombine, ShardedDecodeEqualsWholeForWUpTo8WithEmptyShards) {
  ThreadPool pool(1);
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t hq = 4, D = 32;
  int empty_shards_seen = 0;
  for (int64_t W : {1, 2, 3, 4, 8})
    for (int64_t I : {1, 8})
      for (int64_t L : {1, 2, 5, 17, 100}) {
        std::vector<float> q(size_t(hq * D)), k(size_t(L * D)), v(size_t(L * D));
        for (auto* vec : {&q, &k, &v})
          for (auto& x : *vec) x = nd(g);
        std::vector<int64_t> all(static_cast<size_t>(L));
        for (int64_t j = 0; j < L; ++j) all[size_t(j)] = j;
        std::vector<float> want_o, want_lse;
        attend(q, k, v, all, hq, D, &want_o, &want_lse, pool);
        // Partial states per rank over the tokens it owns.
        CpLayout own;
        own.pcp = W;
        own.interleave = I;
        std::vector<std::vector<float>> o(static_cast<size_t>(W)), lse(static_cast<size_t>(W));
        for (int64_t R = 0; R < W; ++R) {
          std::vector<int64_t> mine;
          for (int64_t j = 0; j < L; ++j)
            if (own.owner(j) == R) mine.push_back(j);
          if (mine.empty()) ++empty_shards_seen;
          attend(q, k, v, mine, hq, D, &o[size_t(R)], &lse[size_t(R)], pool);
          if (mine.empty()) {
            for (float s : lse[size_t(R)]) ASSERT_TRUE(std::isinf(s) && s < 0);
          }
        }
        // Combine per head exactly as StepAttention does.
        std::vector<float> s(static_cast<size_t>(W)), w(static_cast<size_t>(W));
        for (int64_t h = 0; h < hq; ++h) {
          for (int64_t R = 0; R < W; ++R) s[size_t(R)] = lse[size_t(R)][size_t(h)];
          float s_star = merge_weights(W, s.data(), 1, w.data());
          EXPECT_NEAR(s_star, want_lse[size_t(h)], 1e-5) << "W " << W << " I " << I << " L " << L;
          for (int64_t d = 0; d < D; ++d) {
            double acc = 0;
            for (int64_t R = 0; R < W; ++R) acc += double(w[size_t(R)]) * o[size_t(R)][size_t(h * D + d)];
            ASSERT_NEAR(acc, want_o[size_t(h * D + d)], 1e-5) << "W " << W << " I " << I << " L " << L;
          }
        }
      }
  EXPECT_GT(empty_shards_seen, 10);  // the sweep really exercises empty shards
}

TEST(CpCombine, AllEmptyIsEmptyNeverNaN) {
  std::vector<float> s(4, -INFINITY), w(4, 9.f);
  float s_star = merge_weights(4, s.data(), 1, w.data());
  EXPECT_TRUE(std::isinf(s_star) && s_star < 0);
  for (float x : w) EXPECT_EQ(x, 0.f);
  // One non-empty state among empties takes all the weight.
  s[2] = 1.5f;
  s_star = merge_weights(4, s.data(), 1, w.data());
  EXPECT_FLOAT_EQ(s_star, 1.5f);
  EXPECT_FLOAT_EQ(w[2], 1.f);
  EXPECT_EQ(w[0] + w[1] + w[3], 0.f);
}

TEST(CpCombine, Base2NotNaturalLog) {
  // Two equal shards: s* = s + 1 in base 2 (it would be s + ln 2 in natural units).
  std::vector<float> s{0.25f, 0.25f}, w(2);
  EXPECT_NEAR(merge_weights(2, s.data(), 1, w.data()), 1.25f, 1e-6);
  EXPECT_NEAR(w[0], 0.5f, 1e-6);
}

}  // namespace
}  // namespace cpinfer
