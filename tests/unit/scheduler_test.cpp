// Block manager (per-rank page accounting under CP), the continuous-batching scheduler
// (budget, sequence limit, chunked prefill, preemption), against hand-worked examples and
// against a replay on real page pools.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "attention/page_pool.h"
#include "core/error.h"
#include "cp/cp_layout.h"
#include "engine/block_manager.h"
#include "engine/scheduler.h"

namespace cpinfer {
namespace {

TEST(BlockManager, CountsEachRanksShare) {
  // W 2, interleave 1, page size 4: 10 tokens -> 5 per rank -> 2 pages each.
  CpLayout l;
  l.pcp = 2;
  l.page_size = 4;
  BlockManager b(/*pages*/ 3, l);
  EXPECT_EQ(b.pages_for(10, 0), 2);
  EXPECT_EQ(b.pages_for(10, 1), 2);
  EXPECT_EQ(b.pages_for(9, 1), 1);  // rank 1 holds 1,3,5,7: 4 tokens
  b.grow(7, 10);
  EXPECT_EQ(b.used_pages(0), 2);
  EXPECT_EQ(b.used_pages(1), 2);
  EXPECT_TRUE(b.can_grow(7, 12));   // 6 each: 2 pages, no change
  EXPECT_FALSE(b.can_grow(8, 9));   // rank 0 needs 2 more (5 tokens), has 1
  EXPECT_TRUE(b.can_grow(8, 2));
  EXPECT_THROW(b.grow(8, 9), Error);
  EXPECT_EQ(b.used_pages(0), 2);    // a refused grow takes nothing
  EXPECT_TRUE(b.release(7));
  EXPECT_FALSE(b.release(7));
  EXPECT_EQ(b.used_pages(0), 0);
  EXPECT_TRUE(b.fits_alone(24));    // 12 per rank = 3 pages
  EXPECT_FALSE(b.fits_alone(25));   // rank 0: 13 tokens = 4 pages
}

// The block manager must agree page for page with what every rank's pool actually
// allocates (the planner's CpLayout::pages_needed for its own rank), for many random layouts.
TEST(BlockManager, MatchesRankAllocationsExactly) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    CpLayout base;
    base.pcp = 1 + int(rng() % 3);
    base.dcp = 1 + int(rng() % 3);
    base.interleave = 1 + int(rng() % 9);
    const int64_t page = 1 + int64_t(rng() % 17);
    base.page_size = page;
    BlockManager b(1000, base);
    for (int64_t len : {1, 2, 7, 16, 33, 100, 257}) {
      for (int64_t r = 0; r < base.world(); ++r) {
        const CpLayout me = base.as_rank(r);
        ASSERT_EQ(me.rank(), r);
        ASSERT_EQ(b.pages_for(len, r), me.pages_needed(len))
            << "W " << base.world() << " I " << base.interleave << " page " << page << " len "
            << len << " rank " << r;
      }
    }
  }
}

struct Harness {
  BlockManager blocks;
  Scheduler sched;
  std::vector<std::unique_ptr<SchedSeq>> seqs;
  Harness(int64_t pages, int64_t page_size, SchedulerConfig cfg, int64_t world = 1)
      : blocks(pages, layout(page_size, world)), sched(cfg, blocks) {}
  static CpLayout layout(int64_t page_size, int64_t world) {
    CpLayout l;
    l.pcp = world;
    l.page_size = page_size;
    return l;
  }
  SchedSeq* add(int64_t id, int64_t prompt_len) {
    seqs.push_back(std::make_unique<SchedSeq>());
    SchedSeq* s = seqs.back().get();
    s->id = id;
    s->tokens.assign(size_t(prompt_len), 1);
    sched.add(s);
    return s;
  }
  // Runs one step: commits it and appends a token to every sequence whose tokens are all
  // computed (what the engine does after sampling).
  StepSchedule step() {
    StepSchedule s = sched.schedule();
    sched.commit(s);
    for (const ScheduledSeq& q : s.seqs)
      if (q.seq->num_computed == int64_t(q.seq->tokens.size())) q.seq->tokens.push_back(2);
    return s;
  }
};

std::vector<std::pair<int64_t, int64_t>> shape(const StepSchedule& s) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const ScheduledSeq& q : s.seqs) out.push_back({q.seq->id, q.num_tokens});
  return out;
}
using Shape = std::vector<std::pair<int64_t, int64_t>>;

TEST(Scheduler, ChunkedPrefillWithinBudget) {
  // The header's example: budget 8, A decoding, B with a 10-token prompt.
  Harness h(100, 4, {16, 8, true});
  h.add(1, 3);
  EXPECT_EQ(shape(h.step()), (Shape{{1, 3}}));
  h.add(2, 10);
  EXPECT_EQ(shape(h.step()), (Shape{{1, 1}, {2, 7}}));
  EXPECT_EQ(shape(h.step()), (Shape{{1, 1}, {2, 3}}));
  EXPECT_EQ(shape(h.step()), (Shape{{1, 1}, {2, 1}}));
}

TEST(Scheduler, WholePromptsWithoutChunking) {
  Harness h(100, 4, {16, 8, false});
  h.add(1, 3);
  h.add(2, 6);  // 3 + 6 > 8: waits for the next step
  EXPECT_EQ(shape(h.step()), (Shape{{1, 3}}));
  EXPECT_EQ(shape(h.step()), (Shape{{1, 1}, {2, 6}}));
  EXPECT_EQ(shape(h.step()), (Shape{{1, 1}, {2, 1}}));
}

TEST(Scheduler, MaxNumSeqs) {
  Harness h(100, 4, {2, 64, true});
  h.add(1, 2);
  h.add(2, 2);
  h.add(3, 2);
  EXPECT_EQ(shape(h.step()), (Shape{{1, 2}, {2, 2}}));
  EXPECT_EQ(h.sched.num_waiting(), 1u);
  h.sched.remove(h.seqs[0].get());
  EXPECT_EQ(shape(h.step()), (Shape{{2, 1}, {3, 2}}));
}

TEST(Scheduler, PreemptsNewestAndRecomputes) {
  // 3 pages of 4 tokens. A (4 tokens) and B (4 tokens) take a page each and sample a token
  // (5 tokens each). Next step A takes the last page for its 5th token; B would need a
  // 4th page: B, the newest, is preempted. Once A is gone, B is recomputed whole: its
  // prompt and the token it generated (5 tokens).
  Harness h(3, 4, {8, 64, true});
  SchedSeq* a = h.add(1, 4);
  SchedSeq* b = h.add(2, 4);
  EXPECT_EQ(shape(h.step()), (Shape{{1, 4}, {2, 4}}));
  StepSchedule s = h.step();
  EXPECT_EQ(shape(s), (Shape{{1, 1}}));
  EXPECT_EQ(s.preempted, (std::vector<int64_t>{2}));
  EXPECT_EQ(h.sched.num_preemptions(), 1);
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_EQ(h.blocks.used_pages(0), 2);
  EXPECT_EQ(shape(h.step()), (Shape{{1, 1}}));  // B still does not fit (needs 2 pages)
  h.sched.remove(a);
  EXPECT_EQ(shape(h.step()), (Shape{{2, 5}}));
  EXPECT_EQ(h.blocks.used_pages(0), 2);
}

TEST(Scheduler, PreemptionNeverTouchesScheduledSequences) {
  // Random workloads on a small pool: every step's pages fit, preempted sequences are
  // recomputed, and once everything is removed no page is left in use.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    const bool chunked = trial % 2 == 0;
    Harness h(12, 4, {4, chunked ? 16 : 64, chunked});
    int64_t next = 1;
    for (int step = 0; step < 200; ++step) {
      if (rng() % 3 == 0 && h.seqs.size() < 12) h.add(next++, 1 + int64_t(rng() % 20));
      StepSchedule s = h.sched.schedule();
      int64_t tokens = 0;
      for (const ScheduledSeq& q : s.seqs) {
        tokens += q.num_tokens;
        for (int64_t id : s.preempted) ASSERT_NE(q.seq->id, id);
        ASSERT_EQ(q.begin, q.seq->num_computed);
        ASSERT_LE(q.begin + q.num_tokens, int64_t(q.seq->tokens.size()));
        ASSERT_EQ(h.blocks.held_tokens(q.seq->id), q.begin + q.num_tokens);
      }
      ASSERT_LE(tokens, h.sched.config().max_num_batched_tokens);
      ASSERT_LE(h.blocks.used_pages(0), 12);
      h.sched.commit(s);
      for (const ScheduledSeq& q : s.seqs)
        if (q.seq->num_computed == int64_t(q.seq->tokens.size())) {
          q.seq->tokens.push_back(2);
          if (q.seq->tokens.size() > 30 || rng() % 8 == 0) h.sched.remove(q.seq);  // finished
        }
    }
    for (auto& s : h.seqs) h.sched.remove(s.get());
    EXPECT_EQ(h.blocks.used_pages(0), 0);
    EXPECT_TRUE(h.sched.empty());
  }
}

}  // namespace
}  // namespace cpinfer
