#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace cpinfer {

TokenLogprob token_logprobs(const float* logits, int64_t V, int32_t chosen, int64_t top_n) {
  float mx = logits[0];
  for (int64_t i = 1; i < V; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += std::exp(double(logits[i]) - mx);
  const double log_z = double(mx) + std::log(sum);
  TokenLogprob out;
  out.token = chosen;
  out.logprob = float(double(logits[chosen]) - log_z);
  const int64_t n = std::min<int64_t>(std::max<int64_t>(top_n, 0), V);
  if (n == 0) return out;
  std::vector<int32_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), more_likely);
  for (int64_t i = 0; i < n; ++i)
    out.top.emplace_back(ids[size_t(i)], float(double(logits[ids[size_t(i)]]) - log_z));
  return out;
}

}  // namespace cpinfer
