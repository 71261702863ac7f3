// AVX-512 elementwise row kernels: double-accumulated sums of squares, the norm scale with
// bf16/f16 weights widened in registers, SiLU with a vectorised exp, and RoPE.
// GCC 12's AVX-512 intrinsics (the _mm512_undefined_* idiom) trip -W(maybe-)uninitialized
// once inlined; the warnings point into the system header and are false positives.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/elementwise_impl.h"
#include "kernels/elementwise_loops.h"

namespace cpinfer::elementwise_impl {

namespace {

inline __mmask16 tail_mask(int64_t n) { return __mmask16((1u << n) - 1u); }

// acc += v^2 for the 16 lanes of v, in two f64 accumulators.
inline void add_squares(__m512 v, __m512d& lo, __m512d& hi) {
  const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  const __m512d b = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
  lo = _mm512_fmadd_pd(a, a, lo);
  hi = _mm512_fmadd_pd(b, b, hi);
}

double sum_squares(const float* x, int64_t d) {
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
  __m512d a2 = _mm512_setzero_pd(), a3 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 32 <= d; i += 32) {
    add_squares(_mm512_loadu_ps(x + i), a0, a1);
    add_squares(_mm512_loadu_ps(x + i + 16), a2, a3);
  }
  for (; i < d; i += 16) add_squares(_mm512_maskz_loadu_ps(tail_mask(std::min<int64_t>(16, d - i)),
                                                           x + i), a0, a1);
  return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
}

double add_sum_squares(float* r, const float* x, int64_t d) {
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    const __m512 v = _mm512_add_ps(_mm512_loadu_ps(r + i), _mm512_loadu_ps(x + i));
    _mm512_storeu_ps(r + i, v);
    add_squares(v, a0, a1);
  }
  if (i < d) {
    const __mmask16 m = tail_mask(d - i);
    const __m512 v =
        _mm512_add_ps(_mm512_maskz_loadu_ps(m, r + i), _mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(r + i, m, v);
    add_squares(v, a0, a1);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}

template <DType DT>
inline __m512 load_w(const void* w, int64_t i, __mmask16 m) {
  if constexpr (DT == DType::F32) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(w) + i);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(w) + i);
    if constexpr (DT == DType::BF16)
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else
      return _mm512_cvtph_ps(h);
  }
}

template <DType DT>
void scale_mul_t(const float* x, float s, const void* w, int64_t d, float* y) {
  const __m512 sv = _mm512_set1_ps(s);
  for (int64_t i = 0; i < d; i += 16) {
    const __mmask16 m = i + 16 <= d ? __mmask16(0xffff) : tail_mask(d - i);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sv);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, load_w<DT>(w, i, m)));
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
// true value is subnormal.
inline __m512 exp_ps(__m512 x) {
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654f), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33654f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_mov_ps(__mmask16(~tiny), _mm512_scalef_ps(e, n));
}

// silu(g) = g * sigmoid(g) with t = exp(-|g|) in (0, 1], so nothing overflows:
// sigmoid(g) = 1 / (1 + t) for g >= 0 and t / (1 + t) for g < 0.
void silu_mul(const float* g, const float* u, int64_t F, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < F; i += 16) {
    const __mmask16 m = i + 16 <= F ? __mmask16(0xffff) : tail_mask(F - i);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 t = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(gv)));
    const __mmask16 neg = _mm512_cmp_ps_mask(gv, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 num = _mm512_mask_blend_ps(neg, one, t);
    const __m512 s = _mm512_div_ps(_mm512_mul_ps(gv, num), _mm512_add_ps(one, t));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
  }
}

void rope(float* x, int64_t heads, int64_t head_dim, const float* cos, const float* sin) {
  rope_plain(x, heads, head_dim, cos, sin);
}

}  // namespace

const Kernels& avx512_kernels() {
  static const Kernels k{sum_squares, add_sum_squares, scale_mul, silu_mul, rope};
  return k;
}

}  // namespace cpinfer::elementwise_impl
