// AVX2 + FMA + F16C elementwise row kernels: double-accumulated sums of squares, the norm
// scale with bf16/f16 weights widened in registers, SiLU with a vectorised exp, and RoPE.
#include <immintrin.h>

#include <cstring>

#include "kernels/elementwise_impl.h"
#include "kernels/elementwise_loops.h"

namespace cpinfer::elementwise_impl {

namespace {

inline __m256i tail_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline void add_squares(__m256 v, __m256d& lo, __m256d& hi) {
  const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
  const __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  lo = _mm256_fmadd_pd(a, a, lo);
  hi = _mm256_fmadd_pd(b, b, hi);
}

inline double hsum(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

double sum_squares(const float* x, int64_t d) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  __m256d a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    add_squares(_mm256_loadu_ps(x + i), a0, a1);
    add_squares(_mm256_loadu_ps(x + i + 8), a2, a3);
  }
  for (; i < d; i += 8)
    add_squares(_mm256_maskload_ps(x + i, tail_mask(std::min<int64_t>(8, d - i))), a0, a1);
  return hsum(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
}

double add_sum_squares(float* r, const float* x, int64_t d) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  for (int64_t i = 0; i < d; i += 8) {
    const __m256i m = tail_mask(std::min<int64_t>(8, d - i));
    const __m256 v = _mm256_add_ps(_mm256_maskload_ps(r + i, m), _mm256_maskload_ps(x + i, m));
    _mm256_maskstore_ps(r + i, m, v);
    add_squares(v, a0, a1);
  }
  return hsum(_mm256_add_pd(a0, a1));
}

// w[i : i + n] (n <= 8) widened to f32, zeros past n.
template <DType DT>
inline __m256 load_w(const void* w, int64_t i, int64_t n) {
  if constexpr (DT == DType::F32) {
    return _mm256_maskload_ps(static_cast<const float*>(w) + i, tail_mask(n));
  } else {
    const auto* p = static_cast<const uint16_t*>(w) + i;
    __m128i h;
    if (n == 8) {
      h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    } else {
      alignas(16) uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      std::memcpy(tmp, p, size_t(n) * sizeof(uint16_t));
      h = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
    }
    if constexpr (DT == DType::BF16)
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else
      return _mm256_cvtph_ps(h);
  }
}

template <DType DT>
void scale_mul_t(const float* x, float s, const void* w, int64_t d, float* y) {
  const __m256 sv = _mm256_set1_ps(s);
  for (int64_t i = 0; i < d; i += 8) {
    const int64_t n = std::min<int64_t>(8, d - i);
    const __m256i m = tail_mask(n);
    const __m256 v = _mm256_mul_ps(_mm256_maskload_ps(x + i, m), sv);
    _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(v, load_w<DT>(w, i, n)));
  }
}

void scale_mul(const float* x, float s, const void* w, DType w_dtype, int64_t d, float* y) {
  switch (w_dtype) {
    case DType::BF16: return scale_mul_t<DType::BF16>(x, s, w, d, y);
    case DType::F16: return scale_mul_t<DType::F16>(x, s, w, d, y);
    default: return scale_mul_t<DType::F32>(x, s, w, d, y);
  }
}

// exp(x) for x <= 88 (Cephes expf, about 1 ulp); 0 below ln(FLT_MIN) = -87.34, where the
// true value is subnormal (and 2^n below could not be built from exponent bits).
inline __m256 exp_ps(__m256 x) {
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 e = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i pow2 =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(tiny, _mm256_mul_ps(e, _mm256_castsi256_ps(pow2)));
}

// silu(g) = g * sigmoid(g) with t = exp(-|g|) in (0, 1], so nothing overflows:
// sigmoid(g) = 1 / (1 + t) for g >= 0 and t / (1 + t) for g < 0.
void silu_mul(const float* g, const float* u, int64_t F, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < F; i += 8) {
    const __m256i m = tail_mask(std::min<int64_t>(8, F - i));
    const __m256 gv = _mm256_maskload_ps(g + i, m);
    const __m256 t = exp_ps(_mm256_or_ps(gv, sign));  // -|g|
    const __m256 neg = _mm256_cmp_ps(gv, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 num = _mm256_blendv_ps(one, t, neg);
    const __m256 s = _mm256_div_ps(_mm256_mul_ps(gv, num), _mm256_add_ps(one, t));
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(s, _mm256_maskload_ps(u + i, m)));
  }
}

void rope(float* x, int64_t heads, int64_t head_dim, const float* cos, const float* sin) {
  rope_plain(x, heads, head_dim, cos, sin);
}

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels k{sum_squares, add_sum_squares, scale_mul, silu_mul, rope};
  return k;
}

}  // namespace cpinfer::elementwise_impl
