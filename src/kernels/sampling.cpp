#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/phase_profile.h"

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
  CPI_CHECK(std::isfinite(p.min_p) && p.min_p >= 0.f && p.min_p <= 1.f,
            "min_p {} is invalid: it must be in [0, 1]", p.min_p);
  CPI_CHECK(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.f,
            "repetition_penalty {} is invalid: it must be > 0 (1: off)", p.repetition_penalty);
  CPI_CHECK(std::isfinite(p.presence_penalty) && std::fabs(p.presence_penalty) <= 2.f,
            "presence_penalty {} is invalid: it must be in [-2, 2]", p.presence_penalty);
  CPI_CHECK(std::isfinite(p.frequency_penalty) && std::fabs(p.frequency_penalty) <= 2.f,
            "frequency_penalty {} is invalid: it must be in [-2, 2]", p.frequency_penalty);
  for (const auto& [id, bias] : p.logit_bias)
    CPI_CHECK(std::isfinite(bias) && std::fabs(bias) <= 100.f,
              "logit_bias {} for token id {} is invalid: it must be in [-100, 100]", bias, id);
}

namespace {
// Index of the first largest value of x[b, e) (ties: the lowest index; a NaN never wins
// unless it is x[b], as in the plain loop `if (x[i] > x[best]) best = i`). kLanes
// independent running maxima (lane j sees b + j, b + j + kLanes, ...) so the compiler can
// keep them in one vector register and the loop has no dependency from one element to the
// next; the lanes are then merged by value, ties to the lower index. Example, kLanes 4,
// x = [1 5 2 5 | 0 5 9 9]: lanes hold (1@0, 5@5, 9@6, 5@3) -> 9@6.
int64_t argmax_range(const float* x, int64_t b, int64_t e) {
  // Lane l of vector v: the first largest of x[b + 4 v + l + 16 k], k = 0, 1, ..., as (value,
  // offset from b); offset -1 while the lane saw nothing above -inf (a NaN never enters).
  // GCC/Clang vector types: SSE2 on baseline x86-64, whatever the target has elsewhere.
  typedef float F4 __attribute__((vector_size(16)));
  typedef int32_t I4 __attribute__((vector_size(16)));
  constexpr int kVecs = 4, kLanes = 4 * kVecs;
  int64_t best = b;
  if (e - b >= 2 * kLanes && !std::isnan(x[b])) {
    F4 m[kVecs];
    I4 at[kVecs], off[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      m[v] = F4{} - INFINITY;
      at[v] = I4{} - 1;
      off[v] = I4{0, 1, 2, 3} + 4 * v;
    }
    const int64_t n = (e - b) / kLanes * kLanes;  // a thread's chunk is far below 2^31
    for (int64_t i = 0; i < n; i += kLanes)
      for (int v = 0; v < kVecs; ++v) {
        F4 xv;
        std::memcpy(&xv, x + b + i + 4 * v, sizeof xv);
        const I4 gt = xv > m[v];  // all ones where greater
        m[v] = gt ? xv : m[v];
        at[v] = gt ? off[v] : at[v];
        off[v] += kLanes;
      }
    for (int v = 0; v < kVecs; ++v)
      for (int l = 0; l < 4; ++l) {
        if (at[v][l] < 0) continue;
        const int64_t c = b + at[v][l];
        if (x[c] > x[best] || (x[c] == x[best] && c < best)) best = c;
      }
    for (int64_t i = b + n; i < e; ++i)
      if (x[i] > x[best]) best = i;
    return best;
  }
  for (int64_t i = b + 1; i < e; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}
}  // namespace

int32_t argmax(const float* logits, int64_t V, ThreadPool& pool) {
  PhaseScope ps(Phase::Sampling, pool);
  return argmax_untimed(logits, V, pool);
}

int32_t argmax_untimed(const float* logits, int64_t V, ThreadPool& pool) {
  CPI_ASSERT(V > 0);
  const int nt = pool.size();
  // One slot per thread, kept between calls: no heap allocation once warm (the LM head's
  // argmax-only steps run inside a step that allocates nothing).
  // The pool's threads write the caller's slots: `best` names the caller's vector here, a
  // thread_local named inside the lambda would be each worker's own.
  thread_local std::vector<int64_t> slots;
  std::vector<int64_t>& best = slots;
  best.assign(size_t(nt), -1);
  // One contiguous chunk per thread; ties go to the lowest index (chunks are ordered).
  int64_t step = (V + nt - 1) / nt;
  pool.run(nt, [&](int64_t t, int) {
    int64_t b = t * step, e = std::min(V, b + step);
    if (b >= e) return;
    best[size_t(t)] = argmax_range(logits, b, e);
  });
  int64_t bi = -1;
  for (int64_t c : best)
    if (c >= 0 && (bi < 0 || logits[c] > logits[bi])) bi = c;
  return int32_t(bi);
}

void merge_argmax_parts(const std::vector<const int32_t*>& parts, int64_t R, int32_t* ids) {
  for (int64_t r = 0; r < R; ++r) {
    int32_t best = -1;
    float best_value = 0.f;
    for (const int32_t* part : parts) {
      const int32_t id = part[2 * r + 1];
      if (id < 0) continue;
      float v;
      std::memcpy(&v, &part[2 * r], sizeof v);
      if (best < 0 || v > best_value) best = id, best_value = v;
    }
    CPI_CHECK(best >= 0, "merge_argmax_parts: row {} has no candidate (every part is empty)", r);
    ids[r] = best;
  }
}

namespace {

// Sampling works on fixed chunks of the vocabulary (not one per thread), combined in
// chunk order, so the token drawn for a seed does not depend on the pool's size.
constexpr int64_t kChunk = 8192;

// Candidates (token ids) in sampling order: descending logit, ties to the lower id.
struct ByLogit {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

// The top k ids of [0, V) in sampling order: each chunk keeps its own top k (in parallel),
// then the survivors (at most k per chunk) are narrowed to k and sorted.
std::vector<int32_t> top_k_ids(const float* logits, int64_t V, int64_t k, ThreadPool& pool) {
  const int64_t chunks = (V + kChunk - 1) / kChunk;
  std::vector<std::vector<int32_t>> keep(static_cast<size_t>(chunks));
  const ByLogit by{logits};
  pool.run(chunks, [&](int64_t c, int) {
    const int64_t b = c * kChunk, e = std::min(V, b + kChunk);
    std::vector<int32_t>& ids = keep[size_t(c)];
    // A heap of the best k so far, its worst on top: most ids lose one comparison against
    // it (what partial_sort_copy does; `by` is a strict total order, so the result is the
    // same whatever the algorithm).
    const size_t kk = size_t(std::min(k, e - b));
    ids.clear();
    ids.reserve(kk);
    for (int32_t i = int32_t(b); i < int32_t(e); ++i) {
      if (ids.size() < kk) {
        ids.push_back(i);
        std::push_heap(ids.begin(), ids.end(), by);
      } else if (by(i, ids.front())) {
        std::pop_heap(ids.begin(), ids.end(), by);
        ids.back() = i;
        std::push_heap(ids.begin(), ids.end(), by);
      }
    }
    std::sort_heap(ids.begin(), ids.end(), by);
  });
  std::vector<int32_t> all;
  for (const auto& ids : keep) all.insert(all.end(), ids.begin(), ids.end());
  if (int64_t(all.size()) > k) {
    std::nth_element(all.begin(), all.begin() + k, all.end(), by);
    all.resize(size_t(k));
  }
  std::sort(all.begin(), all.end(), by);
  return all;
}

}  // namespace

int32_t sample_token(const float* logits, int64_t V, const SamplingParams& p, Rng& rng,
                     ThreadPool& pool) {
  validate_sampling(p);
  if (p.temperature == 0.f || p.top_k == 1) return argmax(logits, V, pool);
  PhaseScope ps(Phase::Sampling, pool);
  const double inv_t = 1.0 / double(p.temperature);
  const double u = rng.uniform();
  const int64_t k = (p.top_k > 0 && p.top_k < V) ? p.top_k : V;
  const int64_t chunks = (V + kChunk - 1) / kChunk;

  if (k < V) {
    // Top-k: sort only the k candidates; softmax and nucleus over them.
    const std::vector<int32_t> idx = top_k_ids(logits, V, k, pool);
    const double mx = logits[idx[0]];
    std::vector<double> prob(idx.size());
    double total = 0;
    size_t m = idx.size();  // min-p: prob (1 for the first) is falling; keep those >= min_p
    for (size_t i = 0; i < idx.size(); ++i) {
      prob[i] = std::exp((double(logits[idx[i]]) - mx) * inv_t);
      if (prob[i] < double(p.min_p)) {
        m = i;
        break;
      }
      total += prob[i];
    }
    size_t n = m;
    if (p.top_p < 1.f) {
      double cum = 0;
      const double want = double(p.top_p) * total;
      for (size_t i = 0; i < m; ++i) {
        cum += prob[i];
        if (cum >= want) { n = i + 1; break; }
      }
    }
    double kept = 0;
    for (size_t i = 0; i < n; ++i) kept += prob[i];
    double cum = 0;
    const double target = u * kept;
    for (size_t i = 0; i < n; ++i) {
      cum += prob[i];
      if (target < cum) return idx[i];
    }
    return idx[n - 1];
  }

  // The whole vocabulary: weights w = exp((logit - max) / T), chunk sums in parallel. The
  // largest weight is 1, so min-p drops (w = 0) the ids with w < min_p.
  std::vector<float> cmax(static_cast<size_t>(chunks));
  pool.run(chunks, [&](int64_t c, int) {
    const int64_t b = c * kChunk, e = std::min(V, b + kChunk);
    float m = logits[b];
    for (int64_t i = b + 1; i < e; ++i) m = std::max(m, logits[i]);
    cmax[size_t(c)] = m;
  });
  const double mx = *std::max_element(cmax.begin(), cmax.end());
  // Reused between calls. Lambdas below use `w` (a plain pointer): a thread_local named in
  // a lambda would be the running worker's own, empty instance.
  thread_local std::vector<double> w_buf;
  w_buf.resize(size_t(V));
  double* const w = w_buf.data();
  std::vector<double> csum(static_cast<size_t>(chunks));
  const double min_p = p.min_p;
  pool.run(chunks, [&](int64_t c, int) {
    const int64_t b = c * kChunk, e = std::min(V, b + kChunk);
    double s = 0;
    for (int64_t i = b; i < e; ++i) {
      const double wi = std::exp((double(logits[i]) - mx) * inv_t);
      s += w[size_t(i)] = wi < min_p ? 0.0 : wi;
    }
    csum[size_t(c)] = s;
  });
  double total = 0;
  for (double x : csum) total += x;

  if (p.top_p >= 1.f) {
    // Plain temperature: the inverse CDF in id order (no sort): find the chunk, then the id.
    const double target = u * total;
    double cum = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      if (target >= cum + csum[size_t(c)] && c + 1 < chunks) {
        cum += csum[size_t(c)];
        continue;
      }
      const int64_t b = c * kChunk, e = std::min(V, b + kChunk);
      for (int64_t i = b; i < e; ++i) {
        cum += w[size_t(i)];
        if (target < cum) return int32_t(i);
      }
      // Rounding left target at the very end: the last id with weight.
      for (int64_t i = e - 1; i >= b; --i)
        if (w[size_t(i)] > 0) return int32_t(i);
    }
    return argmax(logits, V, pool);
  }

  // Nucleus: the smallest prefix (in sampling order) whose weight reaches top_p * total.
  // Ids with w >= thr are a prefix of that order (w grows with the logit), so once their
  // weight reaches the target the nucleus lies inside them: only those are sorted. thr
  // starts at max / 2^8 and drops by 2^8 until that holds (at worst: every id).
  const double want = double(p.top_p) * total;
  std::vector<int32_t> idx;
  for (double thr = std::ldexp(1.0, -8);; thr = std::ldexp(thr, -8)) {
    const bool all = thr < 1e-300;
    std::vector<std::vector<int32_t>> part(static_cast<size_t>(chunks));
    std::vector<double> pmass(static_cast<size_t>(chunks));
    pool.run(chunks, [&](int64_t c, int) {
      const int64_t b = c * kChunk, e = std::min(V, b + kChunk);
      double m = 0;
      for (int64_t i = b; i < e; ++i)
        if (all || w[size_t(i)] >= thr) {
          part[size_t(c)].push_back(int32_t(i));
          m += w[size_t(i)];
        }
      pmass[size_t(c)] = m;
    });
    double mass = 0;
    for (double x : pmass) mass += x;
    if (mass >= want || all) {
      for (const auto& ids : part) idx.insert(idx.end(), ids.begin(), ids.end());
      break;
    }
  }
  {
    // Sorted as (logit, id) pairs side by side: no indirect loads in the comparisons.
    std::vector<std::pair<float, int32_t>> pairs(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) pairs[i] = {logits[idx[i]], idx[i]};
    std::sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = pairs[i].second;
  }
  size_t n = idx.size();
  double cum = 0;
  for (size_t i = 0; i < idx.size(); ++i) {
    cum += w[size_t(idx[i])];
    if (cum >= want) { n = i + 1; break; }
  }
  double kept = 0;
  for (size_t i = 0; i < n; ++i) kept += w[size_t(idx[i])];
  const double target = u * kept;
  cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += w[size_t(idx[i])];
    if (target < cum) return idx[i];
  }
  return idx[n - 1];
}

}  // namespace cpinfer
