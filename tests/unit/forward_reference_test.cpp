// The engine's single-rank forward pass against the float64 reference model
// (tests/support/reference_model.cpp), on synthetic models with f32 weights.
#include <gtest/gtest.h>

#include <cmath>

#include "core/cpu_features.h"
#include "engine/model_runner.h"
#include "kernels/sampling.h"
#include "support/reference_compare.h"
#include "support/reference_model.h"
#include "support/test_models.h"

namespace cpinfer {
namespace {

using testing::max_diff;
using testing::random_prompt;
using testing::ReferenceModel;

constexpr double kTol = 1e-4;  // issue: engine logits within 1e-4 of float64 (f32 weights)

struct ModelCase {
  std::string preset;
  int layers;
};

class ForwardReference : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    dir_ = testing::test_model(GetParam().preset, GetParam().layers, DType::F32);
  }
  std::string dir_;
};

// Every prompt length alone (full prefill), compared on a few rows including the last.
TEST_P(ForwardReference, SingleSequencePrefill) {
  ReferenceModel ref(dir_);
  RunnerOptions ro;
  ro.max_cache_tokens = 4096;
  ModelRunner runner(dir_, ro, global_pool());
  const int64_t V = runner.config().vocab_size;
  for (int64_t n : {1, 7, 64, 300}) {
    auto prompt = random_prompt(n, uint64_t(n));
    SequenceState seq;
    const auto& logits = runner.step({SequenceStep{&seq, prompt.data(), n, /*all=*/true}});
    std::vector<int64_t> rows{0, n / 3, n - 1};
    auto want = ref.logits(prompt, rows);
    std::vector<float> got;
    for (int64_t r : rows) got.insert(got.end(), logits.begin() + r * V, logits.begin() + (r + 1) * V);
    EXPECT_LE(max_diff(got.data(), want, int64_t(rows.size()), V), kTol) << "prompt length " << n;
    runner.release(seq);
  }
  EXPECT_EQ(runner.page_pool().num_free(), runner.page_pool().num_pages());
}

// The four lengths admitted together in one step (ragged batch), odd page size.
TEST_P(ForwardReference, MixedBatchInOneStep) {
  ReferenceModel ref(dir_);
  RunnerOptions ro;
  ro.page_size = 7;
  ro.max_cache_tokens = 4096;
  ModelRunner runner(dir_, ro, global_pool());
  const int64_t V = runner.config().vocab_size;
  std::vector<int64_t> lens{300, 1, 64, 7};
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SequenceState> seqs(lens.size());
  std::vector<SequenceStep> steps;
  for (size_t i = 0; i < lens.size(); ++i) prompts.push_back(random_prompt(lens[i], 100 + i));
  for (size_t i = 0; i < lens.size(); ++i)
    steps.push_back({&seqs[i], prompts[i].data(), lens[i], false});
  const auto& logits = runner.step(steps);
  ASSERT_EQ(logits.size(), lens.size() * size_t(V));
  for (size_t i = 0; i < lens.size(); ++i) {
    auto want = ref.logits(prompts[i], {lens[i] - 1});
    EXPECT_LE(max_diff(logits.data() + i * size_t(V), want, 1, V), kTol) << "sequence " << i;
  }
  for (auto& s : seqs) runner.release(s);
}

// Chunked prefill against cached context, then greedy decode steps: the logits of each
// decode step equal the reference's at that position of the full sequence.
TEST_P(ForwardReference, ChunkedPrefillThenDecode) {
  ReferenceModel ref(dir_);
  RunnerOptions ro;
  ro.page_size = 16;
  ro.max_cache_tokens = 1024;
  ModelRunner runner(dir_, ro, global_pool());
  const int64_t V = runner.config().vocab_size;
  auto tokens = random_prompt(300, 7);
  SequenceState seq;
  std::vector<float> step_logits;
  for (int64_t b = 0; b < 300; b += 50) {
    const auto& l = runner.step({SequenceStep{&seq, tokens.data() + b, 50, false}});
    if (b == 250) step_logits.assign(l.begin(), l.end());
  }
  std::vector<float> all = step_logits;
  const int decode_steps = 6;
  for (int s = 0; s < decode_steps; ++s) {
    int32_t next = argmax(step_logits.data(), V, global_pool());
    tokens.push_back(next);
    const auto& l = runner.step({SequenceStep{&seq, &tokens.back(), 1, false}});
    step_logits.assign(l.begin(), l.end());
    all.insert(all.end(), l.begin(), l.end());
  }
  std::vector<int64_t> rows;
  for (int64_t r = 299; r < 300 + decode_steps; ++r) rows.push_back(r);
  auto want = ref.logits(tokens, rows);
  EXPECT_LE(max_diff(all.data(), want, int64_t(rows.size()), V), kTol);
  runner.release(seq);
}

INSTANTIATE_TEST_SUITE_P(Models, ForwardReference,
                         ::testing::Values(ModelCase{"tiny", 4}, ModelCase{"qwen2.5-0.5b", 2}),
                         [](const auto& info) {
                           std::string n = info.param.preset;
                           for (char& c : n) if (!isalnum(c)) c = '_';
                           return n + "_L" + std::to_string(info.param.layers);
                         });

// The comparison itself: a NaN logit anywhere makes the max difference NaN (so every
// `EXPECT_LE(diff, tolerance)` fails), not just a NaN in the last element.
TEST(ReferenceCompare, ANaNAnywhereMakesTheMaxDiffNaN) {
  const int64_t rows = 3, V = 5;
  std::vector<double> ref(size_t(rows * V));
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = double(i % 7) - 3.0;  // spread: sd > 0.5
  for (size_t at : {size_t(0), size_t(7), ref.size() - 1}) {
    std::vector<float> engine(ref.begin(), ref.end());
    engine[at] = NAN;
    EXPECT_TRUE(std::isnan(testing::max_diff(engine.data(), ref, rows, V))) << "NaN at " << at;
  }
  std::vector<float> engine(ref.begin(), ref.end());
  engine[4] += 0.25f;
  EXPECT_DOUBLE_EQ(testing::max_diff(engine.data(), ref, rows, V), 0.25);
}

// Every kernel ISA this machine has gives the same answer (tiny model, mixed batch).
TEST(ForwardReferenceIsa, EveryIsaMatchesReference) {
  std::string dir = testing::test_model("tiny", 2, DType::F32);
  ReferenceModel ref(dir);
  auto prompt = random_prompt(77, 5);
  auto want = ref.logits(prompt, {76});
  Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    RunnerOptions ro;
    ro.max_cache_tokens = 256;
    ModelRunner runner(dir, ro, global_pool());
    SequenceState seq;
    const auto& l = runner.step({SequenceStep{&seq, prompt.data(), 77, false}});
    EXPECT_LE(max_diff(l.data(), want, 1, runner.config().vocab_size), kTol) << isa_name(isa);
    runner.release(seq);
  }
  set_active_isa(saved);
}

}  // namespace
}  // namespace cpinfer
