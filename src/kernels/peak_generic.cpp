// Baseline x86-64 peak loops (SSE2: no FMA, so a "FMA" here is a multiply and an add, the
// best this build can do), written as plain loops over lanes for the compiler to vectorise.
#include <cstring>

#include "kernels/peak_impl.h"

namespace cpinfer::peak_impl::generic {

double fma_loop(int64_t iters, float* sink) {
  constexpr int kLanes = 32;  // 8 SSE registers of 4 chains each
  float acc[kLanes];
  for (int i = 0; i < kLanes; ++i) acc[i] = 1.f + 1e-3f * float(i);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < kLanes; ++i) acc[i] = acc[i] * 0.999f + 1e-3f;
  }
  float s = 0;
  for (float x : acc) s += x;
  *sink += s;
  return double(iters) * kLanes * 2;
}

float read_sum(const uint8_t* p, int64_t n) {
  uint32_t acc[16] = {};
  for (int64_t i = 0; i < n; i += 64) {
    uint32_t w[16];
    std::memcpy(w, p + i, 64);
    for (int j = 0; j < 16; ++j) acc[j] += w[j];
  }
  uint64_t s = 0;
  for (uint32_t x : acc) s += x;
  return float(s);
}

}  // namespace cpinfer::peak_impl::generic
