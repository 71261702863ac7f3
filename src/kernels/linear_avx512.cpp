// AVX-512 linear kernels (compiled with -mavx512f/bw/vl/dq -mfma -mf16c).
//   gemv:  one W row at a time, front to back, x up to 4 x rows, W widened in registers
//          (bf16: zero-extend + shift left 16; f16: vcvtph2ps), masked K tail.
//   skinny: decode batches; 6 x-row x 4 W-row register tiles over K, W widened in registers
//          once per tile and read unpacked.
//   gemm:  14 x 32 register tile (28 zmm accumulators) over a packed f32 W panel; the
//          panel is packed with 16 x 16 in-register transposes.
// GCC 12's AVX-512 intrinsics (the _mm512_undefined_* idiom) trip -W(maybe-)uninitialized
// once inlined; the warnings point into the system header and are false positives.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "kernels/avx512_reduce.h"
#include "kernels/avx512_transpose.h"
#include "kernels/linear_driver.h"
#include "kernels/linear_impl.h"

namespace cpinfer::linear_impl {

namespace {

template <DType DT>
struct Load {
  using T = std::conditional_t<DT == DType::F32, float, uint16_t>;

  static __m512 widen16(__m256i h) {
    if constexpr (DT == DType::BF16)
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else
      return _mm512_cvtph_ps(h);
  }
  // 16 elements at p, widened to f32.
  static __m512 full(const T* p) {
    if constexpr (DT == DType::F32) return _mm512_loadu_ps(p);
    else return widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // The elements of p selected by m (others 0); never touches unselected memory.
  static __m512 masked(const T* p, __mmask16 m) {
    if constexpr (DT == DType::F32) return _mm512_maskz_loadu_ps(m, p);
    else return widen16(_mm256_maskz_loadu_epi16(m, p));
  }
};

inline __mmask16 tail_mask(int64_t n) { return __mmask16((1u << n) - 1u); }

template <DType DT>
const typename Load<DT>::T* row_ptr(const WeightView& w, int64_t row, int64_t k0) {
  return static_cast<const typename Load<DT>::T*>(w.data) + row * w.ld + k0;
}

// ---- widen -------------------------------------------------------------------------

template <DType DT>
void widen_t(const void* src, int64_t n, float* dst) {
  const auto* s = static_cast<const typename Load<DT>::T*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, Load<DT>::full(s + i));
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, Load<DT>::masked(s + i, m));
  }
}

void widen(const void* src, DType dtype, int64_t n, float* dst) {
  switch (dtype) {
    case DType::Q8_0: return dequantize_row_q8_0(static_cast<const uint8_t*>(src), n, dst);
    case DType::BF16: return widen_t<DType::BF16>(src, n, dst);
    case DType::F16: return widen_t<DType::F16>(src, n, dst);
    default: return widen_t<DType::F32>(src, n, dst);
  }
}

// ---- gemv --------------------------------------------------------------------------

struct Gemv {
  // row() over Q8_0 blocks (K a multiple of 32): a block's two halves of 16 int8 widened
  // (vpmovsxbd + vcvtdq2ps) and scaled by d, which is exact (an 11-bit scale times an 8-bit
  // integer). Blocks go in pairs, each into its own two accumulators per x row, so four
  // FMA chains hide the latency (fixed registers: accumulators picked by an index known
  // only at run time would live in memory). Example, K 96: blocks 0 and 2 add into
  // a0, a1, block 1 into a2, a3.
  // Dequantized block at wp: w0 = its elements 0-15, w1 = 16-31.
  static inline void load_block_q8_0(const char* wp, __m512& w0, __m512& w1) {
    uint16_t d_bits;
    std::memcpy(&d_bits, wp, 2);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(d_bits));
    w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(wp + 2)))), d);
    w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(wp + 18)))), d);
  }

  template <int MM>
  static void row_q8_0(const float* x, int64_t ldx, const char* wp, int64_t K, float bias,
                       bool accumulate, float* y, int64_t ldy, const char* pf) {
    __m512 a0[MM], a1[MM], a2[MM], a3[MM];
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m) a0[m] = a1[m] = a2[m] = a3[m] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 2 * kQ8BlockElems <= K; k += 2 * kQ8BlockElems, wp += 2 * kQ8BlockBytes) {
      if (pf) {
        _mm_prefetch(pf, _MM_HINT_T0);
        _mm_prefetch(pf + 64, _MM_HINT_T0);
        pf += 2 * kQ8BlockBytes;
      }
      __m512 w0, w1, w2, w3;
      load_block_q8_0(wp, w0, w1);
      load_block_q8_0(wp + kQ8BlockBytes, w2, w3);
#pragma GCC unroll 4
      for (int m = 0; m < MM; ++m) {
        const float* xm = x + m * ldx + k;
        a0[m] = _mm512_fmadd_ps(_mm512_loadu_ps(xm), w0, a0[m]);
        a1[m] = _mm512_fmadd_ps(_mm512_loadu_ps(xm + 16), w1, a1[m]);
        a2[m] = _mm512_fmadd_ps(_mm512_loadu_ps(xm + 32), w2, a2[m]);
        a3[m] = _mm512_fmadd_ps(_mm512_loadu_ps(xm + 48), w3, a3[m]);
      }
    }
    if (k < K) {  // an odd last block
      if (pf) _mm_prefetch(pf, _MM_HINT_T0);
      __m512 w0, w1;
      load_block_q8_0(wp, w0, w1);
#pragma GCC unroll 4
      for (int m = 0; m < MM; ++m) {
        a0[m] = _mm512_fmadd_ps(_mm512_loadu_ps(x + m * ldx + k), w0, a0[m]);
        a1[m] = _mm512_fmadd_ps(_mm512_loadu_ps(x + m * ldx + k + 16), w1, a1[m]);
      }
    }
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m) {
      const __m512 s = _mm512_add_ps(_mm512_add_ps(a0[m], a1[m]), _mm512_add_ps(a2[m], a3[m]));
      y[m * ldy] = (accumulate ? y[m * ldy] : bias) + _mm512_reduce_add_ps(s);
    }
  }

  // y[m * ldy] = (accumulate ? y[m * ldy] : bias) + x[m, 0:K] · w[0:K] for m < MM.
  // x: [MM, K] (ldx), w: [K] of DT, read front to back. U independent accumulators per x
  // row hide the FMA latency. pf (if set): K elements of DT to prefetch alongside.
  template <DType DT, int MM>
  static void row(const float* x, int64_t ldx, const char* wp, int64_t K, float bias,
                  bool accumulate, float* y, int64_t ldy, const char* pf) {
    using T = typename Load<DT>::T;
    constexpr int U = MM == 1 ? 4 : MM == 2 ? 2 : 1;
    constexpr int64_t kStepBytes = 16 * U * int64_t(sizeof(T));
    const T* w = reinterpret_cast<const T*>(wp);
    __m512 acc[MM][U];
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m)
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) acc[m][u] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 * U <= K; k += 16 * U) {
      if (pf) {
        for (int64_t o = 0; o < kStepBytes; o += 64)
          _mm_prefetch(pf + k * int64_t(sizeof(T)) + o, _MM_HINT_T0);
      }
      __m512 wv[U];
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) wv[u] = Load<DT>::full(w + k + 16 * u);
#pragma GCC unroll 4
      for (int m = 0; m < MM; ++m)
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u)
          acc[m][u] = _mm512_fmadd_ps(_mm512_loadu_ps(x + m * ldx + k + 16 * u), wv[u], acc[m][u]);
    }
    for (; k < K; k += 16) {
      const __mmask16 mask = K - k >= 16 ? __mmask16(0xffff) : tail_mask(K - k);
      const __m512 wv = Load<DT>::masked(w + k, mask);
#pragma GCC unroll 4
      for (int m = 0; m < MM; ++m)
        acc[m][0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, x + m * ldx + k), wv, acc[m][0]);
    }
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m) {
#pragma GCC unroll 4
      for (int u = 1; u < U; ++u) acc[m][0] = _mm512_add_ps(acc[m][0], acc[m][u]);
      y[m * ldy] = (accumulate ? y[m * ldy] : bias) + _mm512_reduce_add_ps(acc[m][0]);
    }
  }
};

void gemv(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
          float* y, int64_t ldy, int64_t n0, int64_t n1) {
  gemv_task<Gemv>(x, M, ldx, w, bias, y, ldy, n0, n1);
}

// ---- skinny (decode batches) ------------------------------------------------------

struct Skinny {
  static constexpr int kSm = 6;  // x rows per tile
  static constexpr int kSn = 4;  // W rows per tile: 24 accumulators + 4 W + 1 x register

  template <DType DT, int MM>
  static void tile(const float* x, int64_t ldx, const char* const rows[kSn], int64_t K,
                   const float bias[kSn], float* y, int64_t ldy, int nv, const char* pf,
                   int64_t pf_bytes) {
    using T = typename Load<DT>::T;
    const T* w[kSn];
    for (int j = 0; j < kSn; ++j) w[j] = reinterpret_cast<const T*>(rows[j]);
    __m512 acc[MM][kSn];
#pragma GCC unroll 6
    for (int m = 0; m < MM; ++m)
#pragma GCC unroll 4
      for (int j = 0; j < kSn; ++j) acc[m][j] = _mm512_setzero_ps();
    SpreadPrefetch prefetch(pf, pf_bytes, (K + 15) / 16);  // over the K loop's steps
    int64_t k = 0, step = 0;
    for (; k + 16 <= K; k += 16, ++step) {
      prefetch.at(step);
      __m512 wv[kSn];
#pragma GCC unroll 4
      for (int j = 0; j < kSn; ++j) wv[j] = Load<DT>::full(w[j] + k);
#pragma GCC unroll 6
      for (int m = 0; m < MM; ++m) {
        const __m512 xv = _mm512_loadu_ps(x + m * ldx + k);
#pragma GCC unroll 4
        for (int j = 0; j < kSn; ++j) acc[m][j] = _mm512_fmadd_ps(xv, wv[j], acc[m][j]);
      }
    }
    if (k < K) {
      const __mmask16 mask = tail_mask(K - k);
      __m512 wv[kSn];
#pragma GCC unroll 4
      for (int j = 0; j < kSn; ++j) wv[j] = Load<DT>::masked(w[j] + k, mask);
#pragma GCC unroll 6
      for (int m = 0; m < MM; ++m) {
        const __m512 xv = _mm512_maskz_loadu_ps(mask, x + m * ldx + k);
#pragma GCC unroll 4
        for (int j = 0; j < kSn; ++j) acc[m][j] = _mm512_fmadd_ps(xv, wv[j], acc[m][j]);
      }
    }
    prefetch.rest();
    store_tile_sums<MM>(acc, bias, y, ldy, nv);
  }
};

void skinny(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
            float* y, int64_t ldy, int64_t n0, int64_t n1) {
  skinny_task<Skinny>(x, M, ldx, w, bias, y, ldy, n0, n1);
}

// ---- gemm --------------------------------------------------------------------------

struct Avx512Gemm {
  static constexpr int kMr = 14;
  static constexpr int kNr = 32;
  static constexpr int kKcMax = 384;
  static constexpr int kNcStrips = 16;

  // dst[k * 32 + j] = W[row0 + j, k0 + k] for k < kc; rows past rows_valid are zero.
  template <DType DT>
  static void pack_w_t(const WeightView& w, int64_t row0, int rows_valid, int64_t k0, int64_t kc,
                       float* dst) {
    for (int half = 0; half < 2; ++half) {
      const int j0 = half * 16;
      const int rows = std::max(0, std::min(16, rows_valid - j0));
      const typename Load<DT>::T* src[16];
      for (int i = 0; i < rows; ++i) src[i] = row_ptr<DT>(w, row0 + j0 + i, k0);
      for (int64_t k = 0; k < kc; k += 16) {
        const int cnt = int(std::min<int64_t>(16, kc - k));
        __m512 r[16];
        if (cnt == 16) {
          for (int i = 0; i < rows; ++i) r[i] = Load<DT>::full(src[i] + k);
        } else {
          const __mmask16 m = tail_mask(cnt);
          for (int i = 0; i < rows; ++i) r[i] = Load<DT>::masked(src[i] + k, m);
        }
        for (int i = rows; i < 16; ++i) r[i] = _mm512_setzero_ps();
        transpose16(r);
        for (int i = 0; i < cnt; ++i) _mm512_store_ps(dst + (k + i) * kNr + j0, r[i]);
      }
    }
  }

  static void pack_w(const WeightView& w, int64_t row0, int rows_valid, int64_t k0, int64_t kc,
                     float* dst) {
    switch (w.dtype) {
      case DType::BF16: return pack_w_t<DType::BF16>(w, row0, rows_valid, k0, kc, dst);
      case DType::F16: return pack_w_t<DType::F16>(w, row0, rows_valid, k0, kc, dst);
      default: return pack_w_t<DType::F32>(w, row0, rows_valid, k0, kc, dst);
    }
  }

  // xp[k * mr + i] = x[i * ldx + k] for i < mr (<= 16), k < kc: 16 x 16 blocks transposed
  // in registers; row j of a transposed block (k = k0 + j) is stored with its first mr lanes.
  // Example, mr 14: block k0 = 0 holds x[0..13, 0..15] (rows 14, 15 zero); its row 3 is
  // x[0..13, 3] and goes to xp[42 .. 55].
  static void pack_x(const float* x, int64_t ldx, int mr, int64_t kc, float* xp) {
    const __mmask16 lanes = tail_mask(mr);
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
      const int cnt = int(std::min<int64_t>(16, kc - k0));
      const __mmask16 m = tail_mask(cnt);
      __m512 r[16];
      for (int i = 0; i < mr; ++i) r[i] = _mm512_maskz_loadu_ps(m, x + i * ldx + k0);
      for (int i = mr; i < 16; ++i) r[i] = _mm512_setzero_ps();
      transpose16(r);
      for (int j = 0; j < cnt; ++j) _mm512_mask_storeu_ps(xp + (k0 + j) * mr, lanes, r[j]);
    }
  }

  // y[i, 0:nv] (+)= sum_k xp[k * MR + i] * wp[k * 32 + 0:nv], i < MR.
  template <int MR>
  static void micro_t(int64_t kc, const float* xp, const float* wp, float* y, int64_t ldy,
                      int nv, const float* bias, bool accumulate) {
    const __mmask16 m0 = nv >= 16 ? __mmask16(0xffff) : tail_mask(nv);
    const __mmask16 m1 = nv >= 32 ? __mmask16(0xffff) : nv > 16 ? tail_mask(nv - 16) : 0;
    __m512 c0[MR], c1[MR];
    if (accumulate) {
#pragma GCC unroll 14
      for (int i = 0; i < MR; ++i) {
        c0[i] = _mm512_maskz_loadu_ps(m0, y + i * ldy);
        c1[i] = _mm512_maskz_loadu_ps(m1, y + i * ldy + 16);
      }
    } else {
      __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
      __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 14
      for (int i = 0; i < MR; ++i) {
        c0[i] = b0;
        c1[i] = b1;
      }
    }
    for (int64_t k = 0; k < kc; ++k) {
      const __m512 w0 = _mm512_load_ps(wp);
      const __m512 w1 = _mm512_load_ps(wp + 16);
#pragma GCC unroll 14
      for (int i = 0; i < MR; ++i) {
        const __m512 a = _mm512_set1_ps(xp[i]);
        c0[i] = _mm512_fmadd_ps(a, w0, c0[i]);
        c1[i] = _mm512_fmadd_ps(a, w1, c1[i]);
      }
      wp += kNr;
      xp += MR;
    }
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      _mm512_mask_storeu_ps(y + i * ldy, m0, c0[i]);
      _mm512_mask_storeu_ps(y + i * ldy + 16, m1, c1[i]);
    }
  }

  static void micro(int mr, int64_t kc, const float* xp, const float* wp, float* y, int64_t ldy,
                    int nv, const float* bias, bool accumulate) {
    using Fn = void (*)(int64_t, const float*, const float*, float*, int64_t, int, const float*,
                        bool);
    static constexpr auto table =
        rows_table<kMr, Fn>([](auto r) -> Fn { return &micro_t<r()>; });
    table[size_t(mr - 1)](kc, xp, wp, y, ldy, nv, bias, accumulate);
  }
};

void gemm(const float* x, int64_t ldx, const WeightView& w, const float* bias, float* y,
          int64_t ldy, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  gemm_task<Avx512Gemm>(x, ldx, w, bias, y, ldy, m0, m1, n0, n1);
}

}  // namespace

const Kernels& avx512_kernels() {
  static const Kernels k = [] {
    Kernels r{gemv, gemm, widen, Avx512Gemm::kMr, Avx512Gemm::kNr,
              Avx512Gemm::kNcStrips, skinny, skinny_max_rows_for(true)};
    r.skinny_min_rows_bf16 = skinny_min_rows_bf16_for(true);
    return r;
  }();
  return k;
}

}  // namespace cpinfer::linear_impl
