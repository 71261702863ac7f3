// Page pool, KV page copies, step plans on the wire, forward-batch building and sampling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include <numeric>

#include <set>

#include <cmath>
#include <map>

#include "attention/kv_cache.h"
#include "attention/page_pool.h"
#include "engine/step_plan.h"
#include "core/error.h"
#include "cp/step_planner.h"
#include "kernels/sampling.h"

namespace cpinfer {
namespace {

TEST(PagePool, AllocateReleaseAndRefCounts) {
  PagePool pool(4);
  EXPECT_EQ(pool.num_free(), 4);
  auto a = pool.allocate(3);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(a, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_THROW(pool.allocate(2), Error);
  EXPECT_EQ(pool.num_free(), 1);  // a failed allocation takes nothing
  pool.add_ref(a[1]);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 3);  // page 1 still referenced once
  EXPECT_EQ(pool.ref_count(a[1]), 1);
  pool.release(a[1]);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_THROW(pool.release(a[1]), Error);  // double free is caught
  EXPECT_THROW(pool.release(7), Error);
  EXPECT_THROW(pool.add_ref(0), Error);     // free page
}

TEST(PagePool, TakesTheChosenPage) {
  // A worker takes exactly the page rank 0 chose; the free list stays consistent.
  PagePool pool(6);
  pool.take(3);
  pool.take(0);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.ref_count(3), 1);
  EXPECT_THROW(pool.take(3), Error);  // not free
  EXPECT_THROW(pool.take(6), Error);  // outside the pool
  std::set<int32_t> rest;
  for (int32_t p : pool.allocate(4)) rest.insert(p);
  EXPECT_EQ(rest, (std::set<int32_t>{1, 2, 4, 5}));
  pool.release(3);
  pool.take(3);  // free again after its release
  EXPECT_EQ(pool.num_free(), 0);
}

TEST(KvCacheCopy, CopiesTheFirstRowsOfEveryLayer) {
  for (DType dt : {DType::F32, DType::BF16}) {
    // 2 layers, 3 pages of 4 slots, 2 heads x 8.
    KvCache cache(KvCacheShape{2, 3, 4, 2, 8, dt});
    std::vector<float> k(16 * 4), v(16 * 4);
    for (size_t i = 0; i < k.size(); ++i) k[i] = float(i), v[i] = -float(i);
    const int64_t slots[4] = {4, 5, 6, 7};  // page 1
    for (int64_t l = 0; l < 2; ++l) cache.append(l, k.data(), v.data(), 16, slots, 4);
    cache.copy_rows(1, 2, 3);
    for (int64_t l = 0; l < 2; ++l) {
      const PagedKv kv = cache.layer(l);
      for (int64_t slot = 0; slot < 4; ++slot)
        for (int64_t e = 0; e < 16; ++e) {
          auto at = [&](const void* base, int64_t s) {
            return dt == DType::F32 ? ((const float*)base)[s * 16 + e]
                                    : float(((const bf16*)base)[s * 16 + e]);
          };
          const float want_k = slot < 3 ? k[size_t(slot * 16 + e)] : 0.f;
          EXPECT_EQ(at(kv.k, 8 + slot), want_k) << "layer " << l << " slot " << slot;
          EXPECT_EQ(at(kv.v, 8 + slot), slot < 3 ? -want_k : 0.f);
        }
    }
    EXPECT_THROW(cache.copy_rows(1, 3, 1), Error);
    EXPECT_THROW(cache.copy_rows(1, 2, 5), Error);
  }
}

TEST(StepPlanWire, RoundTripsAndRejectsCorruptBytes) {
  StepPlan p;
  p.kind = StepPlan::Kind::Forward;
  p.pages_from_ops = 1;
  p.page_ops = {{PageOp::Share, 1, 7, 3, -1, 0, 0}, {PageOp::Copy, 0, 7, 9, 3, 5, 0},
                {PageOp::ReleaseSeq, -1, 4, -1, -1, 0, 0}};
  StepPlan::Seq a;
  a.id = 7, a.num_tokens = 2, a.begin = 40;
  StepPlan::Seq b;
  b.id = 8, b.num_tokens = 1, b.all_logits = 1, b.row_use = RowUse::Argmax;
  p.seqs = {a, b};
  p.tokens = {11, 12, 13};
  const std::vector<uint8_t> bytes = p.serialize();
  const StepPlan q = StepPlan::deserialize(bytes);
  EXPECT_EQ(q.pages_from_ops, 1);
  ASSERT_EQ(q.page_ops.size(), 3u);
  EXPECT_EQ(q.page_ops[1].kind, PageOp::Copy);
  EXPECT_EQ(q.page_ops[1].src, 3);
  EXPECT_EQ(q.page_ops[1].rows, 5);
  ASSERT_EQ(q.seqs.size(), 2u);
  EXPECT_EQ(q.seqs[0].begin, 40);
  EXPECT_EQ(q.seqs[1].all_logits, 1);
  EXPECT_EQ(q.seqs[0].row_use, RowUse::Logits);
  EXPECT_EQ(q.seqs[1].row_use, RowUse::Argmax);
  for (RowUse use : {RowUse::Logits, RowUse::Argmax, RowUse::None}) {
    StepPlan r = p;
    r.seqs[0].row_use = use;
    EXPECT_EQ(StepPlan::deserialize(r.serialize()).seqs[0].row_use, use);
  }
  EXPECT_EQ(q.tokens, p.tokens);
  for (size_t cut : {size_t(0), size_t(10), bytes.size() - 1})
    EXPECT_THROW(StepPlan::deserialize(std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut)),
                 Error);
  std::vector<uint8_t> bad = bytes;
  bad[32] = 0x7f;  // first op's kind
  EXPECT_THROW(StepPlan::deserialize(bad), Error);
  StepPlan wrong = p;
  wrong.tokens.pop_back();  // the counts disagree
  EXPECT_THROW(StepPlan::deserialize(wrong.serialize()), Error);
  // A row use outside {Logits, Argmax, None} (a corrupt or foreign plan) is refused, not
  // acted on: a worker would otherwise add or drop a logit row the others do not.
  for (int32_t use : {-1, 3, 0x7fffffff}) {
    StepPlan corrupt = p;
    corrupt.seqs[1].row_use = static_cast<RowUse>(use);
    EXPECT_THROW(StepPlan::deserialize(corrupt.serialize()), Error) << use;
  }
}

TEST(StepPlanner, OneRankSlotsPositionsAndPageTable) {
  // page_size 4: sequence A has 5 cached tokens in pages {3, 1}, appends 4 more;
  // sequence B is new with 2 tokens.
  PagePool pool(8);
  auto taken = pool.allocate(8);
  pool.release(std::vector<int32_t>{5, 6, 7});  // free stack now hands out 7, 6, 5
  SequenceState a{{3, 1}, 5}, b;
  std::vector<int32_t> ta{10, 11, 12, 13}, tb{20, 21};
  std::vector<SequenceStep> steps{{&a, ta.data(), 4, false}, {&b, tb.data(), 2, true}};
  CpLayout one;
  one.page_size = 4;
  StepPlanner planner(one);
  RankStep fb;
  planner.plan(steps, pool, &fb);
  EXPECT_EQ(fb.tokens, (std::vector<int32_t>{10, 11, 12, 13, 20, 21}));
  EXPECT_EQ(fb.positions, (std::vector<int32_t>{5, 6, 7, 8, 0, 1}));
  // A: positions 5,6,7 are page 1 offsets 1..3; position 8 opens a new page (7).
  EXPECT_EQ(fb.slots, (std::vector<int64_t>{1 * 4 + 1, 1 * 4 + 2, 1 * 4 + 3, 7 * 4 + 0, 6 * 4, 6 * 4 + 1}));
  EXPECT_EQ(fb.paged.q_indptr, (std::vector<int64_t>{0, 4, 6}));
  EXPECT_EQ(fb.paged.kv_lens, (std::vector<int64_t>{9, 2}));
  EXPECT_EQ(fb.paged.page_indptr, (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(fb.paged.page_indices, (std::vector<int32_t>{3, 1, 7, 6}));
  EXPECT_EQ(fb.logit_rows, (std::vector<int64_t>{3, 4, 5}));
  commit_step(steps);
  EXPECT_EQ(a.num_cached, 9);
  EXPECT_EQ(b.num_cached, 2);
  EXPECT_EQ(one.pages_needed(0), 0);
  one.page_size = 16;
  EXPECT_EQ(one.pages_needed(17), 2);
}

TEST(Sampling, GreedyIsArgmaxLowestIndexOnTies) {
  ThreadPool pool(2);
  std::vector<float> l(1001, 0.f);
  l[500] = 3.f;
  l[900] = 3.f;
  EXPECT_EQ(argmax(l.data(), 1001, pool), 500);
  Rng rng(1);
  EXPECT_EQ(sample_token(l.data(), 1001, {}, rng, pool), 500);
}

// argmax against the plain loop `if (x[i] > x[best]) best = i` (first index of the largest
// value; a NaN never wins unless it is first) over odd sizes, 1 and 2 threads, and values
// drawn from a small set so ties, -0 / +0, -inf and NaN all occur, at every position
// (the vector lanes, the tail past whole blocks, a thread's chunk boundary).
TEST(Sampling, ArgmaxMatchesThePlainLoop) {
  const float kValues[] = {-INFINITY, -1.f, -0.f, 0.f, 0.5f, 2.f, 2.f, NAN};
  std::mt19937 gen(7);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int64_t V : {1, 2, 15, 31, 32, 33, 47, 64, 65, 100, 1001, 4099}) {
      for (int trial = 0; trial < 40; ++trial) {
        std::vector<float> x(static_cast<size_t>(V));
        // Mostly ordinary values; some trials use only the awkward ones.
        std::uniform_int_distribution<int> pick(0, trial % 4 == 0 ? 7 : 5);
        std::uniform_real_distribution<float> real(-5.f, 5.f);
        for (auto& v : x) v = trial % 2 ? kValues[pick(gen)] : real(gen);
        if (trial % 5 == 1) x[size_t(gen() % uint64_t(V))] = NAN;
        if (trial % 7 == 3) x[0] = NAN;  // the plain loop then returns a chunk's first index
        // The threads' chunks are [0, ceil(V / t)), ...: the answer of each chunk by the
        // plain loop, merged as argmax merges them.
        const int64_t step = (V + threads - 1) / threads;
        int64_t want = -1;
        for (int64_t b = 0; b < V; b += step) {
          int64_t best = b;
          for (int64_t i = b + 1; i < std::min(V, b + step); ++i)
            if (x[size_t(i)] > x[size_t(best)]) best = i;
          if (want < 0 || x[size_t(best)] > x[size_t(want)]) want = best;
        }
        ASSERT_EQ(argmax(x.data(), V, pool), want) << "V " << V << " trial " << trial
                                                    << " threads " << threads;
      }
    }
  }
}

// A row split into parts (as the vocabulary over ranks, empty parts included): the argmax of
// each part by the plain loop, merged, must be the plain loop's argmax of the whole row,
// ties (many, from a small set of values) to the lowest id.
TEST(Sampling, MergedPartArgmaxIsTheWholeRowsArgmax) {
  std::mt19937 gen(11);
  for (int64_t V : {1, 2, 7, 64, 1001}) {
    for (int parts_n : {1, 2, 3, 4, 8}) {
      for (int trial = 0; trial < 30; ++trial) {
        const int64_t R = 1 + trial % 4;
        std::uniform_int_distribution<int> small(0, trial % 3 == 0 ? 1 : 5);
        std::uniform_real_distribution<float> real(-3.f, 3.f);
        std::vector<float> x(size_t(R * V));
        for (auto& v : x) v = trial % 2 ? float(small(gen)) : real(gen);
        // Random cut points (parts may be empty), in vocabulary order.
        std::vector<int64_t> cuts{0, V};
        for (int k = 1; k < parts_n; ++k) cuts.push_back(int64_t(gen() % uint64_t(V + 1)));
        std::sort(cuts.begin(), cuts.end());
        std::vector<std::vector<int32_t>> cand(size_t(parts_n), std::vector<int32_t>(size_t(2 * R)));
        std::vector<const int32_t*> parts;
        for (int k = 0; k < parts_n; ++k) {
          for (int64_t r = 0; r < R; ++r) {
            int32_t* c = &cand[size_t(k)][size_t(2 * r)];
            c[1] = -1;
            const float* row = x.data() + r * V;
            for (int64_t i = cuts[size_t(k)]; i < cuts[size_t(k) + 1]; ++i)
              if (c[1] < 0 || row[i] > row[c[1]]) c[1] = int32_t(i);
            if (c[1] >= 0) std::memcpy(&c[0], &row[c[1]], sizeof(float));
          }
          parts.push_back(cand[size_t(k)].data());
        }
        std::vector<int32_t> ids(static_cast<size_t>(R));
        merge_argmax_parts(parts, R, ids.data());
        for (int64_t r = 0; r < R; ++r) {
          const float* row = x.data() + r * V;
          int64_t want = 0;
          for (int64_t i = 1; i < V; ++i)
            if (row[i] > row[want]) want = i;
          ASSERT_EQ(ids[size_t(r)], want) << "V " << V << " parts " << parts_n << " trial " << trial;
        }
      }
    }
  }
  std::vector<int32_t> empty{0, -1};
  int32_t id = 0;
  EXPECT_THROW(merge_argmax_parts({empty.data()}, 1, &id), Error);
}

TEST(Sampling, TemperatureTopKTopPFollowTheDistribution) {
  ThreadPool pool(1);
  // logits ln(p) for p = {0.5, 0.3, 0.15, 0.05}
  std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto freq = [&](SamplingParams p) {
    Rng rng(p.seed);
    std::map<int, int> c;
    for (int i = 0; i < 20000; ++i) c[sample_token(l.data(), 4, p, rng, pool)]++;
    return c;
  };
  auto c = freq({1.f, 1.f, 0, 42});
  EXPECT_NEAR(c[0] / 20000.0, 0.5, 0.02);
  EXPECT_NEAR(c[3] / 20000.0, 0.05, 0.01);
  c = freq({1.f, 1.f, 2, 42});  // top-k 2: renormalised 0.625 / 0.375
  EXPECT_EQ(c[2] + c[3], 0);
  EXPECT_NEAR(c[0] / 20000.0, 0.625, 0.02);
  c = freq({1.f, 0.79f, 0, 42});  // top-p 0.79: {0.5, 0.3}
  EXPECT_EQ(c[2] + c[3], 0);
  c = freq({1.f, 0.81f, 0, 42});  // needs the third token too
  EXPECT_GT(c[2], 0);
  EXPECT_EQ(c[3], 0);
  // Same seed, same draws.
  EXPECT_EQ(freq({0.7f, 0.9f, 3, 9}), freq({0.7f, 0.9f, 3, 9}));
}

// Reference: the definition, over the whole vocabulary in double precision (sort all ids
// by logit, top-k, softmax, nucleus). Returns the candidate ids that may be drawn.
std::vector<int32_t> reference_support(const std::vector<float>& l, const SamplingParams& p) {
  const int64_t V = int64_t(l.size());
  std::vector<int32_t> idx(l.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    return l[size_t(a)] > l[size_t(b)] || (l[size_t(a)] == l[size_t(b)] && a < b);
  });
  if (p.top_k > 0 && p.top_k < V) idx.resize(size_t(p.top_k));
  std::vector<double> w(idx.size());
  double total = 0;
  for (size_t i = 0; i < idx.size(); ++i)
    total += w[i] = std::exp((double(l[size_t(idx[i])]) - l[size_t(idx[0])]) / p.temperature);
  double cum = 0;
  for (size_t i = 0; i < idx.size(); ++i) {
    cum += w[i];
    if (cum >= p.top_p * total) {
      idx.resize(i + 1);
      break;
    }
  }
  return idx;
}

// A Qwen-sized vocabulary (151936 ids, 19 chunks): draws stay inside the reference's
// candidate set, follow its probabilities, and the same seed gives the same tokens with 1
// and 2 threads (chunked, order-fixed reductions).
TEST(Sampling, LargeVocabularyMatchesReferenceAndIgnoresThreadCount) {
  ThreadPool one(1), two(2);
  const int64_t V = 151936;
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> l(static_cast<size_t>(V));
  for (auto& v : l) v = nd(gen);
  // A few clear favourites far apart in the vocabulary (different chunks).
  l[7] = 14.f;
  l[90001] = 13.5f;
  l[151935] = 13.f;
  for (SamplingParams p : {SamplingParams{1.f, 1.f, 0, 5}, SamplingParams{0.8f, 0.9f, 0, 6},
                           SamplingParams{1.3f, 1.f, 50, 7}, SamplingParams{1.f, 0.5f, 40, 8},
                           SamplingParams{0.5f, 0.95f, 0, 9}}) {
    const std::vector<int32_t> support = reference_support(l, p);
    const std::set<int32_t> allowed(support.begin(), support.end());
    Rng r1(p.seed), r2(p.seed);
    std::map<int32_t, int> count;
    const int draws = 400;
    for (int i = 0; i < draws; ++i) {
      const int32_t a = sample_token(l.data(), V, p, r1, one);
      ASSERT_EQ(a, sample_token(l.data(), V, p, r2, two)) << "draw " << i;
      ASSERT_TRUE(allowed.count(a)) << "token " << a << " outside the reference candidates";
      count[a]++;
    }
    // The favourite's frequency matches its reference probability within 4 sigma.
    double total = 0, fav = 0;
    for (int32_t id : support) {
      const double w = std::exp((double(l[size_t(id)]) - 14.0) / p.temperature);
      total += w;
      if (id == 7) fav = w;
    }
    const double q = fav / total, sigma = std::sqrt(q * (1 - q) / draws);
    EXPECT_NEAR(count[7] / double(draws), q, 4 * sigma + 1e-3)
        << "temperature " << p.temperature << " top_p " << p.top_p << " top_k " << p.top_k;
  }
}

// A nucleus that needs most of a flat vocabulary (the threshold search goes all the way).
TEST(Sampling, FlatDistributionNucleus) {
  ThreadPool pool(2);
  std::vector<float> l(20000, 0.f);
  l[123] = 1e-3f;
  Rng rng(4);
  std::set<int32_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const int32_t t = sample_token(l.data(), 20000, {1.f, 0.99f, 0, 4}, rng, pool);
    ASSERT_TRUE(t >= 0 && t < 20000);
    seen.insert(t);
  }
  EXPECT_GT(seen.size(), 1500u);  // ~2000 draws over ~19800 near-equal ids
}

TEST(Sampling, RejectsBadParameters) {
  EXPECT_THROW(validate_sampling({-0.1f, 1.f, 0, 0}), Error);
  EXPECT_THROW(validate_sampling({1.f, 0.f, 0, 0}), Error);
  EXPECT_THROW(validate_sampling({1.f, 1.5f, 0, 0}), Error);
  EXPECT_THROW(validate_sampling({NAN, 1.f, 0, 0}), Error);
}

}  // namespace
}  // namespace cpinfer
