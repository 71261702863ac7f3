#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace cpinfer {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  uint64_t result = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

void validate_sampling(const SamplingParams& p) {
  CPI_CHECK(std::isfinite(p.temperature) && p.temperature >= 0.f,
            "temperature {} is invalid: it must be >= 0", p.temperature);
  CPI_CHECK(std::isfinite(p.top_p) && p.top_p > 0.f && p.top_p <= 1.f,
            "top_p {} is invalid: it must be in (0, 1]", p.top_p);
}

int32_t argmax(const float* logits, int64_t V, ThreadPool& pool) {
  CPI_ASSERT(V > 0);
  const int nt = pool.size();
  std::vector<int64_t> best(size_t(nt), -1);
  // One contiguous chunk per thread; ties go to the lowest index (chunks are ordered).
  int64_t step = (V + nt - 1) / nt;
  pool.run(nt, [&](int64_t t, int) {
    int64_t b = t * step, e = std::min(V, b + step);
    if (b >= e) return;
    int64_t bi = b;
    for (int64_t i = b + 1; i < e; ++i)
      if (logits[i] > logits[bi]) bi = i;
    best[size_t(t)] = bi;
  });
  int64_t bi = -1;
  for (int64_t c : best)
    if (c >= 0 && (bi < 0 || logits[c] > logits[bi])) bi = c;
  return int32_t(bi);
}

int32_t sample_token(const float* logits, int64_t V, const SamplingParams& p, Rng& rng,
                     ThreadPool& pool) {
  validate_sampling(p);
  if (p.temperature == 0.f || p.top_k == 1) return argmax(logits, V, pool);
  // Candidates ordered by logit, descending; restricted to the top k when asked.
  std::vector<int32_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  int64_t k = (p.top_k > 0 && p.top_k < V) ? p.top_k : V;
  if (k < V) {
    std::nth_element(idx.begin(), idx.begin() + k, idx.end(), by_logit);
    idx.resize(size_t(k));
  }
  std::sort(idx.begin(), idx.end(), by_logit);
  // Softmax of logits / T over the candidates (shifted by the max for stability).
  const double inv_t = 1.0 / double(p.temperature), mx = logits[idx[0]];
  std::vector<double> prob(idx.size());
  double total = 0;
  for (size_t i = 0; i < idx.size(); ++i) total += prob[i] = std::exp((logits[idx[i]] - mx) * inv_t);
  // Nucleus: the smallest prefix whose probability reaches top_p (at least one token).
  size_t n = idx.size();
  if (p.top_p < 1.f) {
    double cum = 0, want = double(p.top_p) * total;
    for (size_t i = 0; i < idx.size(); ++i) {
      cum += prob[i];
      if (cum >= want) { n = i + 1; break; }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < n; ++i) kept += prob[i];
  double u = rng.uniform() * kept, cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += prob[i];
    if (u < cum) return idx[i];
  }
  return idx[n - 1];
}

}  // namespace cpinfer
