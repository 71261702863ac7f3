// Internal: an in-register 8 x 8 transpose of 32-bit elements, shared by the AVX2 linear
// kernels (weight panels) and the AVX2 prefill attention kernel (V tiles). Include only from
// files compiled with AVX2 flags.
#pragma once
#include <immintrin.h>

namespace cpinfer::avx2_util {

// In-place transpose of an 8 x 8 f32 block: r[i][j] -> r[j][i].
inline void transpose8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 2; ++g) {
    s[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    s[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
    s[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    s[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
  }
}

}  // namespace cpinfer::avx2_util
