// AVX-512 peak loops: 16 zmm FMA chains (latency 4 x up to 2 per cycle needs >= 8), and a
// streaming read with four zmm loads per 256 bytes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/peak_impl.h"

namespace cpinfer::peak_impl::avx512 {

double fma_loop(int64_t iters, float* sink) {
  constexpr int kChains = 16;
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1.f + 1e-3f * float(i));
  // acc = acc * a + b with a < 1 converges to b / (1 - a): no overflow, no denormals.
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  *sink += _mm512_reduce_add_ps(s);
  return double(iters) * kChains * 16 * 2;
}

float read_sum(const uint8_t* p, int64_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < n; i += 256) {
    a0 = _mm512_add_epi32(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi32(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi32(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi32(a3, _mm512_load_si512(p + i + 192));
  }
  __m512i s = _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
  return float(_mm512_reduce_add_epi32(s));
}

}  // namespace cpinfer::peak_impl::avx512
