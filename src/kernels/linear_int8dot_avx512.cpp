// The decode GEMV over Q8_0 weights on int8 dot products (AVX512_VNNI vpdpbusd on 256-bit
// vectors; compiled with -mavx512vnni, run only where CPUID reports it). x arrives as rows
// quantized by q8_act_rows (kernels/quantize.h): int8 q[K] then one f32 scale per block.
//
// One Q8_0 block (f16 scale dw, 32 int8 w) against one block of an x row (scale dx, 32 q):
//   sum_j (dw w_j) (dx q_j) = dw dx sum_j w_j q_j,
// the integer sum exact in int32 (|sum| <= 32 * 128 * 127). vpdpbusd multiplies unsigned by
// signed bytes, so the weight's sign moves onto q: |w_j| (vpsignb w, w) times q_j with w_j's
// sign (vpsignb q, w; 0 where w_j = 0). |-128| = 128 as an unsigned byte, so a weight of
// -128 (possible in a GGUF file, never written by quantize_row_q8_0) is still right. Each
// block's 8 int32 partial sums are converted to f32 and added with one FMA by dw * dx;
// blocks alternate between two accumulators per x row to hide the FMA latency.
// Example, K 64, one x row: block 0 -> acc0 += f32(dpbusd(|w0|, q0 * sgn w0)) * dw0 dx0,
// block 1 -> acc1 likewise; y = bias + hsum(acc0 + acc1).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/linear_driver.h"
#include "kernels/linear_impl.h"

namespace cpinfer::linear_impl {

namespace {

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

struct GemvInt8 {
  static constexpr bool kPackedRows = true;

  // One block of MM x rows: acc[m] += f32(sum_j |w_j| (q_mj sgn w_j)) * dw * dx_m.
  // wp: the Q8_0 block (f16 scale, 32 int8); q[m]: the x row's 32 int8; dx[m]: its scale.
  template <int MM>
  static inline void block(const char* wp, const int8_t* const q[MM], const float dx[MM],
                           __m256 acc[MM]) {
    uint16_t d_bits;
    std::memcpy(&d_bits, wp, 2);
    const float dw = _cvtsh_ss(d_bits);
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + 2));
    const __m256i aw = _mm256_sign_epi8(w, w);
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m) {
      const __m256i xs =
          _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[m])), w);
      const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, xs);
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * dx[m]), acc[m]);
    }
  }

  // y[m * ldy] = (accumulate ? y[m * ldy] : bias) + x_m · w for m < MM over K / 32 blocks.
  // x: packed rows (row stride ldx floats); w: K / 32 Q8_0 blocks; pf (if set): the same
  // bytes of a later row, prefetched alongside.
  template <int MM>
  static void row_q8_0(const float* x, int64_t ldx, const char* wp, int64_t K, float bias,
                       bool accumulate, float* y, int64_t ldy, const char* pf) {
    const int8_t* q[MM];
    const float* d[MM];
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m) {
      q[m] = reinterpret_cast<const int8_t*>(x + m * ldx);
      d[m] = x + m * ldx + K / 4;
    }
    __m256 a0[MM], a1[MM];
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m) a0[m] = a1[m] = _mm256_setzero_ps();
    const int64_t blocks = K / kQ8BlockElems;
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2, wp += 2 * kQ8BlockBytes) {
      if (pf) {
        _mm_prefetch(pf, _MM_HINT_T0);
        _mm_prefetch(pf + 64, _MM_HINT_T0);
        pf += 2 * kQ8BlockBytes;
      }
      const int8_t* q0[MM];
      const int8_t* q1[MM];
      float d0[MM], d1[MM];
#pragma GCC unroll 4
      for (int m = 0; m < MM; ++m) {
        q0[m] = q[m] + b * kQ8BlockElems;
        q1[m] = q0[m] + kQ8BlockElems;
        d0[m] = d[m][b];
        d1[m] = d[m][b + 1];
      }
      block<MM>(wp, q0, d0, a0);
      block<MM>(wp + kQ8BlockBytes, q1, d1, a1);
    }
    if (b < blocks) {  // an odd last block
      if (pf) _mm_prefetch(pf, _MM_HINT_T0);
      const int8_t* q0[MM];
      float d0[MM];
#pragma GCC unroll 4
      for (int m = 0; m < MM; ++m) {
        q0[m] = q[m] + b * kQ8BlockElems;
        d0[m] = d[m][b];
      }
      block<MM>(wp, q0, d0, a0);
    }
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m)
      y[m * ldy] = (accumulate ? y[m * ldy] : bias) + hsum(_mm256_add_ps(a0[m], a1[m]));
  }
};

}  // namespace

void gemv_int8_dot(const float* x, int64_t M, int64_t ldx, const WeightView& w,
                   const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  CPI_CHECK(w.dtype == DType::Q8_0, "the int8-dot GEMV reads Q8_0 weights, not {}",
            dtype_name(w.dtype));
  gemv_task_t<GemvInt8, DType::Q8_0>(x, M, ldx, w, bias, y, ldy, n0, n1);
}

}  // namespace cpinfer::linear_impl
