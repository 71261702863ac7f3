// AVX-512 forms of q8_act_rows and q8_act_fake_rows (kernels/quantize.h): one 32-element
// block as two zmm vectors. Bit for bit the scalar forms in quantize.cpp: the block maximum
// is exact in any order, d = amax / 127 and id = 1 / d are the same IEEE operations, x * id
// is one IEEE multiply and vcvtps2dq rounds it as nearbyint does (to nearest even, the
// default rounding mode); quantize_test checks the two against each other.
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "kernels/quantize.h"
#include "kernels/quantize_impl.h"

namespace cpinfer::quantize_impl {

namespace {

// The block at xb: its two vectors, d and id as the scalar act_block_scale computes them.
struct Block {
  __m512 v0, v1;
  float d, id;
};

inline Block load_block(const float* xb) {
  Block b{_mm512_loadu_ps(xb), _mm512_loadu_ps(xb + 16), 0, 0};
  const __m512 a = _mm512_max_ps(_mm512_abs_ps(b.v0), _mm512_abs_ps(b.v1));
  const bool nan = (_mm512_cmp_ps_mask(b.v0, b.v0, _CMP_UNORD_Q) |
                    _mm512_cmp_ps_mask(b.v1, b.v1, _CMP_UNORD_Q)) != 0;
  const float amax = _mm512_reduce_max_ps(a);
  b.d = nan ? std::numeric_limits<float>::quiet_NaN() : amax / 127.0f;
  b.id = act_inverse_scale(b.d);
  return b;
}

}  // namespace

void q8_act_rows_avx512(const float* x, int64_t M, int64_t ldx, int64_t K, float* dst) {
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    float* row = dst + m * q8_act_row_floats(K);
    auto* q = reinterpret_cast<int8_t*>(row);
    float* d = row + K / 4;
    for (int64_t b = 0; b < K / kQ8BlockElems; ++b) {
      const Block blk = load_block(xr + b * kQ8BlockElems);
      __m128i q0 = _mm_setzero_si128(), q1 = _mm_setzero_si128();
      const bool finite = std::isfinite(blk.d);
      if (finite) {
        const __m512 id = _mm512_set1_ps(blk.id);
        // |x * id| <= 127, so the narrowing to int8 never saturates.
        q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(blk.v0, id)));
        q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(blk.v1, id)));
      }
      d[b] = finite ? blk.d : std::numeric_limits<float>::quiet_NaN();
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQ8BlockElems), q0);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQ8BlockElems + 16), q1);
    }
  }
}

void q8_act_fake_rows_avx512(const float* x, int64_t M, int64_t ldx, int64_t K, float* dst) {
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    float* out = dst + m * K;
    for (int64_t b = 0; b < K / kQ8BlockElems; ++b) {
      const Block blk = load_block(xr + b * kQ8BlockElems);
      const __m512 id = _mm512_set1_ps(blk.id), d = _mm512_set1_ps(blk.d);
      // nearbyint(x * id) as f32: vrndscaleps to nearest even (NaN and inf stay as they are,
      // as in the scalar form).
      constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      const __m512 r0 = _mm512_roundscale_ps(_mm512_mul_ps(blk.v0, id), kNearest);
      const __m512 r1 = _mm512_roundscale_ps(_mm512_mul_ps(blk.v1, id), kNearest);
      _mm512_storeu_ps(out + b * kQ8BlockElems, _mm512_mul_ps(d, r0));
      _mm512_storeu_ps(out + b * kQ8BlockElems + 16, _mm512_mul_ps(d, r1));
    }
  }
}

}  // namespace cpinfer::quantize_impl
