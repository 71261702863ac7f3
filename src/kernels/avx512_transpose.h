// Internal: an in-register 16 x 16 transpose of 32-bit elements, shared by the AVX-512
// linear kernels (f32 panels and bf16-pair panels alike: the shuffles move 32-bit lanes
// whatever they hold). Include only from files compiled with AVX-512 flags.
#pragma once
#include <immintrin.h>

namespace cpinfer::linear_impl {
namespace {

// In-place transpose of a 16 x 16 f32 block: r[i][j] -> r[j][i].
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // Per 128-bit lane L: r[4g + c] holds column 4L + c of rows 4g .. 4g+3.
  for (int g = 0; g < 4; ++g) {
    r[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
    r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
  }
  for (int c = 0; c < 4; ++c) {
    __m512 a = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
    __m512 b = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
    __m512 d = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
    __m512 e = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
    t[c] = _mm512_shuffle_f32x4(a, d, 0x88);
    t[8 + c] = _mm512_shuffle_f32x4(a, d, 0xdd);
    t[4 + c] = _mm512_shuffle_f32x4(b, e, 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(b, e, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

}  // namespace
}  // namespace cpinfer::linear_impl
