// Page pool, forward-batch building and sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "attention/page_pool.h"
#include "core/error.h"
#include "engine/batch_builder.h"
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

TEST(BatchBuilder, SlotsPositionsAndPageTable) {
  // page_size 4: sequence A has 5 cached tokens in pages {3, 1}, appends 4 more;
  // sequence B is new with 2 tokens.
  PagePool pool(8);
  auto taken = pool.allocate(8);
  pool.release(std::vector<int32_t>{5, 6, 7});  // free stack now hands out 7, 6, 5
  SequenceState a{{3, 1}, 5}, b;
  std::vector<int32_t> ta{10, 11, 12, 13}, tb{20, 21};
  std::vector<SequenceStep> steps{{&a, ta.data(), 4, false}, {&b, tb.data(), 2, true}};
  ForwardBatch fb;
  build_forward_batch(steps, 4, pool, &fb);
  EXPECT_EQ(fb.tokens, (std::vector<int32_t>{10, 11, 12, 13, 20, 21}));
  EXPECT_EQ(fb.positions, (std::vector<int32_t>{5, 6, 7, 8, 0, 1}));
  // A: positions 5,6,7 are page 1 offsets 1..3; position 8 opens a new page (7).
  EXPECT_EQ(fb.slots, (std::vector<int64_t>{1 * 4 + 1, 1 * 4 + 2, 1 * 4 + 3, 7 * 4 + 0, 6 * 4, 6 * 4 + 1}));
  EXPECT_EQ(fb.q_indptr, (std::vector<int64_t>{0, 4, 6}));
  EXPECT_EQ(fb.kv_lens, (std::vector<int64_t>{9, 2}));
  EXPECT_EQ(fb.page_indptr, (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(fb.page_indices, (std::vector<int32_t>{3, 1, 7, 6}));
  EXPECT_EQ(fb.logit_rows, (std::vector<int64_t>{3, 4, 5}));
  commit_step(steps);
  EXPECT_EQ(a.num_cached, 9);
  EXPECT_EQ(b.num_cached, 2);
  EXPECT_EQ(pages_needed(0, 16), 0);
  EXPECT_EQ(pages_needed(17, 16), 2);
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

TEST(Sampling, RejectsBadParameters) {
  EXPECT_THROW(validate_sampling({-0.1f, 1.f, 0, 0}), Error);
  EXPECT_THROW(validate_sampling({1.f, 0.f, 0, 0}), Error);
  EXPECT_THROW(validate_sampling({1.f, 1.5f, 0, 0}), Error);
  EXPECT_THROW(validate_sampling({NAN, 1.f, 0, 0}), Error);
}

}  // namespace
}  // namespace cpinfer
