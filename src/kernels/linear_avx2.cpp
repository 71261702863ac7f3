// AVX2 + FMA + F16C linear kernels.
//   gemv:  one W row at a time, front to back, x up to 4 x rows, W widened in registers
//          (bf16: zero-extend + shift left 16; f16: vcvtph2ps), K tail through a zero-padded
//          copy (AVX2 has no masked 16-bit loads).
//   skinny: decode batches; 3 x-row x 3 W-row register tiles over K, W widened in registers
//          once per tile and read unpacked; over bf16 W the pair tiles (x permuted to match
//          W's even/odd halves, one load and one integer op per 8 weights).
//   gemm:  6 x 16 register tile (12 ymm accumulators) over a packed f32 W panel; the panel
//          is packed with 8 x 8 in-register transposes.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "kernels/avx2_transpose.h"
#include "kernels/linear_driver.h"
#include "kernels/linear_impl.h"

namespace cpinfer::linear_impl {

namespace {

inline __m256i tail_mask(int64_t n) {
  // Lane i is all ones when i < n.
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <DType DT>
struct Load {
  using T = std::conditional_t<DT == DType::F32, float, uint16_t>;

  static __m256 widen8(__m128i h) {
    if constexpr (DT == DType::BF16)
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else
      return _mm256_cvtph_ps(h);
  }
  // 8 elements at p, widened to f32.
  static __m256 full(const T* p) {
    if constexpr (DT == DType::F32) return _mm256_loadu_ps(p);
    else return widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // The first n (< 8) elements at p, the rest 0; never reads past p + n.
  static __m256 partial(const T* p, int64_t n) {
    if constexpr (DT == DType::F32) {
      return _mm256_maskload_ps(p, tail_mask(n));
    } else {
      alignas(16) uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      std::memcpy(tmp, p, size_t(n) * sizeof(uint16_t));
      return widen8(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
    }
  }
};

template <DType DT>
const typename Load<DT>::T* row_ptr(const WeightView& w, int64_t row, int64_t k0) {
  return static_cast<const typename Load<DT>::T*>(w.data) + row * w.ld + k0;
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- widen -------------------------------------------------------------------------

template <DType DT>
void widen_t(const void* src, int64_t n, float* dst) {
  const auto* s = static_cast<const typename Load<DT>::T*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, Load<DT>::full(s + i));
  if (i < n) _mm256_maskstore_ps(dst + i, tail_mask(n - i), Load<DT>::partial(s + i, n - i));
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
  // row() over Q8_0 blocks (K a multiple of 32): each block's four groups of 8 int8
  // widened (vpmovsxbd + vcvtdq2ps) and scaled by d, which is exact (an 11-bit scale times an
  // 8-bit integer), into four accumulators per x row.
  template <int MM>
  static void row_q8_0(const float* x, int64_t ldx, const char* wp, int64_t K, float bias,
                       bool accumulate, float* y, int64_t ldy, const char* pf) {
    __m256 acc[MM][4];
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m)
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) acc[m][u] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += kQ8BlockElems, wp += kQ8BlockBytes) {
      if (pf) _mm_prefetch(pf + k / kQ8BlockElems * kQ8BlockBytes, _MM_HINT_T0);
      uint16_t d_bits;
      std::memcpy(&d_bits, wp, 2);
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(d_bits));
      __m256 wv[4];
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wp + 2 + 8 * u));
        wv[u] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
      }
#pragma GCC unroll 4
      for (int m = 0; m < MM; ++m)
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u)
          acc[m][u] = _mm256_fmadd_ps(_mm256_loadu_ps(x + m * ldx + k + 8 * u), wv[u], acc[m][u]);
    }
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m) {
      const __m256 s = _mm256_add_ps(_mm256_add_ps(acc[m][0], acc[m][1]),
                                     _mm256_add_ps(acc[m][2], acc[m][3]));
      y[m * ldy] = (accumulate ? y[m * ldy] : bias) + hsum(s);
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
    constexpr int64_t kStepBytes = 8 * U * int64_t(sizeof(T));
    const T* w = reinterpret_cast<const T*>(wp);
    __m256 acc[MM][U];
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m)
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) acc[m][u] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 * U <= K; k += 8 * U) {
      if (pf) {
        for (int64_t o = 0; o < kStepBytes; o += 64)
          _mm_prefetch(pf + k * int64_t(sizeof(T)) + o, _MM_HINT_T0);
      }
      __m256 wv[U];
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) wv[u] = Load<DT>::full(w + k + 8 * u);
#pragma GCC unroll 4
      for (int m = 0; m < MM; ++m)
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u)
          acc[m][u] = _mm256_fmadd_ps(_mm256_loadu_ps(x + m * ldx + k + 8 * u), wv[u], acc[m][u]);
    }
    for (; k + 8 <= K; k += 8) {
      const __m256 wv = Load<DT>::full(w + k);
#pragma GCC unroll 4
      for (int m = 0; m < MM; ++m)
        acc[m][0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + m * ldx + k), wv, acc[m][0]);
    }
    if (k < K) {
      const __m256i mask = tail_mask(K - k);
      const __m256 wv = Load<DT>::partial(w + k, K - k);
#pragma GCC unroll 4
      for (int m = 0; m < MM; ++m)
        acc[m][0] = _mm256_fmadd_ps(_mm256_maskload_ps(x + m * ldx + k, mask), wv, acc[m][0]);
    }
#pragma GCC unroll 4
    for (int m = 0; m < MM; ++m) {
#pragma GCC unroll 4
      for (int u = 1; u < U; ++u) acc[m][0] = _mm256_add_ps(acc[m][0], acc[m][u]);
      y[m * ldy] = (accumulate ? y[m * ldy] : bias) + hsum(acc[m][0]);
    }
  }
};

void gemv(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
          float* y, int64_t ldy, int64_t n0, int64_t n1) {
  gemv_task<Gemv>(x, M, ldx, w, bias, y, ldy, n0, n1);
}

// ---- gemm --------------------------------------------------------------------------

using avx2_util::transpose8;

struct Avx2Gemm {
  static constexpr int kMr = 6;
  static constexpr int kNr = 16;
  static constexpr int kKcMax = 384;
  static constexpr int kNcStrips = 32;

  // dst[k * 16 + j] = W[row0 + j, k0 + k] for k < kc; rows past rows_valid are zero.
  template <DType DT>
  static void pack_w_t(const WeightView& w, int64_t row0, int rows_valid, int64_t k0, int64_t kc,
                       float* dst) {
    for (int half = 0; half < 2; ++half) {
      const int j0 = half * 8;
      const int rows = std::max(0, std::min(8, rows_valid - j0));
      const typename Load<DT>::T* src[8];
      for (int i = 0; i < rows; ++i) src[i] = row_ptr<DT>(w, row0 + j0 + i, k0);
      for (int64_t k = 0; k < kc; k += 8) {
        const int cnt = int(std::min<int64_t>(8, kc - k));
        __m256 r[8];
        if (cnt == 8) {
          for (int i = 0; i < rows; ++i) r[i] = Load<DT>::full(src[i] + k);
        } else {
          for (int i = 0; i < rows; ++i) r[i] = Load<DT>::partial(src[i] + k, cnt);
        }
        for (int i = rows; i < 8; ++i) r[i] = _mm256_setzero_ps();
        transpose8(r);
        for (int i = 0; i < cnt; ++i) _mm256_store_ps(dst + (k + i) * kNr + j0, r[i]);
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

  // xp[k * mr + i] = x[i * ldx + k] for i < mr (<= 6), k < kc: 8 x 8 blocks transposed in
  // registers (rows mr..7 zero). Row j of a transposed block (k = k0 + j) is stored whole at
  // xp + k * mr: its lanes past mr land on the next k's slots, which the next store (k + 1)
  // then overwrites, so the stores go in increasing k and the last one writes 8 - mr floats
  // past mr * kc (the driver's x scratch has kXPackSlack floats of room). Example, mr 6:
  // block k0 = 8 holds x[0..5, 8..15]; its row 2 is x[0..5, 10] and goes to xp[60 .. 65]
  // (lanes 6, 7 to xp[66, 67], rewritten by k = 11).
  static void pack_x(const float* x, int64_t ldx, int mr, int64_t kc, float* xp) {
    for (int64_t k0 = 0; k0 < kc; k0 += 8) {
      const int cnt = int(std::min<int64_t>(8, kc - k0));
      __m256 r[8];
      if (cnt == 8) {
        for (int i = 0; i < mr; ++i) r[i] = _mm256_loadu_ps(x + i * ldx + k0);
      } else {
        const __m256i m = tail_mask(cnt);
        for (int i = 0; i < mr; ++i) r[i] = _mm256_maskload_ps(x + i * ldx + k0, m);
      }
      for (int i = mr; i < 8; ++i) r[i] = _mm256_setzero_ps();
      transpose8(r);
      for (int j = 0; j < cnt; ++j) _mm256_storeu_ps(xp + (k0 + j) * mr, r[j]);
    }
  }

  // y[i, 0:nv] (+)= sum_k xp[k * MR + i] * wp[k * 16 + 0:nv], i < MR.
  template <int MR>
  static void micro_t(int64_t kc, const float* xp, const float* wp, float* y, int64_t ldy,
                      int nv, const float* bias, bool accumulate) {
    const __m256i m0 = tail_mask(nv);
    const __m256i m1 = tail_mask(nv - 8);
    __m256 c0[MR], c1[MR];
    if (accumulate) {
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        c0[i] = _mm256_maskload_ps(y + i * ldy, m0);
        c1[i] = _mm256_maskload_ps(y + i * ldy + 8, m1);
      }
    } else {
      __m256 b0 = bias ? _mm256_maskload_ps(bias, m0) : _mm256_setzero_ps();
      __m256 b1 = bias ? _mm256_maskload_ps(bias + 8, m1) : _mm256_setzero_ps();
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        c0[i] = b0;
        c1[i] = b1;
      }
    }
    for (int64_t k = 0; k < kc; ++k) {
      const __m256 w0 = _mm256_load_ps(wp);
      const __m256 w1 = _mm256_load_ps(wp + 8);
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        const __m256 a = _mm256_broadcast_ss(xp + i);
        c0[i] = _mm256_fmadd_ps(a, w0, c0[i]);
        c1[i] = _mm256_fmadd_ps(a, w1, c1[i]);
      }
      wp += kNr;
      xp += MR;
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      _mm256_maskstore_ps(y + i * ldy, m0, c0[i]);
      _mm256_maskstore_ps(y + i * ldy + 8, m1, c1[i]);
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

// ---- skinny (decode batches) ------------------------------------------------------

struct Skinny {
  static constexpr int kSm = 3;  // x rows per tile
  static constexpr int kSn = 3;  // W rows per tile: 9 accumulators + 3 W + 1 x of 16 ymm

  template <DType DT, int MM>
  static void tile(const float* x, int64_t ldx, const char* const rows[kSn], int64_t K,
                   const float bias[kSn], float* y, int64_t ldy, int nv, const char* pf,
                   int64_t pf_bytes) {
    using T = typename Load<DT>::T;
    const T* w[kSn];
    for (int j = 0; j < kSn; ++j) w[j] = reinterpret_cast<const T*>(rows[j]);
    __m256 acc[MM][kSn];
#pragma GCC unroll 3
    for (int m = 0; m < MM; ++m)
#pragma GCC unroll 3
      for (int j = 0; j < kSn; ++j) acc[m][j] = _mm256_setzero_ps();
    SpreadPrefetch prefetch(pf, pf_bytes, (K + 7) / 8);  // over the K loop's steps
    int64_t k = 0, step = 0;
    for (; k + 8 <= K; k += 8, ++step) {
      prefetch.at(step);
      __m256 wv[kSn];
#pragma GCC unroll 3
      for (int j = 0; j < kSn; ++j) wv[j] = Load<DT>::full(w[j] + k);
#pragma GCC unroll 3
      for (int m = 0; m < MM; ++m) {
        const __m256 xv = _mm256_loadu_ps(x + m * ldx + k);
#pragma GCC unroll 3
        for (int j = 0; j < kSn; ++j) acc[m][j] = _mm256_fmadd_ps(xv, wv[j], acc[m][j]);
      }
    }
    if (k < K) {
      const __m256i mask = tail_mask(K - k);
      __m256 wv[kSn];
#pragma GCC unroll 3
      for (int j = 0; j < kSn; ++j) wv[j] = Load<DT>::partial(w[j] + k, K - k);
#pragma GCC unroll 3
      for (int m = 0; m < MM; ++m) {
        const __m256 xv = _mm256_maskload_ps(x + m * ldx + k, mask);
#pragma GCC unroll 3
        for (int j = 0; j < kSn; ++j) acc[m][j] = _mm256_fmadd_ps(xv, wv[j], acc[m][j]);
      }
    }
    prefetch.rest();
#pragma GCC unroll 3
    for (int m = 0; m < MM; ++m)
      for (int j = 0; j < nv; ++j) y[m * ldy + j] = bias[j] + hsum(acc[m][j]);
  }
};

// ---- skinny over bf16 weights: pairs split in place --------------------------------------
//
// A 32-bit lane of bf16 W holds two neighbours: element k0 + 2i in its low 16 bits and
// k0 + 2i + 1 in its high 16 bits (lane i of a 16-element, 256-bit load at k0). Shifted left
// by 16 the lane is element k0 + 2i as f32; with its low 16 bits cleared it is element
// k0 + 2i + 1. So one load and one integer op per 8 weights where the plain tile pays a
// 128-bit load, a zero-extension shuffle and a shift (the shuffles and shifts compete with
// the FMAs for issue slots). x is permuted to match, once per call:
//   xp[k0 + i] = x[k0 + 2i], xp[k0 + 8 + i] = x[k0 + 2i + 1]   for i < 8, every k0 = 16 b;
//   xp[k] = x[k] for the K % 16 tail (read by the plain 8-wide steps).
// Example, K 20: xp = x0 x2 x4 .. x14 x1 x3 .. x15 x16 x17 x18 x19.
inline void permute_pairs(const float* x, int64_t M, int64_t ldx, int64_t K, float* xp) {
  const int64_t K16 = K / 16 * 16;
  for (int64_t m = 0; m < M; ++m) {
    const float* s = x + m * ldx;
    float* d = xp + m * K;
    for (int64_t k = 0; k < K16; k += 16) {
      const __m256 a = _mm256_loadu_ps(s + k), b = _mm256_loadu_ps(s + k + 8);
      // Per 128-bit half: even (odd) elements of a then of b; the 64-bit quarters
      // (a0 a2 | b0 b2 | a4 a6 | b4 b6) are reordered to (a0 a2 | a4 a6 | b0 b2 | b4 b6).
      const __m256 ev = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
      const __m256 od = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
      const auto quarters = [](__m256 v) {
        return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), _MM_SHUFFLE(3, 1, 2, 0)));
      };
      _mm256_storeu_ps(d + k, quarters(ev));
      _mm256_storeu_ps(d + k + 8, quarters(od));
    }
    std::memcpy(d + K16, s + K16, size_t(K - K16) * sizeof(float));
  }
}

// Skinny tiles over bf16 W in pairs: 3 x rows x 3 W rows per tile (9 accumulators), the
// driver and contract of Skinny, with x permuted by permute_pairs (ldx = K).
struct SkinnyBf16Pairs {
  static constexpr int kSm = 3;  // x rows per tile
  static constexpr int kSn = 3;  // W rows per tile

  template <DType DT, int MM>
  static void tile(const float* x, int64_t ldx, const char* const rows[kSn], int64_t K,
                   const float bias[kSn], float* y, int64_t ldy, int nv, const char* pf,
                   int64_t pf_bytes) {
    static_assert(DT == DType::BF16);
    const uint16_t* w[kSn];
    for (int j = 0; j < kSn; ++j) w[j] = reinterpret_cast<const uint16_t*>(rows[j]);
    __m256 acc[MM][kSn];
#pragma GCC unroll 3
    for (int m = 0; m < MM; ++m)
#pragma GCC unroll 3
      for (int j = 0; j < kSn; ++j) acc[m][j] = _mm256_setzero_ps();
    const __m256i high = _mm256_set1_epi32(int32_t(0xFFFF0000u));
    // The next rows' prefetch, two lines a step while any are left: a tile's share of the
    // rows' kSn * K / 32 lines never exceeds 2 per 16-element step (kSn <= 4); what is left
    // (rows with padding between them) goes after the loop. (A plain pointer compare: the general SpreadPrefetch's per-step
    // arithmetic cost this loop 7-15% when it ran here.)
    static_assert(kSn <= 4);
    const char* pf_next = pf;
    const char* const pf_end = pf ? pf + pf_bytes : nullptr;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
      if (pf_next < pf_end) {
        _mm_prefetch(pf_next, _MM_HINT_T0);
        _mm_prefetch(pf_next + 64, _MM_HINT_T0);
        pf_next += 128;
      }
      // W row by W row: its 16 elements loaded once and split into the even and the odd
      // half; x comes from L1 as the FMAs' memory operand. 9 accumulators + 4 registers
      // (keeping x in registers across the W rows ran out of AVX2's 16 and spilled).
#pragma GCC unroll 3
      for (int j = 0; j < kSn; ++j) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[j] + k));
        const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));  // elements k + 2i
        const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(raw, high));  // k + 2i + 1
#pragma GCC unroll 3
        for (int m = 0; m < MM; ++m) {
          acc[m][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + m * ldx + k), we, acc[m][j]);
          acc[m][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + m * ldx + k + 8), wo, acc[m][j]);
        }
      }
    }
    // The K % 16 tail, unpermuted in x: 8 wide, then masked.
    for (; k < K; k += 8) {
      const int64_t n = std::min<int64_t>(8, K - k);
      const __m256i mask = tail_mask(n);
      __m256 wv[kSn];
#pragma GCC unroll 3
      for (int j = 0; j < kSn; ++j)
        wv[j] = n == 8 ? Load<DT>::full(w[j] + k) : Load<DT>::partial(w[j] + k, n);
#pragma GCC unroll 3
      for (int m = 0; m < MM; ++m) {
        const __m256 xv = _mm256_maskload_ps(x + m * ldx + k, mask);
#pragma GCC unroll 3
        for (int j = 0; j < kSn; ++j) acc[m][j] = _mm256_fmadd_ps(xv, wv[j], acc[m][j]);
      }
    }
    for (; pf_next < pf_end; pf_next += 64) _mm_prefetch(pf_next, _MM_HINT_T0);
#pragma GCC unroll 3
    for (int m = 0; m < MM; ++m)
      for (int j = 0; j < nv; ++j) y[m * ldy + j] = bias[j] + hsum(acc[m][j]);
  }
};

// bf16 W with at least one 16-element pair step: the pair tiles (x permuted once per call
// into this thread's scratch slot 1, the GEMM's x panel, which the skinny path leaves
// unused); other dtypes and K < 16 the plain tiles.
void skinny(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
            float* y, int64_t ldy, int64_t n0, int64_t n1) {
  if (w.dtype == DType::BF16 && w.cols >= 16) {
    float* xp = thread_scratch(1, size_t(M * w.cols));
    permute_pairs(x, M, ldx, w.cols, xp);
    return skinny_task_t<SkinnyBf16Pairs, DType::BF16>(xp, M, w.cols, w, bias, y, ldy, n0, n1);
  }
  skinny_task<Skinny>(x, M, ldx, w, bias, y, ldy, n0, n1);
}

void gemm(const float* x, int64_t ldx, const WeightView& w, const float* bias, float* y,
          int64_t ldy, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  gemm_task<Avx2Gemm>(x, ldx, w, bias, y, ldy, m0, m1, n0, n1);
}

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels k = [] {
    Kernels r{gemv,           gemm,          widen, Avx2Gemm::kMr, Avx2Gemm::kNr,
              Avx2Gemm::kNcStrips, skinny, skinny_max_rows_for(false)};
    r.skinny_min_rows_bf16 = skinny_min_rows_bf16_for(false);  // the pair tiles
    return r;
  }();
  return k;
}

}  // namespace cpinfer::linear_impl
