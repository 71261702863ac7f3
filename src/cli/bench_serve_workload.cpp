#include "cli/bench_serve_workload.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"
#include "kernels/sampling.h"

namespace cpinfer {

namespace {

// (0, 1]: safe to take the log of.
double open_uniform(Rng& rng) { return 1.0 - rng.uniform(); }

double standard_normal(Rng& rng) {  // Box-Muller
  return std::sqrt(-2.0 * std::log(open_uniform(rng))) *
         std::cos(2.0 * std::numbers::pi * rng.uniform());
}

// Gamma(shape, scale = 1) by Marsaglia and Tsang (2000); shape < 1 through
// Gamma(shape + 1) * U^(1 / shape).
double standard_gamma(Rng& rng, double shape) {
  if (shape < 1.0)
    return standard_gamma(rng, shape + 1.0) * std::pow(open_uniform(rng), 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = standard_normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = open_uniform(rng);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

// Prompt token ids: uniform in [lo, hi), see kPromptTokenLo.
class PromptIds {
 public:
  PromptIds(int64_t vocab_size, uint64_t seed) : rng_(seed) {
    CPI_CHECK(vocab_size >= 0, "--vocab-size {} must be positive (0: a large vocabulary)",
              vocab_size);
    if (vocab_size > 0 && vocab_size < hi_) {
      hi_ = vocab_size;
      if (vocab_size <= 2 * kPromptTokenLo) lo_ = 0;
    }
  }
  void append(std::vector<int32_t>& p, int64_t len) {
    for (int64_t k = 0; k < len; ++k)
      p.push_back(int32_t(lo_ + int64_t(rng_.next() % uint64_t(hi_ - lo_))));
  }

 private:
  Rng rng_;
  int64_t lo_ = kPromptTokenLo, hi_ = kPromptTokenHi;
};

}  // namespace

std::vector<std::vector<int32_t>> random_prompts(int64_t count, int64_t len, int64_t vocab_size,
                                                 uint64_t seed) {
  CPI_CHECK(count >= 0 && len >= 1, "random prompts: count {} and length {} must be >= 0 and >= 1",
            count, len);
  PromptIds ids(vocab_size, seed);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(count));
  for (auto& p : prompts) {
    p.reserve(static_cast<size_t>(len));
    ids.append(p, len);
  }
  return prompts;
}

std::vector<std::vector<int32_t>> prefix_repetition_prompts(int64_t count,
                                                            const PrefixRepetition& cfg,
                                                            int64_t vocab_size, uint64_t seed) {
  CPI_CHECK(count >= 0, "prefix-repetition prompts: count {} must be >= 0", count);
  CPI_CHECK(cfg.num_prefixes >= 1, "--prefix-repetition-num-prefixes {} must be at least 1",
            cfg.num_prefixes);
  CPI_CHECK(cfg.prefix_len >= 0, "--prefix-repetition-prefix-len {} must be at least 0",
            cfg.prefix_len);
  CPI_CHECK(cfg.suffix_len >= 1, "--prefix-repetition-suffix-len {} must be at least 1",
            cfg.suffix_len);
  // Its own stream (see the header); the prefixes first, then the suffixes in request
  // order, so that a longer run sends the same first requests as a shorter one.
  PromptIds ids(vocab_size, seed ^ 0x5851f42d4c957f2dull);
  std::vector<std::vector<int32_t>> prefixes(static_cast<size_t>(cfg.num_prefixes));
  for (auto& p : prefixes) ids.append(p, cfg.prefix_len);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(count));
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto& p = prompts[i];
    const auto& prefix = prefixes[i % prefixes.size()];
    p.reserve(static_cast<size_t>(cfg.prefix_len + cfg.suffix_len));
    p.insert(p.end(), prefix.begin(), prefix.end());
    ids.append(p, cfg.suffix_len);
  }
  return prompts;
}

std::vector<double> arrival_times(int64_t count, double rate, double burstiness, uint64_t seed) {
  CPI_CHECK(rate > 0, "--request-rate {} must be positive (inf: all at once)", rate);
  CPI_CHECK(burstiness > 0 && std::isfinite(burstiness), "--burstiness {} must be positive",
            burstiness);
  std::vector<double> t(static_cast<size_t>(std::max<int64_t>(count, 0)), 0.0);
  if (std::isinf(rate)) return t;
  // Its own stream, so that changing the rate leaves the prompts alone and vice versa.
  Rng rng(seed ^ 0x9e3779b97f4a7c15ull);
  const double scale = 1.0 / (rate * burstiness);  // mean gap = shape * scale = 1 / rate
  for (size_t i = 1; i < t.size(); ++i) t[i] = t[i - 1] + scale * standard_gamma(rng, burstiness);
  return t;
}

}  // namespace cpinfer
