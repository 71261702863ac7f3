// Automatic prefix caching on rank 0 (engine/prefix_cache.h, engine/block_manager.h) without
// a model: the hash chain and its exactness under forced hash collisions, LRU eviction from
// the tail, a hand-worked hit under W 2 (shared page + copied rows), and random multi-turn
// workloads through the real scheduler on simulated ranks. Each simulated rank applies the
// page operations exactly as a rank does and stores, per KV slot, a fingerprint of the
// token prefix that produced it; every step checks that each sequence's cached rows hold its
// own prefix's fingerprints (no stale or foreign KV), and that each rank's pool agrees with
// rank 0's account.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>

#include "attention/page_pool.h"
#include "attention/sequence_state.h"
#include "core/error.h"
#include "cp/cp_layout.h"
#include "engine/block_manager.h"
#include "engine/prefix_cache.h"
#include "engine/scheduler.h"

namespace cpinfer {
namespace {

std::vector<int32_t> iota_tokens(int64_t n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = first + int32_t(i);
  return t;
}

TEST(PrefixCache, ChainedHashMatchesWholeBlocksOfEqualPrefixes) {
  PrefixCache c(4, /*salt*/ 7);
  const auto a = iota_tokens(12, 100);
  CachedBlock* b0 = c.insert(nullptr, a.data(), 1);
  CachedBlock* b1 = c.insert(b0, a.data() + 4, 1);
  c.insert(b1, a.data() + 8, 1);
  std::vector<CachedBlock*> m;
  c.match(a.data(), 12, &m);
  EXPECT_EQ(m.size(), 3u);
  c.match(a.data(), 11, &m);  // whole blocks only
  EXPECT_EQ(m.size(), 2u);
  auto b = a;
  b[5] = 999;  // a change in block 1 misses blocks 1 and 2, though block 2 is equal
  c.match(b.data(), 12, &m);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], b0);
  b = a;
  b[0] = 999;  // a change in block 0 misses everything
  c.match(b.data(), 12, &m);
  EXPECT_TRUE(m.empty());
  // The same tokens at a different depth are a different block (the parent is part of it).
  std::vector<int32_t> shifted(a.begin() + 4, a.end());
  c.match(shifted.data(), 8, &m);
  EXPECT_TRUE(m.empty());
  // Another salt (another model) never matches.
  PrefixCache other(4, 8);
  EXPECT_NE(other.hash_of(0, a.data()), c.hash_of(0, a.data()));
}

TEST(PrefixCache, CollidingHashesNeverAlias) {
  // 1-bit hashes: every block collides with half of all others. Matches must still be
  // exact, because a hit compares the parent block and the token ids, not only the hash.
  PrefixCache c(2, 0, /*hash_bits*/ 1);
  std::mt19937 rng(5);
  std::map<std::vector<int32_t>, CachedBlock*> truth;  // prefix -> its last block
  for (int i = 0; i < 300; ++i) {
    std::vector<int32_t> t(8);
    for (auto& x : t) x = int32_t(rng() % 3);
    CachedBlock* parent = nullptr;
    for (int k = 0; k < 4; ++k) {
      CachedBlock* b = c.find(parent, t.data() + 2 * k);
      if (!b) b = c.insert(parent, t.data() + 2 * k, 1);
      parent = b;
      truth[std::vector<int32_t>(t.begin(), t.begin() + 2 * (k + 1))] = b;
    }
  }
  for (const auto& [prefix, block] : truth) {
    std::vector<CachedBlock*> m;
    c.match(prefix.data(), int64_t(prefix.size()), &m);
    ASSERT_EQ(m.size() * 2, prefix.size());
    EXPECT_EQ(m.back(), block);
    for (size_t k = 0; k < m.size(); ++k)
      EXPECT_TRUE(std::equal(m[k]->tokens.begin(), m[k]->tokens.end(), prefix.begin() + 2 * k));
  }
  EXPECT_EQ(c.size(), truth.size());  // 3^2 + 3^4 + ... distinct prefixes, none merged
}

TEST(PrefixCache, EvictsLeastRecentlyUsedLeavesTailFirst) {
  PrefixCache c(1, 0);
  const std::vector<int32_t> a{1, 2, 3}, b{1, 5};
  CachedBlock* a0 = c.insert(nullptr, &a[0], 1);
  CachedBlock* a1 = c.insert(a0, &a[1], 1);
  CachedBlock* a2 = c.insert(a1, &a[2], 1);
  CachedBlock* b1 = c.insert(a0, &b[1], 1);
  c.touch_chain(a2);  // chain a used after b
  EXPECT_EQ(c.victim(), b1);
  c.erase(b1);
  EXPECT_EQ(c.victim(), a2);  // only leaves, deepest first within one use
  c.erase(a2);
  EXPECT_EQ(c.victim(), a1);
  c.erase(a1);
  EXPECT_EQ(c.victim(), a0);
  c.erase(a0);
  EXPECT_EQ(c.victim(), nullptr);
  EXPECT_EQ(c.size(), 0u);
}

CpLayout layout_of(int64_t pcp, int64_t dcp, int64_t interleave, int64_t page) {
  CpLayout l;
  l.pcp = pcp;
  l.dcp = dcp;
  l.interleave = interleave;
  l.page_size = page;
  return l;
}

TEST(BlockManager, HitUnderTwoRanksSharesWholePagesAndCopiesThePartialOne) {
  // W 2, I 1, B 4. A 13-token sequence registers blocks 0-2 (12 tokens: 6 local rows per
  // rank). A new 20-token sequence with the same first 12 tokens hits them: on each rank
  // local page 0 (rows 0-3) is shared, rows 4-5 of local page 1 are copied into a new page.
  BlockManager b(8, layout_of(2, 1, 1, 4), {.enabled = true});
  const auto t = iota_tokens(13, 1);
  b.admit(1, {}, 13);
  b.commit(1, t, 13);
  EXPECT_EQ(b.cached_blocks(), 3u);
  std::vector<PageOp> ops;
  b.take_ops(&ops);
  auto more = iota_tokens(20, 1);
  more[15] = 77;
  const PrefixHit hit = b.lookup(more);
  ASSERT_EQ(hit.tokens, 12);
  ASSERT_TRUE(b.can_admit(hit, 20));
  b.admit(2, hit, 20);
  b.take_ops(&ops);
  for (int64_t r = 0; r < 2; ++r) {
    const auto& first = b.pages_of(1, r);
    const auto& second = b.pages_of(2, r);
    ASSERT_EQ(second.size(), 3u);  // 10 local rows
    EXPECT_EQ(second[0], first[0]);
    EXPECT_NE(second[1], first[1]);
  }
  // Rank by rank: Share page 0, pin the source, then Copy 2 rows and unpin, then Take.
  std::vector<std::pair<int32_t, int32_t>> kinds;  // (kind, rank)
  for (const PageOp& o : ops) kinds.push_back({o.kind, o.cp_rank});
  const std::vector<std::pair<int32_t, int32_t>> want{
      {PageOp::Share, 0}, {PageOp::Ref, 0},  {PageOp::Share, 1}, {PageOp::Ref, 1},
      {PageOp::Copy, 0},  {PageOp::Unref, 0}, {PageOp::Copy, 1}, {PageOp::Unref, 1},
      {PageOp::Take, 0},  {PageOp::Take, 1}};
  EXPECT_EQ(kinds, want);
  for (const PageOp& o : ops)
    if (o.kind == PageOp::Copy) {
      EXPECT_EQ(o.rows, 2);
      EXPECT_EQ(o.src, b.pages_of(1, o.cp_rank)[1]);
    }
  // Release both: the pages the blocks hold stay cached, nothing else is in use.
  b.release(1);
  b.release(2);
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_EQ(b.used_pages(r), 0);
    EXPECT_EQ(b.cached_pages(r), 2);  // local pages 0 and 1 of sequence 1
  }
  b.clear_cache();
  for (int64_t r = 0; r < 2; ++r) EXPECT_EQ(b.free_pages(r), 8);
}

TEST(BlockManager, LastPromptTokenIsAlwaysComputed) {
  BlockManager b(8, layout_of(1, 1, 1, 4), {.enabled = true});
  const auto t = iota_tokens(8, 1);
  b.admit(1, {}, 8);
  b.commit(1, t, 8);
  EXPECT_EQ(b.lookup(t).tokens, 4);  // 8 tokens: at most 7 cached -> one block
  auto longer = iota_tokens(9, 1);
  EXPECT_EQ(b.lookup(longer).tokens, 8);
  BlockManager off(8, layout_of(1, 1, 1, 4), {.enabled = false});
  off.admit(1, {}, 8);
  off.commit(1, t, 8);
  EXPECT_EQ(off.lookup(longer).tokens, 0);
  EXPECT_EQ(off.cached_blocks(), 0u);
}

// ---- simulated ranks --------------------------------------------------------------------

uint64_t mix(uint64_t h, int32_t t) {
  h ^= uint64_t(uint32_t(t)) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

// One CP rank as the executor and model runner see it: a page pool, each sequence's page
// table, and per KV slot the fingerprint of the prefix whose K/V it holds.
struct SimRank {
  CpLayout me;
  PagePool pool;
  std::vector<uint64_t> slots;
  std::map<int64_t, SequenceState> seqs;
  SimRank(const CpLayout& l, int64_t pages)
      : me(l), pool(int32_t(pages)), slots(size_t(pages * l.page_size), 0) {}

  void apply(const PageOp& op) {
    if (op.kind == PageOp::ReleaseSeq) {
      auto it = seqs.find(op.seq);
      if (it == seqs.end()) return;
      pool.release(it->second.pages);
      seqs.erase(it);
      return;
    }
    if (op.cp_rank != me.rank()) return;
    const int64_t B = me.page_size;
    switch (op.kind) {
      case PageOp::Take: pool.take(op.page); seqs[op.seq].pages.push_back(op.page); break;
      case PageOp::Share: pool.add_ref(op.page); seqs[op.seq].pages.push_back(op.page); break;
      case PageOp::Copy:
        pool.take(op.page);
        for (int64_t i = 0; i < op.rows; ++i) slots[size_t(op.page * B + i)] = slots[size_t(op.src * B + i)];
        seqs[op.seq].pages.push_back(op.page);
        break;
      case PageOp::Ref: pool.add_ref(op.page); break;
      case PageOp::Unref: pool.release(op.page); break;
      default: FAIL();
    }
  }
  int64_t slot(int64_t id, int64_t p) const {
    const int64_t li = me.local_index(p), B = me.page_size;
    return int64_t(seqs.at(id).pages.at(size_t(li / B))) * B + li % B;
  }
};

struct SimJob {
  CpLayout layout;
  BlockManager blocks;
  Scheduler sched;
  std::vector<SimRank> ranks;
  std::vector<std::unique_ptr<SchedSeq>> seqs;
  std::map<int64_t, int64_t> max_tokens;  // id -> tokens to generate
  std::vector<PageOp> ops;
  std::mt19937 rng{17};
  int64_t steps = 0;
  SimJob(const CpLayout& l, int64_t pages, SchedulerConfig cfg, int hash_bits = 64)
      : layout(l), blocks(pages, l, {.enabled = true, .salt = 3, .hash_bits = hash_bits}),
        sched(cfg, blocks) {
    for (int64_t r = 0; r < l.world(); ++r) ranks.emplace_back(l.as_rank(r), pages);
  }
  void flush() {
    blocks.take_ops(&ops);
    for (SimRank& r : ranks)
      for (const PageOp& o : ops) r.apply(o);
  }
  // Fingerprints of every prefix of `t`: fp[p] covers t[0..p].
  static std::vector<uint64_t> fingerprints(const std::vector<int32_t>& t) {
    std::vector<uint64_t> fp(t.size());
    uint64_t h = 1;
    for (size_t p = 0; p < t.size(); ++p) fp[p] = h = mix(h, t[p]);
    return fp;
  }
  void submit(int64_t id, std::vector<int32_t> prompt, int64_t gen) {
    seqs.push_back(std::make_unique<SchedSeq>());
    seqs.back()->id = id;
    seqs.back()->tokens = std::move(prompt);
    max_tokens[id] = gen;
    sched.add(seqs.back().get());
  }
  SchedSeq* find(int64_t id) {
    for (auto& s : seqs)
      if (s->id == id) return s.get();
    return nullptr;
  }
  void finish(SchedSeq* s) {
    sched.remove(s);
    max_tokens.erase(s->id);
    std::erase_if(seqs, [&](const auto& p) { return p.get() == s; });
  }
  // One engine step: schedule, apply the ops on every rank, check the cached rows of every
  // scheduled sequence, write the new rows, commit, "sample" a token for finished prompts.
  void step() {
    ++steps;
    StepSchedule s = sched.schedule();
    flush();
    for (const ScheduledSeq& q : s.seqs) {
      const auto fp = fingerprints(q.seq->tokens);
      for (int64_t p = 0; p < q.begin; ++p) {
        const SimRank& r = ranks[size_t(layout.owner(p))];
        ASSERT_EQ(r.slots[size_t(r.slot(q.seq->id, p))], fp[size_t(p)])
            << "sequence " << q.seq->id << " position " << p << " holds foreign KV";
      }
      for (int64_t p = q.begin; p < q.begin + q.num_tokens; ++p) {
        SimRank& r = ranks[size_t(layout.owner(p))];
        ASSERT_EQ(r.seqs.at(q.seq->id).pages.size(), size_t(r.me.pages_needed(q.begin + q.num_tokens)));
        const int64_t sl = r.slot(q.seq->id, p);
        // A page written to is this sequence's alone: no other sequence maps it.
        const int32_t page = int32_t(sl / layout.page_size);
        for (const auto& [other, st] : r.seqs)
          if (other != q.seq->id)
            ASSERT_EQ(std::count(st.pages.begin(), st.pages.end(), page), 0)
                << "sequence " << q.seq->id << " writes page " << page << " of sequence " << other;
        r.slots[size_t(sl)] = fp[size_t(p)];
      }
    }
    sched.commit(s);
    std::vector<SchedSeq*> done;
    for (const ScheduledSeq& q : s.seqs) {
      SchedSeq* seq = q.seq;
      if (seq->num_computed < int64_t(seq->tokens.size())) continue;
      seq->tokens.push_back(int32_t(rng() % 50));
      if (--max_tokens[seq->id] <= 0) done.push_back(seq);
    }
    for (SchedSeq* d : done) finish(d);
    flush();
    check_account();
  }
  void check_account() {
    for (int64_t r = 0; r < layout.world(); ++r)
      ASSERT_EQ(ranks[size_t(r)].pool.num_free(), blocks.free_pages(r)) << "rank " << r;
  }
  void run_until_idle() {
    for (int i = 0; i < 100000 && !sched.empty(); ++i) {
      step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    ASSERT_TRUE(sched.empty());
  }
};

// Multi-turn: turn k's prompt is turn k-1's prompt + answer + a new question.
void multi_turn(SimJob& job, int64_t conversations, int64_t turns, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> history(static_cast<size_t>(conversations));
  for (auto& h : history) {
    h.resize(50 + rng() % 200);
    for (auto& x : h) x = int32_t(rng() % 50);
  }
  int64_t id = 1;
  for (int64_t t = 0; t < turns; ++t) {
    for (int64_t c = 0; c < conversations; ++c) job.submit(id++, history[size_t(c)], 1 + rng() % 20);
    job.run_until_idle();
    for (int64_t c = 0; c < conversations; ++c) {  // the answer, then a question
      for (int64_t k = 0; k < int64_t(1 + rng() % 20); ++k) history[size_t(c)].push_back(int32_t(rng() % 50));
      for (int64_t k = 0; k < int64_t(5 + rng() % 40); ++k) history[size_t(c)].push_back(int32_t(rng() % 50));
    }
  }
}

TEST(BlockManager, MultiTurnHitsEqualOneRanksOnEveryLayout) {
  SchedulerConfig cfg;
  cfg.max_num_batched_tokens = 64;
  SimJob one(layout_of(1, 1, 1, 16), 4096, cfg);
  multi_turn(one, 4, 5, 9);
  ASSERT_GT(one.sched.prefix_hits(), 0u);
  for (const auto& [pcp, dcp, il] :
       std::vector<std::tuple<int, int, int>>{{2, 1, 1}, {2, 1, 8}, {2, 1, 16}, {2, 2, 8}, {3, 1, 1}, {1, 4, 4}}) {
    SimJob cp(layout_of(pcp, dcp, il, 16), 4096, cfg);
    multi_turn(cp, 4, 5, 9);
    EXPECT_EQ(cp.sched.prefix_queries(), one.sched.prefix_queries());
    EXPECT_EQ(cp.sched.prefix_hits(), one.sched.prefix_hits())
        << "pcp " << pcp << " dcp " << dcp << " interleave " << il;
  }
}

TEST(BlockManager, RandomSharedPrefixWorkloadsUnderEvictionPressure) {
  // Pools far smaller than the workload: blocks are evicted, sequences preempted; every
  // cached row must still hold its own prefix's KV, and every page must come back.
  std::mt19937 rng(23);
  uint64_t hits = 0, preemptions = 0, evictions = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t pcp = 1 + rng() % 3, dcp = 1 + rng() % 2;
    const int64_t page = int64_t(1) << (1 + rng() % 3);           // 2, 4, 8
    const int64_t il = int64_t(1) << (rng() % 3 % (page == 2 ? 2 : 3));  // divides page
    const CpLayout l = layout_of(pcp, dcp, il, page);
    SchedulerConfig cfg;
    cfg.max_num_batched_tokens = 8 + int64_t(rng() % 40);
    cfg.max_num_seqs = 2 + int64_t(rng() % 6);
    const int64_t pages = 16 + int64_t(rng() % 16);
    SimJob job(l, pages, cfg, /*hash_bits*/ trial % 3 == 0 ? 2 : 64);
    std::vector<std::vector<int32_t>> docs(3);
    for (auto& d : docs) {
      d.resize(20 + rng() % 60);
      for (auto& x : d) x = int32_t(rng() % 4);  // few distinct ids: many equal blocks
    }
    int64_t id = 1;
    for (int round = 0; round < 80; ++round) {
      if (rng() % 3 != 0 || job.sched.empty()) {
        std::vector<int32_t> p = docs[rng() % docs.size()];
        p.resize(1 + rng() % p.size());
        for (int64_t k = 0; k < int64_t(rng() % 12); ++k) p.push_back(int32_t(rng() % 4));
        // A prompt must fit alone (the engine refuses others at submit).
        const int64_t gen = 1 + int64_t(rng() % 24);
        if (job.blocks.fits_alone(int64_t(p.size()) + gen)) job.submit(id++, p, gen);
      }
      if (rng() % 7 == 0 && !job.seqs.empty()) {  // a cancel
        job.finish(job.seqs[rng() % job.seqs.size()].get());
        job.flush();
      }
      job.step();
      if (HasFatalFailure()) {
        ADD_FAILURE() << "trial " << trial << " pcp " << pcp << " dcp " << dcp << " I " << il
                      << " page " << page;
        return;
      }
    }
    job.run_until_idle();
    hits += job.sched.prefix_hits();
    preemptions += job.sched.num_preemptions();
    evictions += job.blocks.evicted_blocks();
    for (int64_t r = 0; r < l.world(); ++r) EXPECT_EQ(job.blocks.used_pages(r), 0);
    job.blocks.clear_cache();
    job.flush();
    for (int64_t r = 0; r < l.world(); ++r) {
      EXPECT_EQ(job.blocks.free_pages(r), pages);
      EXPECT_EQ(job.ranks[size_t(r)].pool.num_free(), pages) << "rank " << r << " leaked";
      EXPECT_TRUE(job.ranks[size_t(r)].seqs.empty());
    }
  }
  // The workload did what it is for: hits, evictions and preemptions all happened.
  std::printf("cached tokens hit %llu, blocks evicted %llu, preemptions %llu\n",
              (unsigned long long)hits, (unsigned long long)evictions,
              (unsigned long long)preemptions);
  EXPECT_GT(hits, 1000u);
  EXPECT_GT(evictions, 100u);
  EXPECT_GT(preemptions, 10u);
}

}  // namespace
}  // namespace cpinfer
