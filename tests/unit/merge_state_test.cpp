// merge_state / merge_states (context-parallel.md §7): the base-2 merge formula against
// float64, the empty-state rules (exact, never NaN), commutativity (exact for two states),
// associativity (to rounding), strided n-ary layouts and in-place use, and a guard that a
// natural-exp merge of base-2 LSEs would be caught.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/merge_state.h"

namespace cpinfer {
namespace {

// A softmax over `scores` (natural units) with values v[j][D]: O and base-2 LSE in double.
struct State {
  std::vector<double> o;
  double lse;
};
State softmax_state(const std::vector<double>& scores, const std::vector<std::vector<double>>& v,
                    size_t j0, size_t j1, int64_t D) {
  State s{std::vector<double>(size_t(D), 0.0), -INFINITY};
  if (j0 >= j1) return s;
  double m = -INFINITY, den = 0;
  for (size_t j = j0; j < j1; ++j) m = std::max(m, scores[j]);
  for (size_t j = j0; j < j1; ++j) den += std::exp(scores[j] - m);
  for (size_t j = j0; j < j1; ++j)
    for (int64_t d = 0; d < D; ++d)
      s.o[size_t(d)] += std::exp(scores[j] - m) / den * v[j][size_t(d)];
  s.lse = (m + std::log(den)) / std::log(2.0);
  return s;
}

TEST(MergeState, ShardsOfOneSoftmaxMergeToTheWhole) {
  // A softmax over 300 scores split into n shards (some empty), states rounded to f32, merged:
  // equals the whole to float rounding, for the 2-way and the n-ary merge.
  std::mt19937 g(5);
  std::normal_distribution<double> nd(0.0, 3.0);
  const int64_t D = 24, L = 300;
  std::vector<double> sc(static_cast<size_t>(L));
  std::vector<std::vector<double>> v(static_cast<size_t>(L),
                                     std::vector<double>(static_cast<size_t>(D)));
  for (auto& x : sc) x = nd(g);
  for (auto& r : v)
    for (auto& x : r) x = nd(g);
  const State whole = softmax_state(sc, v, 0, size_t(L), D);
  const std::vector<size_t> cuts{0, 0, 37, 37, 150, 299, 300, 300};  // shards [cut_i, cut_i+1)
  const int64_t n = int64_t(cuts.size()) - 1;
  std::vector<float> o(static_cast<size_t>(n * D)), lse(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    State s = softmax_state(sc, v, cuts[size_t(i)], cuts[size_t(i) + 1], D);
    // An empty shard's O is garbage (NaN here): the merge must ignore it.
    for (int64_t d = 0; d < D; ++d)
      o[size_t(i * D + d)] = std::isinf(s.lse) ? NAN : float(s.o[size_t(d)]);
    lse[size_t(i)] = float(s.lse);
  }
  std::vector<float> out(static_cast<size_t>(D)), out_lse(1);
  merge_states(n, 1, 1, D, o.data(), D, D, lse.data(), 1, 1, out.data(), D, out_lse.data(), 1);
  EXPECT_NEAR(out_lse[0], whole.lse, 1e-5);
  for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(out[size_t(d)], whole.o[size_t(d)], 1e-5);
  // Left fold of two-way merges.
  std::vector<float> acc(o.begin(), o.begin() + D);
  float acc_lse = lse[0];
  for (int64_t i = 1; i < n; ++i)
    merge_state(1, 1, D, acc.data(), D, &acc_lse, 1, &o[size_t(i * D)], D, &lse[size_t(i)], 1,
                acc.data(), D, &acc_lse, 1);
  EXPECT_NEAR(acc_lse, whole.lse, 1e-5);
  for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(acc[size_t(d)], whole.o[size_t(d)], 1e-5);

  // The natural-exp bug on the same shards is off by far more than the tolerance.
  double m = -INFINITY, den = 0;
  for (float s : lse) m = std::max(m, double(s));
  for (float s : lse) den += std::exp(double(s) - m);
  EXPECT_GT(std::abs(m + std::log2(den) - whole.lse), 1e-2);
}

TEST(MergeState, EmptyStatesAreNeutralAndNeverNaN) {
  const int64_t D = 8;
  std::vector<float> a(D), junk(D, NAN), zero(D, 0.f);
  for (int64_t d = 0; d < D; ++d) a[size_t(d)] = 0.25f * float(d) - 1.f;
  const float sa = 3.7f, empty = -INFINITY;
  std::vector<float> o(D);
  float s = 0;
  // a + empty (whose O is garbage) == a, bit for bit; either order.
  merge_state(1, 1, D, a.data(), D, &sa, 1, junk.data(), D, &empty, 1, o.data(), D, &s, 1);
  EXPECT_EQ(0, std::memcmp(o.data(), a.data(), D * 4));
  EXPECT_EQ(s, sa);
  merge_state(1, 1, D, junk.data(), D, &empty, 1, a.data(), D, &sa, 1, o.data(), D, &s, 1);
  EXPECT_EQ(0, std::memcmp(o.data(), a.data(), D * 4));
  EXPECT_EQ(s, sa);
  // empty + empty == empty: O = 0, LSE = -inf, no NaN.
  merge_state(1, 1, D, junk.data(), D, &empty, 1, junk.data(), D, &empty, 1, o.data(), D, &s, 1);
  EXPECT_EQ(0, std::memcmp(o.data(), zero.data(), D * 4));
  EXPECT_TRUE(std::isinf(s) && s < 0);
  // n-ary: all empty, and zero states.
  std::vector<float> many(static_cast<size_t>(5 * D), NAN), ls(5, -INFINITY);
  merge_states(5, 1, 1, D, many.data(), D, D, ls.data(), 1, 1, o.data(), D, &s, 1);
  EXPECT_EQ(0, std::memcmp(o.data(), zero.data(), D * 4));
  EXPECT_TRUE(std::isinf(s) && s < 0);
  merge_states(0, 1, 1, D, nullptr, 0, D, nullptr, 0, 1, o.data(), D, &s, 1);
  EXPECT_TRUE(std::isinf(s) && s < 0);
  // A single non-empty state among empties passes through exactly.
  std::memcpy(&many[size_t(3 * D)], a.data(), D * 4);
  ls[3] = sa;
  merge_states(5, 1, 1, D, many.data(), D, D, ls.data(), 1, 1, o.data(), D, &s, 1);
  EXPECT_EQ(0, std::memcmp(o.data(), a.data(), D * 4));
  EXPECT_EQ(s, sa);
}

TEST(MergeState, CommutativeAndAssociative) {
  std::mt19937 g(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t T = 5, H = 3, D = 16;
  std::vector<float> o[3], l[3];
  for (int i = 0; i < 3; ++i) {
    o[i].resize(size_t(T * H * D));
    l[i].resize(size_t(T * H));
    for (auto& x : o[i]) x = nd(g);
    for (auto& x : l[i]) x = 4.f * nd(g);
  }
  l[1][4] = -INFINITY;  // some empties mixed in
  l[2][7] = -INFINITY;
  auto merge2 = [&](const std::vector<float>& oa, const std::vector<float>& la,
                    const std::vector<float>& ob, const std::vector<float>& lb,
                    std::vector<float>& oo, std::vector<float>& lo) {
    oo.resize(size_t(T * H * D));
    lo.resize(size_t(T * H));
    merge_state(T, H, D, oa.data(), H * D, la.data(), H, ob.data(), H * D, lb.data(), H,
                oo.data(), H * D, lo.data(), H);
  };
  std::vector<float> ab_o, ab_l, ba_o, ba_l;
  merge2(o[0], l[0], o[1], l[1], ab_o, ab_l);
  merge2(o[1], l[1], o[0], l[0], ba_o, ba_l);
  EXPECT_EQ(0, std::memcmp(ab_o.data(), ba_o.data(), ab_o.size() * 4));  // exactly commutative
  EXPECT_EQ(0, std::memcmp(ab_l.data(), ba_l.data(), ab_l.size() * 4));
  std::vector<float> left_o, left_l, bc_o, bc_l, right_o, right_l;
  merge2(ab_o, ab_l, o[2], l[2], left_o, left_l);   // (a b) c
  merge2(o[1], l[1], o[2], l[2], bc_o, bc_l);
  merge2(o[0], l[0], bc_o, bc_l, right_o, right_l);  // a (b c)
  // n-ary over the three stacked [3, T, H, D].
  std::vector<float> st_o, st_l, n_o(static_cast<size_t>(T * H * D));
  std::vector<float> n_l(static_cast<size_t>(T * H));
  for (int i = 0; i < 3; ++i) {
    st_o.insert(st_o.end(), o[i].begin(), o[i].end());
    st_l.insert(st_l.end(), l[i].begin(), l[i].end());
  }
  ThreadPool pool(2);
  merge_states(3, T, H, D, st_o.data(), T * H * D, H * D, st_l.data(), T * H, H, n_o.data(),
               H * D, n_l.data(), H, &pool);
  for (size_t i = 0; i < left_o.size(); ++i) {
    EXPECT_NEAR(left_o[i], right_o[i], 1e-6);
    EXPECT_NEAR(left_o[i], n_o[i], 1e-6);
  }
  for (size_t i = 0; i < left_l.size(); ++i) {
    EXPECT_NEAR(left_l[i], right_l[i], 1e-6);
    EXPECT_NEAR(left_l[i], n_l[i], 1e-6);
  }
  // The formula itself, in double.
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const size_t r = size_t(t * H + h);
      double m = -INFINITY, sum = 0;
      for (int i = 0; i < 3; ++i) m = std::max(m, double(l[i][r]));
      double w[3];
      for (int i = 0; i < 3; ++i) sum += (w[i] = std::exp2(double(l[i][r]) - m));
      EXPECT_NEAR(n_l[r], m + std::log2(sum), 1e-5);
      for (int64_t d = 0; d < D; ++d) {
        double want = 0;
        for (int i = 0; i < 3; ++i) want += w[i] / sum * o[i][r * size_t(D) + size_t(d)];
        EXPECT_NEAR(n_o[r * size_t(D) + size_t(d)], want, 1e-6);
      }
    }
}

TEST(MergeState, StridedAndInPlace) {
  // Row strides larger than the row, and the output written over the first input.
  const int64_t T = 3, H = 2, D = 8, ld = H * D + 5, ldl = H + 3;
  std::vector<float> a(static_cast<size_t>(T * ld)), b(a.size());
  std::vector<float> la(static_cast<size_t>(T * ldl)), lb(la.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = float(i % 7) - 3.f;
    b[i] = float(i % 5) * 0.5f;
  }
  for (size_t i = 0; i < la.size(); ++i) {
    la[i] = float(i) * 0.3f;
    lb[i] = 1.f - float(i) * 0.2f;
  }
  std::vector<float> o(a.size(), 42.f), lo(la.size(), 42.f);
  merge_state(T, H, D, a.data(), ld, la.data(), ldl, b.data(), ld, lb.data(), ldl, o.data(), ld,
              lo.data(), ldl);
  merge_state(T, H, D, a.data(), ld, la.data(), ldl, b.data(), ld, lb.data(), ldl, a.data(), ld,
              la.data(), ldl);  // in place
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < H * D; ++i) EXPECT_EQ(a[size_t(t * ld + i)], o[size_t(t * ld + i)]);
    for (int64_t i = H * D; i < ld; ++i) EXPECT_EQ(o[size_t(t * ld + i)], 42.f);  // pad kept
    for (int64_t h = 0; h < H; ++h) EXPECT_EQ(la[size_t(t * ldl + h)], lo[size_t(t * ldl + h)]);
  }
  EXPECT_THROW(merge_state(T, H, D, a.data(), H * D - 1, la.data(), ldl, b.data(), ld,
                           lb.data(), ldl, o.data(), ld, lo.data(), ldl),
               Error);
}

}  // namespace
}  // namespace cpinfer
