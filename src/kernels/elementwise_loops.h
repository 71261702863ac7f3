// Internal: plain loops shared by the elementwise_{generic,avx2,avx512}.cpp files, each of
// which compiles (and auto-vectorises) them with its own ISA flags. Internal linkage, so
// no file's copy can stand in for another's.
#pragma once
#include <cstdint>

namespace cpinfer::elementwise_impl {
namespace {

// Rotate-half RoPE on one token: x[heads, head_dim] (contiguous heads), cos/sin[head_dim/2].
//   x1 = x[h, :half], x2 = x[h, half:]; x[h] = [x1*cos - x2*sin, x2*cos + x1*sin]
inline void rope_plain(float* x, int64_t heads, int64_t head_dim, const float* cos,
                       const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* __restrict a = x + h * head_dim;
    float* __restrict b = a + half;
    for (int64_t j = 0; j < half; ++j) {
      const float x1 = a[j], x2 = b[j];
      a[j] = x1 * cos[j] - x2 * sin[j];
      b[j] = x2 * cos[j] + x1 * sin[j];
    }
  }
}

}  // namespace
}  // namespace cpinfer::elementwise_impl
