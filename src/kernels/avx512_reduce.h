// Internal: horizontal sums of AVX-512 accumulators, shared by the skinny kernels of
// linear_avx512.cpp (f32 FMAs) and linear_bf16dot_avx512.cpp (bf16 dot products). Include
// only from files compiled with AVX-512 flags.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace cpinfer::linear_impl {
namespace {

// Sums of four vectors: out[0..3] = sum(a), sum(b), sum(c), sum(d).
inline void hsum4(__m512 a, __m512 b, __m512 c, __m512 d, float out[4]) {
  // 128-bit lanes: [a0 a1 b0 b1] + [a2 a3 b2 b3] -> lane L holds partial sums of a (L < 2) or b.
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xee));
  // Lanes [ab0 ab2 cd0 cd2] + [ab1 ab3 cd1 cd3]: lane 0 = a's 4 partials, 1 = b's, 2 = c's, 3 = d's.
  __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xdd));
  // Within each lane: [s0+s2, s1+s3, ..] then + its neighbour: element 0 of each lane = total.
  s = _mm512_add_ps(s, _mm512_permute_ps(s, 0x4e));
  s = _mm512_add_ps(s, _mm512_permute_ps(s, 0xb1));
  alignas(64) float t[16];
  _mm512_store_ps(t, s);
  out[0] = t[0];
  out[1] = t[4];
  out[2] = t[8];
  out[3] = t[12];
}

// The outputs of a skinny tile of MM x rows by 4 W rows: y[m * ldy + j] = bias[j] +
// sum(acc[m][j]) for m < MM, j < nv (the W rows past nv are not stored).
template <int MM>
inline void store_tile_sums(const __m512 (&acc)[MM][4], const float bias[4], float* y,
                            int64_t ldy, int nv) {
#pragma GCC unroll 6
  for (int m = 0; m < MM; ++m) {
    float s[4];
    hsum4(acc[m][0], acc[m][1], acc[m][2], acc[m][3], s);
    for (int j = 0; j < nv; ++j) y[m * ldy + j] = bias[j] + s[j];
  }
}

}  // namespace
}  // namespace cpinfer::linear_impl
