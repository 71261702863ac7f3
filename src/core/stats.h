// Small statistics helpers for benchmarks.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace cpinfer {

// Median of the values (the mean of the middle two for an even count; 0 when empty).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Arithmetic mean (0 when empty).
inline double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

// The q-th percentile, q in [0, 100], interpolating linearly between the two nearest
// ranks like numpy.percentile's default: rank = q / 100 * (n - 1), so that for
// {1, 2, 3, 4} p50 = 2.5 and p90 = 3.7. 0 when empty.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(rank)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

}  // namespace cpinfer
