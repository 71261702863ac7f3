// The serving engine in-process on one rank: many requests batched together (continuous
// batching, chunked prefill, preemption under a small KV pool) give exactly the tokens each
// request gets alone through generate(), cancellation and stop conditions end requests,
// and every page returns to the pool.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "support/test_models.h"

namespace cpinfer {
namespace {

// `tiny` with its vocabulary cut to kVocab ids (make-model --vocab-size): every test here
// compares the engine with itself or with generate() on the same model, which any vocabulary
// does, and with the real 151936 ids each step would be mostly the LM head. Prime: uneven.
constexpr int64_t kVocab = 4099;
const std::string& model_dir() {
  static std::string dir = testing::test_model("tiny", 2, DType::F32, 1, kVocab);
  return dir;
}
const Tokenizer& tokenizer() {
  static Tokenizer t = Tokenizer::from_file(model_dir() + "/tokenizer.json");
  return t;
}

// The reference: one request alone through generate() on its own runner.
std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int64_t max_tokens,
                           const SamplingParams& sampling = {}) {
  RunnerOptions ro;
  ro.max_cache_tokens = int64_t(prompt.size()) + max_tokens;
  ModelRunner runner(model_dir(), ro, global_pool());
  StepExecutor exec(runner, nullptr);
  GenerateRequest req;
  req.prompt = prompt;
  req.max_tokens = max_tokens;
  req.ignore_eos = true;
  req.sampling = sampling;
  return generate(exec, req, global_pool()).tokens;
}

std::vector<int32_t> prompt_of(int64_t n, int32_t salt) {
  std::vector<int32_t> p;
  // Regular ids, under the cut's 26 special tokens at the top.
  for (int64_t i = 0; i < n; ++i) p.push_back(int32_t(100 + (i * 7919 + salt * 104729) % 3900));
  return p;
}

// An engine serving on a background thread.
struct Served {
  ModelRunner runner;
  StepExecutor exec;
  Engine engine;
  std::thread loop;
  Served(int64_t num_pages, int64_t page_size, SchedulerConfig sc, int64_t max_model_len = 512,
         bool prefix_caching = true)
      : runner(model_dir(), [&] {
          RunnerOptions ro;
          ro.page_size = page_size;
          ro.num_pages = num_pages;
          return ro;
        }(), global_pool()),
        exec(runner, nullptr),
        engine(exec, tokenizer(), EngineOptions{sc, max_model_len, {.enabled = prefix_caching}},
               global_pool()) {
    loop = std::thread([this] { engine.run(); });
  }
  ~Served() {
    engine.stop();
    loop.join();
  }
  // Waits until the engine is idle and has audited its pools.
  EngineMetrics idle() {
    for (int i = 0; i < 2000; ++i) {
      EngineMetrics m = engine.metrics();
      // Idle: every page is free or held by the prefix cache only, and the rank's own pool
      // (audited) agrees.
      if (m.running == 0 && m.waiting == 0 && m.kv_used_pages[0] == 0 &&
          m.kv_audited_free_pages[0] == runner.page_pool().num_pages() - m.kv_cached_pages[0])
        return m;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return engine.metrics();
  }
};

struct Collected {
  std::vector<int32_t> tokens;
  std::string text, finish_reason;
  int64_t completion_tokens = 0;
};

std::vector<Collected> collect(OutputChannel& ch, size_t n) {
  std::vector<Collected> out(n);
  size_t finished = 0;
  RequestEvent ev;
  while (finished < n) {
    if (!ch.pop(&ev, 120.0)) ADD_FAILURE() << "no event for 120 s";
    Collected& c = out[size_t(ev.index)];
    c.tokens.insert(c.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
    c.text += ev.text;
    c.completion_tokens = ev.completion_tokens;
    if (ev.finished) {
      c.finish_reason = ev.finish_reason;
      ++finished;
    }
  }
  return out;
}

RequestParams greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  p.random_seed = false;
  p.ignore_eos = true;
  return p;
}

void expect_batched_equals_alone(Served& s, const std::vector<int64_t>& lens, int64_t max_tokens) {
  auto ch = std::make_shared<OutputChannel>();
  for (size_t i = 0; i < lens.size(); ++i)
    s.engine.submit(greedy(prompt_of(lens[i], int32_t(i)), max_tokens), ch, int32_t(i));
  std::vector<Collected> got = collect(*ch, lens.size());
  for (size_t i = 0; i < lens.size(); ++i) {
    EXPECT_EQ(got[i].tokens, alone(prompt_of(lens[i], int32_t(i)), max_tokens)) << "request " << i;
    EXPECT_EQ(got[i].finish_reason, "length");
    EXPECT_EQ(got[i].completion_tokens, max_tokens);
  }
}

TEST(Engine, BatchedRequestsMatchEachAloneWithChunkedPrefill) {
  Served s(256, 16, {8, 48, true});  // 48-token budget: prompts are chunked
  expect_batched_equals_alone(s, {1, 5, 33, 100, 64, 7, 130, 2, 17, 90}, 12);
  EngineMetrics m = s.idle();
  EXPECT_EQ(m.kv_used_pages[0], 0);
  EXPECT_EQ(m.kv_audited_free_pages[0] + m.kv_cached_pages[0], 256);
  EXPECT_EQ(m.kv_audit_mismatches, 0u);
  EXPECT_EQ(m.kv_audit_mismatches, 0u);
  EXPECT_EQ(m.finished["length"], 10u);
  EXPECT_EQ(m.generation_tokens, 120u);
  EXPECT_EQ(m.prompt_tokens, 1u + 5 + 33 + 100 + 64 + 7 + 130 + 2 + 17 + 90);
  EXPECT_EQ(m.ttft.count, 10u);
  EXPECT_EQ(m.itl.count, 110u);
}

TEST(Engine, PreemptionUnderASmallPoolKeepsAnswersExact) {
  // 24 pages of 4 tokens = 96 tokens for 6 requests that need up to 60 each: the newest
  // are preempted and recomputed, and still produce exactly their lone answers.
  Served s(24, 4, {6, 256, true}, 96);
  expect_batched_equals_alone(s, {30, 22, 40, 12, 35, 28}, 20);
  EngineMetrics m = s.idle();
  EXPECT_GT(m.preemptions, 0u);
  EXPECT_EQ(m.kv_used_pages[0], 0);
  EXPECT_EQ(m.kv_audited_free_pages[0] + m.kv_cached_pages[0], 24);
  EXPECT_EQ(m.kv_audit_mismatches, 0u);
}

TEST(Engine, PrefixCacheUnderEvictionPressureMatchesUncached) {
  // Waves of requests over three shared documents on a 30-page pool (480 tokens; a wave
  // needs up to ~800): cached blocks are evicted and requests preempted while later prompts
  // keep hitting what is left. Every answer must equal the same request's on a large pool
  // without caching, and every page must come back.
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 64;
  Served cached(30, 16, sc, 300), plain(512, 16, sc, 300, /*prefix_caching*/ false);
  std::mt19937 rng(4);
  std::vector<std::vector<int32_t>> docs;
  for (int32_t d = 0; d < 3; ++d) docs.push_back(prompt_of(120 + 40 * d, 50 + d));
  for (int wave = 0; wave < 5; ++wave) {
    // One engine at a time: both share the global thread pool.
    auto ch1 = std::make_shared<OutputChannel>(), ch2 = std::make_shared<OutputChannel>();
    const int n = 4;
    std::vector<RequestParams> wave_reqs;
    for (int i = 0; i < n; ++i) {
      std::vector<int32_t> p = docs[rng() % docs.size()];
      p.resize(30 + rng() % (p.size() - 30));
      const std::vector<int32_t> tail = prompt_of(1 + int64_t(rng() % 20), 900 + wave * n + i);
      p.insert(p.end(), tail.begin(), tail.end());
      const int64_t max_tokens = 4 + int64_t(rng() % 30);
      wave_reqs.push_back(greedy(p, max_tokens));
    }
    for (int i = 0; i < n; ++i) cached.engine.submit(wave_reqs[size_t(i)], ch1, i);
    const auto got = collect(*ch1, n);
    for (int i = 0; i < n; ++i) plain.engine.submit(wave_reqs[size_t(i)], ch2, i);
    const auto want = collect(*ch2, n);
    for (int i = 0; i < n; ++i) EXPECT_EQ(got[size_t(i)].tokens, want[size_t(i)].tokens)
        << "wave " << wave << " request " << i;
  }
  const EngineMetrics m = cached.idle();
  EXPECT_GT(m.prefix_cache_hits, 200u);
  EXPECT_GT(m.preemptions, 0u);
  EXPECT_EQ(m.kv_used_pages[0], 0);
  EXPECT_EQ(m.kv_audited_free_pages[0] + m.kv_cached_pages[0], 30);
  EXPECT_EQ(m.kv_audit_mismatches, 0u);
  EXPECT_EQ(plain.idle().prefix_cache_hits, 0u);
}

TEST(Engine, WholePromptsWithoutChunkedPrefill) {
  Served s(128, 8, {4, 512, false});
  expect_batched_equals_alone(s, {50, 3, 200, 9, 77}, 6);
  EXPECT_EQ(s.idle().kv_used_pages[0], 0);
}

TEST(Engine, CancelFreesPages) {
  Served s(64, 16, {4, 64, true});
  auto ch = std::make_shared<OutputChannel>();
  s.engine.submit(greedy(prompt_of(40, 1), 400), ch, 0);
  RequestEvent ev;
  ASSERT_TRUE(ch->pop(&ev, 60.0));  // the first token: the request is running
  ch->cancel();
  do {
    ASSERT_TRUE(ch->pop(&ev, 60.0));
  } while (!ev.finished);
  EXPECT_EQ(ev.finish_reason, "abort");
  EXPECT_LT(ev.completion_tokens, 400);
  EngineMetrics m = s.idle();
  EXPECT_EQ(m.kv_used_pages[0], 0);
  EXPECT_EQ(m.kv_audited_free_pages[0] + m.kv_cached_pages[0], 64);
  EXPECT_EQ(m.kv_audit_mismatches, 0u);
  EXPECT_EQ(m.finished["abort"], 1u);
}

TEST(Engine, StopTokenIdsAndStopStrings) {
  Served s(64, 16, {4, 64, true});
  const std::vector<int32_t> prompt = prompt_of(9, 3);
  const std::vector<int32_t> ref = alone(prompt, 8);
  {  // the 4th generated token as a stop id: 4 tokens, finish "stop"
    auto ch = std::make_shared<OutputChannel>();
    RequestParams p = greedy(prompt, 8);
    p.stop_token_ids = {ref[3]};
    s.engine.submit(p, ch, 0);
    Collected c = collect(*ch, 1)[0];
    const size_t first = size_t(std::find(ref.begin(), ref.end(), ref[3]) - ref.begin());
    EXPECT_EQ(c.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + long(first) + 1));
    EXPECT_EQ(c.finish_reason, "stop");
  }
  {  // a stop string taken from the reference text: the text ends right before it
    const std::string full = tokenizer().decode(ref, true);
    ASSERT_GE(full.size(), 4u);
    const std::string stop = full.substr(full.size() / 2, 2);
    auto ch = std::make_shared<OutputChannel>();
    RequestParams p = greedy(prompt, 8);
    p.stop = {stop};
    s.engine.submit(p, ch, 0);
    Collected c = collect(*ch, 1)[0];
    EXPECT_EQ(c.text, full.substr(0, full.find(stop)));
    EXPECT_EQ(c.finish_reason, "stop");
  }
  EXPECT_EQ(s.idle().kv_used_pages[0], 0);
}

TEST(Engine, SeededSamplingIsReproducible) {
  Served s(64, 16, {4, 64, true});
  auto run = [&](uint64_t seed) {
    auto ch = std::make_shared<OutputChannel>();
    RequestParams p = greedy(prompt_of(12, 5), 10);
    p.sampling.temperature = 1.0f;
    p.sampling.top_p = 0.9f;
    p.sampling.seed = seed;
    s.engine.submit(p, ch, 0);
    return collect(*ch, 1)[0].tokens;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

// Penalties and logit_bias in the engine: batched requests with them give the tokens
// generate() gives each alone (both sample through RequestSampler, from the request's own
// history); greedy with repetition_penalty 100 never repeats a token; the logits an event
// carries are the model's, not the biased ones.
TEST(Engine, PenaltiesAndBiasMatchGenerateAndKeepRawLogits) {
  Served s(256, 16, {8, 48, true});
  std::vector<SamplingParams> params(4);
  params[0].repetition_penalty = 100.f;
  params[1].frequency_penalty = 1.5f;
  params[1].presence_penalty = 0.5f;
  params[2].logit_bias = {{3210, 100.f}};
  params[3] = {0.8f, 0.9f, 0, 5};  // sampled, with min_p and a penalty
  params[3].min_p = 0.05f;
  params[3].repetition_penalty = 1.3f;
  auto ch = std::make_shared<OutputChannel>();
  for (size_t i = 0; i < params.size(); ++i) {
    RequestParams p = greedy(prompt_of(20 + int64_t(i), int32_t(i)), 12);
    p.sampling = params[i];
    s.engine.submit(p, ch, int32_t(i));
  }
  const std::vector<Collected> got = collect(*ch, params.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(got[i].tokens, alone(prompt_of(20 + int64_t(i), int32_t(i)), 12, params[i]))
        << "request " << i;
  const std::vector<int32_t> prompt0 = prompt_of(20, 0);
  const std::set<int32_t> prompt_ids(prompt0.begin(), prompt0.end());
  std::set<int32_t> seen = prompt_ids;
  seen.insert(got[0].tokens.begin(), got[0].tokens.end());
  EXPECT_EQ(seen.size(), prompt_ids.size() + 12) << "repetition_penalty 100 repeated a token";
  EXPECT_EQ(got[2].tokens, std::vector<int32_t>(12, 3210));
  EXPECT_NE(got[0].tokens, alone(prompt_of(20, 0), 12)) << "the penalty changed nothing";

  // keep_logits: the first row of a biased request is the unbiased one's, bit for bit.
  auto first_row = [&](const SamplingParams& sp) {
    RequestParams p = greedy(prompt_of(9, 7), 1);
    p.sampling = sp;
    p.keep_logits = true;
    auto c = std::make_shared<OutputChannel>();
    s.engine.submit(p, c, 0);
    RequestEvent ev;
    EXPECT_TRUE(c->pop(&ev, 120.0));
    return ev.logits;
  };
  const std::vector<float> biased = first_row(params[2]), raw = first_row({});
  ASSERT_EQ(biased.size(), size_t(kVocab));
  EXPECT_EQ(biased, raw);
}

TEST(Engine, InvalidRequestsAreRefused) {
  Served s(16, 16, {4, 64, true}, 100);
  auto ch = std::make_shared<OutputChannel>();
  EXPECT_THROW(s.engine.submit(greedy({}, 4), ch, 0), Error);
  EXPECT_THROW(s.engine.submit(greedy({1, 2}, 0), ch, 0), Error);
  EXPECT_THROW(s.engine.submit(greedy(prompt_of(90, 1), 11), ch, 0), Error);  // 101 > 100
  EXPECT_THROW(s.engine.submit(greedy({1, int32_t(kVocab)}, 4), ch, 0), Error);  // past vocab
  RequestParams p = greedy({1, 2}, 4);
  p.sampling.temperature = -1;
  EXPECT_THROW(s.engine.submit(p, ch, 0), Error);
  p = greedy({1, 2}, 4);
  p.sampling.logit_bias = {{int32_t(kVocab), 1.f}};  // past the vocabulary
  EXPECT_THROW(s.engine.submit(p, ch, 0), Error);
  p = greedy({1, 2}, 4);
  p.sampling.repetition_penalty = 0;
  EXPECT_THROW(s.engine.submit(p, ch, 0), Error);
  // max model len over what the pool holds for one request: refused at start-up.
  ModelRunner runner(model_dir(), [] { RunnerOptions ro; ro.num_pages = 4; return ro; }(),
                     global_pool());
  StepExecutor exec(runner, nullptr);
  EXPECT_THROW(Engine(exec, tokenizer(), EngineOptions{{4, 64, true}, 65}, global_pool()), Error);
}

// Without --max-model-len the engine takes the model's length as vLLM derives it: a yarn
// config of 64 positions, factor 4 over 64 original ones, serves 256 tokens (capped by the
// KV pool).
TEST(Engine, DefaultMaxModelLenFollowsRopeScaling) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "engine_yarn_tiny";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(model_dir()))
    if (e.path().filename() != "config.json") fs::create_symlink(e.path(), dir / e.path().filename());
  nlohmann::json c = nlohmann::json::parse(std::ifstream(model_dir() + "/config.json"));
  c["max_position_embeddings"] = 64;
  c["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  std::ofstream(dir / "config.json") << c.dump();
  for (int64_t pages : {64, 8}) {
    RunnerOptions ro;
    ro.num_pages = pages;
    ro.page_size = 16;
    ModelRunner runner(dir.string(), ro, global_pool());
    StepExecutor exec(runner, nullptr);
    Engine engine(exec, tokenizer(), EngineOptions{{4, 64, true}, 0}, global_pool());
    EXPECT_EQ(engine.options().max_model_len, std::min<int64_t>(256, pages * 16)) << pages;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cpinfer
