// The sampling parameters that change the distribution beyond temperature / top-k / top-p:
// repetition_penalty, presence_penalty, frequency_penalty, min_p and logit_bias, each
// against a distribution computed by hand on a vocabulary of 4 ids (the arithmetic is in
// the comments); vLLM's order of application; greedy with penalties and bias; ranges; the
// generation_config.json defaults.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "kernels/penalties.h"
#include "kernels/sampling.h"

namespace cpinfer {
namespace {

constexpr int kDraws = 40000;
// 40000 draws: a frequency's standard deviation is at most 0.0025; 0.012 is ~5 sigma, and
// every expected distribution below differs from the one without the parameter by > 0.05.
constexpr double kTol = 0.012;

std::vector<double> frequencies(const std::vector<float>& l, const SamplingParams& p) {
  ThreadPool pool(1);
  Rng rng(p.seed);
  std::vector<double> f(l.size(), 0.0);
  for (int i = 0; i < kDraws; ++i) f[size_t(sample_token(l.data(), int64_t(l.size()), p, rng, pool))] += 1;
  for (double& x : f) x /= kDraws;
  return f;
}

void expect_distribution(const std::vector<float>& l, const SamplingParams& p,
                         const std::vector<double>& want, const char* what) {
  const std::vector<double> got = frequencies(l, p);
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == 0) EXPECT_EQ(got[i], 0.0) << what << ": id " << i << " must never be drawn";
    else EXPECT_NEAR(got[i], want[i], kTol) << what << ": id " << i;
  }
}

SamplingParams at_temperature(float t, uint64_t seed = 11) {
  SamplingParams p;
  p.temperature = t;
  p.seed = seed;
  return p;
}

// Applies p's penalties and bias to l with the given history, checks the result, samples
// from it, and checks that restore_logits gives the original row back bit for bit.
void check_adjusted(std::vector<float> l, const SamplingParams& p, const TokenCounts& counts,
                    const std::vector<float>& want_logits, const std::vector<double>& want_p,
                    const char* what) {
  const std::vector<float> raw = l;
  SavedLogits saved;
  apply_penalties(l.data(), int64_t(l.size()), p, counts, &saved);
  for (size_t i = 0; i < l.size(); ++i) EXPECT_FLOAT_EQ(l[i], want_logits[i]) << what << ": logit " << i;
  if (!want_p.empty()) expect_distribution(l, p, want_p, what);
  restore_logits(l.data(), saved);
  EXPECT_EQ(l, raw) << what << ": the row is not restored";
}

TEST(SamplingPenalties, RepetitionPenaltyCountsPromptAndOutput) {
  // logits {2, 1, -1, 0.5}; id 0 is in the prompt, id 2 was generated; r = 2:
  //   id 0: 2 > 0 -> 2 / 2 = 1;  id 2: -1 <= 0 -> -1 * 2 = -2;  ids 1, 3 unseen: unchanged.
  // softmax {1, 1, -2, 0.5} at T = 1: e^1 = 2.718282, e^-2 = 0.135335, e^0.5 = 1.648721,
  //   sum = 2 * 2.718282 + 0.135335 + 1.648721 = 7.220620
  //   p = {0.376461, 0.376461, 0.018743, 0.228335}
  // (without the penalty: {0.609, 0.224, 0.030, 0.136})
  SamplingParams p = at_temperature(1.f);
  p.repetition_penalty = 2.f;
  TokenCounts c;
  c.add_prompt({0});
  c.add_output(2);
  check_adjusted({2.f, 1.f, -1.f, 0.5f}, p, c, {1.f, 1.f, -2.f, 0.5f},
                 {0.376461, 0.376461, 0.018743, 0.228335}, "repetition_penalty 2");
  // r < 1 rewards repetition: r = 0.5 -> id 0: 2 / 0.5 = 4, id 2: -1 * 0.5 = -0.5.
  p.repetition_penalty = 0.5f;
  check_adjusted({2.f, 1.f, -1.f, 0.5f}, p, c, {4.f, 1.f, -0.5f, 0.5f}, {}, "repetition_penalty 0.5");
}

TEST(SamplingPenalties, FrequencyAndPresenceCountTheOutputOnly) {
  // logits {1, 1, 1, 1}; generated: id 0 twice, id 1 once; id 3 only in the prompt.
  // frequency 0.5, presence 0.25 (OpenAI: l -= f * count + p * (count > 0)):
  //   id 0: 1 - 0.5 * 2 - 0.25 = -0.25;  id 1: 1 - 0.5 * 1 - 0.25 = 0.25;  ids 2, 3: 1.
  // e^-0.25 = 0.778801, e^0.25 = 1.284025, e^1 = 2.718282:
  //   sum = 0.778801 + 1.284025 + 2 * 2.718282 = 7.499390
  //   p = {0.103849, 0.171219, 0.362466, 0.362466}   (without: 0.25 each)
  SamplingParams p = at_temperature(1.f);
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  TokenCounts c;
  c.add_prompt({3});
  c.add_output(0);
  c.add_output(1);
  c.add_output(0);
  check_adjusted({1.f, 1.f, 1.f, 1.f}, p, c, {-0.25f, 0.25f, 1.f, 1.f},
                 {0.103849, 0.171219, 0.362466, 0.362466}, "frequency 0.5, presence 0.25");
  // A negative presence penalty encourages: presence -0.5 alone -> ids 0, 1: 1.5.
  //   e^1.5 = 4.481689: sum = 2 * 4.481689 + 2 * 2.718282 = 14.399942
  //   p = {0.311229, 0.311229, 0.188771, 0.188771}
  p.frequency_penalty = 0.f;
  p.presence_penalty = -0.5f;
  check_adjusted({1.f, 1.f, 1.f, 1.f}, p, c, {1.5f, 1.5f, 1.f, 1.f},
                 {0.311229, 0.311229, 0.188771, 0.188771}, "presence -0.5");
  EXPECT_EQ(c.entries().size(), 3u) << "one entry per distinct id seen";
}

TEST(SamplingPenalties, LogitBiasAddsToTheLogit) {
  // logits {0, 0, 0, 0}; bias +ln 3 on id 1, -100 on id 3:
  //   weights {1, 3, 1, e^-100 ~ 3.7e-44}: p = {0.2, 0.6, 0.2, 0}
  SamplingParams p = at_temperature(1.f);
  p.logit_bias = {{1, std::log(3.f)}, {3, -100.f}};
  check_adjusted({0.f, 0.f, 0.f, 0.f}, p, TokenCounts{}, {0.f, std::log(3.f), 0.f, -100.f},
                 {0.2, 0.6, 0.2, 0.0}, "logit_bias");
}

TEST(SamplingPenalties, VllmOrderBiasThenRepetitionThenFrequencyThenPresence) {
  // id 0: logit 2, in the prompt, bias +2, r = 2: bias first: (2 + 2) / 2 = 2
  //   (the penalty first would give 2 / 2 + 2 = 3).
  // id 1: logit 1, generated once, r = 2, frequency 1, presence 0.25: 1 / 2 - 1 - 0.25 = -0.75
  //   (frequency before repetition would give (1 - 1 - 0.25) * 2 = -0.5).
  SamplingParams p = at_temperature(1.f);
  p.logit_bias = {{0, 2.f}};
  p.repetition_penalty = 2.f;
  p.frequency_penalty = 1.f;
  p.presence_penalty = 0.25f;
  TokenCounts c;
  c.add_prompt({0});
  c.add_output(1);
  check_adjusted({2.f, 1.f, 0.f, 0.f}, p, c, {2.f, -0.75f, 0.f, 0.f}, {}, "order");
}

TEST(SamplingPenalties, MinPAfterTemperatureBeforeTopKTopP) {
  // p = {0.5, 0.3, 0.15, 0.05} as logits ln p.
  const std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  // T = 1, min_p 0.2: drop p < 0.2 * 0.5 = 0.1 (id 3); renormalise over 0.95:
  //   {0.5, 0.3, 0.15} / 0.95 = {0.526316, 0.315789, 0.157895, 0}
  SamplingParams p = at_temperature(1.f);
  p.min_p = 0.2f;
  expect_distribution(l, p, {0.526316, 0.315789, 0.157895, 0}, "min_p 0.2");
  // After temperature: T = 2 flattens to sqrt(p) = {0.707107, 0.547723, 0.387298, 0.223607};
  //   min_p 0.4: drop < 0.4 * 0.707107 = 0.282843 (id 3 only; before temperature the cut
  //   0.4 * 0.5 = 0.2 would drop id 2 as well); sum = 1.642128:
  //   p = {0.430606, 0.333543, 0.235851, 0}
  p = at_temperature(2.f);
  p.min_p = 0.4f;
  expect_distribution(l, p, {0.430606, 0.333543, 0.235851, 0}, "min_p 0.4 at T 2");
  // With top_k 2 (the top-k path of the sampler): min_p 0.2 keeps 3, top-k keeps 2:
  //   {0.5, 0.3} / 0.8 = {0.625, 0.375, 0, 0}
  p = at_temperature(1.f);
  p.min_p = 0.2f;
  p.top_k = 2;
  expect_distribution(l, p, {0.625, 0.375, 0, 0}, "min_p 0.2, top_k 2");
  // Before top_p: min_p 0.2 leaves {0.526316, 0.315789, 0.157895}; top_p 0.82: cumulative
  //   0.526316, 0.842105 >= 0.82 -> {0.5, 0.3} / 0.8 = {0.625, 0.375, 0, 0}. (top_p first
  //   would need 0.5 + 0.3 + 0.15 >= 0.82 and keep id 2.)
  p.top_k = 0;
  p.top_p = 0.82f;
  expect_distribution(l, p, {0.625, 0.375, 0, 0}, "min_p 0.2 then top_p 0.82");
  // min_p 1: only the most likely id (ties kept).
  p = at_temperature(1.f);
  p.min_p = 1.f;
  expect_distribution(l, p, {1, 0, 0, 0}, "min_p 1");
}

// Greedy (temperature 0) still applies the penalties and the bias, as vLLM does: the
// argmax of the adjusted logits. The caller's row is the model's again after each call.
TEST(SamplingPenalties, GreedyAppliesPenaltiesAndBias) {
  ThreadPool pool(1);
  const std::vector<float> raw{3.f, 2.5f, 0.f, 0.f};
  std::vector<float> row = raw;
  SamplingParams p;  // temperature 0
  auto run = [&](const SamplingParams& sp, int steps) {
    RequestSampler s(sp, {3});
    std::vector<int32_t> out;
    for (int i = 0; i < steps; ++i) {
      out.push_back(s.sample(row.data(), 4, pool));
      EXPECT_EQ(row, raw) << "the row must be restored after step " << i;
    }
    return out;
  };
  EXPECT_EQ(run(p, 3), (std::vector<int32_t>{0, 0, 0}));
  // repetition 2: step 1 argmax {3, 2.5} -> 0; then id 0 is 3 / 2 = 1.5 < 2.5 -> 1; then
  // id 1 is 2.5 / 2 = 1.25 < 1.5 -> 0.
  p.repetition_penalty = 2.f;
  EXPECT_EQ(run(p, 3), (std::vector<int32_t>{0, 1, 0}));
  // frequency 0.4: 0 (3); 0 (3 - 0.4 = 2.6 > 2.5); 1 (3 - 0.8 = 2.2 < 2.5); 0 (2.2 > 2.1).
  p.repetition_penalty = 1.f;
  p.frequency_penalty = 0.4f;
  EXPECT_EQ(run(p, 4), (std::vector<int32_t>{0, 0, 1, 0}));
  // logit_bias +100 on id 2 forces it.
  p = SamplingParams{};
  p.logit_bias = {{2, 100.f}};
  EXPECT_EQ(run(p, 3), (std::vector<int32_t>{2, 2, 2}));
}

TEST(SamplingPenalties, RangesAreChecked) {
  auto bad = [](auto set) {
    SamplingParams p;
    set(p);
    EXPECT_THROW(validate_sampling(p), Error);
  };
  auto good = [](auto set) {
    SamplingParams p;
    set(p);
    EXPECT_NO_THROW(validate_sampling(p));
  };
  bad([](SamplingParams& p) { p.min_p = -0.1f; });
  bad([](SamplingParams& p) { p.min_p = 1.1f; });
  bad([](SamplingParams& p) { p.repetition_penalty = 0.f; });
  bad([](SamplingParams& p) { p.repetition_penalty = -1.f; });
  bad([](SamplingParams& p) { p.repetition_penalty = INFINITY; });
  bad([](SamplingParams& p) { p.presence_penalty = 2.5f; });
  bad([](SamplingParams& p) { p.frequency_penalty = -2.01f; });
  bad([](SamplingParams& p) { p.logit_bias = {{1, 100.5f}}; });
  bad([](SamplingParams& p) { p.logit_bias = {{1, NAN}}; });
  good([](SamplingParams& p) { p.min_p = 1.f; });
  good([](SamplingParams& p) { p.presence_penalty = -2.f; p.frequency_penalty = 2.f; });
  good([](SamplingParams& p) { p.logit_bias = {{1, -100.f}, {2, 100.f}}; });
  good([](SamplingParams& p) { p.repetition_penalty = 0.01f; });
  // The message names the parameter.
  SamplingParams p;
  p.min_p = 2.f;
  try {
    validate_sampling(p);
    ADD_FAILURE() << "min_p 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("min_p"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RequestSampler(p, {1}), Error);
}

TEST(SamplingPenalties, GenerationConfigDefaults) {
  GenerationDefaults g;
  g.temperature = 0.7;
  g.top_k = 20;
  g.repetition_penalty = 1.1;
  const SamplingParams d = with_generation_defaults(openai_sampling_defaults(), g);
  EXPECT_FLOAT_EQ(d.temperature, 0.7f);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_FLOAT_EQ(d.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(d.top_p, 1.f);  // not in the file: OpenAI's
  EXPECT_FLOAT_EQ(d.min_p, 0.f);
  EXPECT_FLOAT_EQ(openai_sampling_defaults().temperature, 1.f);
  g.top_k = -1;  // -1: off
  EXPECT_EQ(with_generation_defaults(openai_sampling_defaults(), g).top_k, 0);
  EXPECT_EQ(describe_sampling_defaults(d),
            "temperature 0.7, top_p 1, top_k 20, min_p 0, repetition_penalty 1.1");
}

}  // namespace
}  // namespace cpinfer
