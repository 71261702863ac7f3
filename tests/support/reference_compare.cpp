#include "support/reference_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "kernels/sampling.h"
#include "support/nan_max.h"
#include "support/reference_model.h"

namespace cpinfer::testing {

std::vector<int32_t> random_prompt(int64_t n, uint64_t seed, int32_t max_id) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int32_t> d(0, max_id);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = d(g);
  return v;
}

double max_diff(const float* engine, const std::vector<double>& ref, int64_t rows, int64_t V) {
  double m = 0, sum = 0, sum2 = 0;
  for (int64_t i = 0; i < rows * V; ++i) {
    testing::keep_max(m, std::abs(double(engine[i]) - ref[size_t(i)]));
    sum += ref[size_t(i)];
    sum2 += ref[size_t(i)] * ref[size_t(i)];
  }
  double n = double(rows * V), sd = std::sqrt(sum2 / n - (sum / n) * (sum / n));
  EXPECT_GT(sd, 0.5) << "reference logits are nearly constant: the test would be weak";
  return m;
}

double prefill_vs_reference(const std::string& dir, int64_t n, const std::vector<int64_t>& rows,
                            uint64_t seed) {
  ReferenceModel ref(dir);
  RunnerOptions ro;
  ro.max_cache_tokens = n + 64;
  ModelRunner runner(dir, ro, global_pool());
  const int64_t V = runner.config().vocab_size;
  auto prompt = random_prompt(n, seed);
  SequenceState seq;
  const auto& logits = runner.step({SequenceStep{&seq, prompt.data(), n, /*all=*/true}});
  std::vector<float> got;
  for (int64_t r : rows)
    got.insert(got.end(), logits.begin() + r * V, logits.begin() + (r + 1) * V);
  runner.release(seq);
  return max_diff(got.data(), ref.logits(prompt, rows), int64_t(rows.size()), V);
}

double chunked_decode_vs_reference(const std::string& dir, int64_t n, int64_t chunk,
                                   int decode_steps, uint64_t seed) {
  ReferenceModel ref(dir);
  RunnerOptions ro;
  ro.page_size = 16;
  ro.max_cache_tokens = n + decode_steps + 64;
  ModelRunner runner(dir, ro, global_pool());
  const int64_t V = runner.config().vocab_size;
  auto tokens = random_prompt(n, seed);
  SequenceState seq;
  std::vector<float> last, all;
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t len = std::min(chunk, n - b);
    const auto& l = runner.step({SequenceStep{&seq, tokens.data() + b, len, false}});
    last.assign(l.begin(), l.end());
  }
  all = last;
  for (int s = 0; s < decode_steps; ++s) {
    tokens.push_back(argmax(last.data(), V, global_pool()));
    const auto& l = runner.step({SequenceStep{&seq, &tokens.back(), 1, false}});
    last.assign(l.begin(), l.end());
    all.insert(all.end(), l.begin(), l.end());
  }
  runner.release(seq);
  std::vector<int64_t> rows;
  for (int64_t r = n - 1; r < n + decode_steps; ++r) rows.push_back(r);
  return max_diff(all.data(), ref.logits(tokens, rows), int64_t(rows.size()), V);
}

}  // namespace cpinfer::testing
