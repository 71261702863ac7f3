// The packed GEMM over bf16 weights with bf16 dot products (AVX512_BF16, vdpbf16ps): for
// prefill-sized M on CPUs whose bf16 dot unit outruns their f32 FMAs (Zen 4: twice the
// multiply-adds per cycle; Zen 5: 1.85x in `bench peak`). Same loop nest and driver as the f32 GEMM (linear_driver.h);
// what differs is the panel format and the microkernel:
//   * W panel: bf16 pairs, never widened. Word (kp, j) of a strip holds the two weights
//     W[row0 + j, k0 + 2 kp] (low half) and W[row0 + j, k0 + 2 kp + 1] (high half), so a
//     strip is [ceil(kc / 2)][32] words; an odd kc pads its last pair with 0.
//   * x tile: rounded to bf16 (round to nearest even, vcvtne2ps2bf16) in the same pairs:
//     word (kp, i) = (x[i, k0 + 2 kp], x[i, k0 + 2 kp + 1]).
//   * Microkernel: 14 x 32 outputs in 28 f32 accumulators; per pair of K, one vdpbf16ps
//     per accumulator adds x[i, 2kp] W[j, 2kp] + x[i, 2kp + 1] W[j, 2kp + 1] (the products
//     of two bf16 values are exact in f32, the sums are f32).
// Numerics: exactly the f32 GEMM of x rounded to bf16 (relative error <= 2^-8 per
// activation: 8 significant bits) against the stored weights; linear_test checks it against a float64
// reference on the rounded x with the f32 GEMM's tolerance. The instruction treats
// subnormal inputs and results as zero.
// Example (kc = 5, one strip, rows 0..31): kp 0 holds (W[j,0], W[j,1]), kp 1 (W[j,2], W[j,3]),
// kp 2 (W[j,4], 0); x word (2, i) = (bf16(x[i,4]), 0).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/avx512_reduce.h"
#include "kernels/avx512_transpose.h"
#include "kernels/elementwise_impl.h"
#include "kernels/linear_driver.h"
#include "kernels/linear_impl.h"

namespace cpinfer::linear_impl {

namespace {

inline __mmask16 mask16(int64_t n) { return __mmask16((1u << n) - 1u); }
inline __mmask32 mask32(int64_t n) { return n >= 32 ? ~__mmask32(0) : __mmask32((1u << n) - 1u); }

struct Bf16DotGemm {
  static constexpr int kMr = 14;
  static constexpr int kNr = 32;
  // A panel of 16 strips x 768 K of bf16 is 768 KB, the f32 GEMM's 384 K in f32 bytes
  // (1024 K x 8 strips was slower end to end in one run: more x packing per W).
  static constexpr int kKcMax = 768;
  static constexpr int kNcStrips = 16;

  // Words dst[kp * 32 + j0 + j] for j < 16, kp < ceil(kc / 2): bf16 pairs of rows
  // row0 + j of w (see the top of the file); rows past `rows` and the pad of an odd kc are
  // zero. Blocks of 32 K (16 pairs) of 16 rows are transposed as 32-bit words in registers.
  static void pack_half(const WeightView& w, int64_t row0, int rows, int64_t k0, int64_t kc,
                        uint32_t* dst, int j0) {
    const auto* base = static_cast<const uint16_t*>(w.data);
    rows = std::max(0, std::min(16, rows));
    for (int64_t k = 0; k < kc; k += 32) {
      const int cnt = int(std::min<int64_t>(32, kc - k));
      const __mmask32 m = mask32(cnt);
      __m512 r[16];
      for (int i = 0; i < rows; ++i)
        r[i] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(m, base + (row0 + i) * w.ld + k0 + k));
      for (int i = rows; i < 16; ++i) r[i] = _mm512_setzero_ps();
      transpose16(r);  // r[p] = pair p of rows 0..15
      const int pairs = (cnt + 1) / 2;
      for (int p = 0; p < pairs; ++p)
        _mm512_store_ps(reinterpret_cast<float*>(dst + (k / 2 + p) * kNr + j0), r[p]);
    }
  }

  // A strip of 32 W rows row0 .. row0 + 31 (rows past rows_valid zero).
  static void pack_w(const WeightView& w, int64_t row0, int rows_valid, int64_t k0, int64_t kc,
                     float* dst) {
    auto* d = reinterpret_cast<uint32_t*>(dst);
    pack_half(w, row0, rows_valid, k0, kc, d, 0);
    pack_half(w, row0 + 16, rows_valid - 16, k0, kc, d, 16);
  }

  // Words xp[kp * mr + i] = (bf16(x[i, 2kp]), bf16(x[i, 2kp + 1])), i < mr (<= 16),
  // kp < ceil(kc / 2). Example, mr 14: the block of K 0..31 is 16 pairs of 14 rows; its
  // pair 3 (x[0..13, 6..7]) goes to words xp[42 .. 55].
  static void pack_x(const float* x, int64_t ldx, int mr, int64_t kc, float* xp_f) {
    auto* xp = reinterpret_cast<uint32_t*>(xp_f);
    const __mmask16 lanes = mask16(mr);
    for (int64_t k = 0; k < kc; k += 32) {
      const int cnt = int(std::min<int64_t>(32, kc - k));
      const __mmask16 lo = mask16(std::min(cnt, 16)), hi = mask16(std::max(cnt - 16, 0));
      __m512 r[16];
      for (int i = 0; i < mr; ++i) {
        const float* row = x + i * ldx + k;
        // 32 bf16 in K order: elements 0..15 from the second operand, 16..31 from the first.
        r[i] = (__m512)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, row + 16),
                                           _mm512_maskz_loadu_ps(lo, row));
      }
      for (int i = mr; i < 16; ++i) r[i] = _mm512_setzero_ps();
      transpose16(r);
      const int pairs = (cnt + 1) / 2;
      for (int p = 0; p < pairs; ++p)
        _mm512_mask_storeu_ps(reinterpret_cast<float*>(xp + (k / 2 + p) * mr), lanes, r[p]);
    }
  }

  // Outputs of the tile: columns 0..15 at y0[i * ldy + j], columns 16..31 at
  // y1[i * ldy + j - 16] (y1 = y0 + 16 for a plain GEMM; the gate/up kernel points them at
  // the gate and the up halves of its rows), nv0 / nv1 of each valid. act: when not null
  // (the gate/up kernel's last K block), act[i * ld_act + j] = silu(col j) * col 16 + j for
  // j < nv0 (the elementwise kernel's silu_mul, so the result is bit for bit the unfused
  // one's) instead of storing y.
  struct Out {
    float* y0;
    float* y1;
    int64_t ldy;
    int nv0, nv1;
    float* act = nullptr;
    int64_t ld_act = 0;
    void (*silu_mul)(const float*, const float*, int64_t, float*) = nullptr;
  };

  // y[i, :] (+)= sum_kp dot(xp word (kp, i), wp words (kp, :)), i < MR (see Out).
  template <int MR>
  static void micro_t(int64_t kc, const uint32_t* xp, const uint32_t* wp, const Out& o,
                      const float* bias, bool accumulate) {
    const __mmask16 m0 = mask16(std::min(o.nv0, 16)), m1 = mask16(std::min(o.nv1, 16));
    __m512 c0[MR], c1[MR];
    if (accumulate) {
#pragma GCC unroll 14
      for (int i = 0; i < MR; ++i) {
        c0[i] = _mm512_maskz_loadu_ps(m0, o.y0 + i * o.ldy);
        c1[i] = _mm512_maskz_loadu_ps(m1, o.y1 + i * o.ldy);
      }
    } else {
      const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
      const __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 14
      for (int i = 0; i < MR; ++i) {
        c0[i] = b0;
        c1[i] = b1;
      }
    }
    const int64_t pairs = (kc + 1) / 2;
    for (int64_t kp = 0; kp < pairs; ++kp) {
      const __m512bh w0 = (__m512bh)_mm512_load_si512(wp);
      const __m512bh w1 = (__m512bh)_mm512_load_si512(wp + 16);
#pragma GCC unroll 14
      for (int i = 0; i < MR; ++i) {
        const __m512bh a = (__m512bh)_mm512_set1_epi32(int(xp[i]));
        c0[i] = _mm512_dpbf16_ps(c0[i], a, w0);
        c1[i] = _mm512_dpbf16_ps(c1[i], a, w1);
      }
      wp += kNr;
      xp += MR;
    }
    if (o.act) {
      alignas(64) float g[16], u[16];
      for (int i = 0; i < MR; ++i) {
        _mm512_store_ps(g, c0[i]);
        _mm512_store_ps(u, c1[i]);
        o.silu_mul(g, u, o.nv0, o.act + i * o.ld_act);
      }
      return;
    }
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      _mm512_mask_storeu_ps(o.y0 + i * o.ldy, m0, c0[i]);
      _mm512_mask_storeu_ps(o.y1 + i * o.ldy, m1, c1[i]);
    }
  }

  static void micro_out(int mr, int64_t kc, const float* xp, const float* wp, const Out& o,
                        const float* bias, bool accumulate) {
    using Fn = void (*)(int64_t, const uint32_t*, const uint32_t*, const Out&, const float*, bool);
    static constexpr auto table =
        rows_table<kMr, Fn>([](auto r) -> Fn { return &micro_t<r()>; });
    table[size_t(mr - 1)](kc, reinterpret_cast<const uint32_t*>(xp),
                          reinterpret_cast<const uint32_t*>(wp), o, bias, accumulate);
  }

  // The driver's microkernel: a plain 32-column tile.
  static void micro(int mr, int64_t kc, const float* xp, const float* wp, float* y, int64_t ldy,
                    int nv, const float* bias, bool accumulate) {
    micro_out(mr, kc, xp, wp, Out{y, y + 16, ldy, std::min(nv, 16), std::max(nv - 16, 0)},
              bias, accumulate);
  }
};

void gemm(const float* x, int64_t ldx, const WeightView& w, const float* bias, float* y,
          int64_t ldy, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  // A fused call may pass parts of other dtypes: the f32 GEMM has the same tile, so the
  // caller's strip split holds for it too.
  if (w.dtype != DType::BF16) return avx512_kernels().gemm(x, ldx, w, bias, y, ldy, m0, m1, n0, n1);
  gemm_task<Bf16DotGemm>(x, ldx, w, bias, y, ldy, m0, m1, n0, n1);
}

// act[0:M, c0:c1] = silu(x gate[c]^T) * (x up[c]^T) for features c in [c0, c1) (F = gate
// rows), gu [M, 2F] holding the partial sums between K blocks (gate at column c, up at
// F + c) exactly where the unfused path keeps them. The loop nest of gemm_task, with strips
// of 16 features: strip s packs gate rows c .. c + 15 into words 0..15 and up rows c .. c+15
// into words 16..31, so one tile holds both halves of each feature and the last K block
// applies silu_mul to the registers (gu is then not written; the unfused path writes gu,
// reads it back and writes act). Same K blocks and summation order as gemm_task, so act is
// bit for bit the unfused result. Example: c0 = 32, c1 = 64, F = 4864: strip 0 is features
// 32..47 (gate rows 32..47, up rows 32..47), strip 1 features 48..63.
void gate_up_silu(const float* x, int64_t ldx, const WeightView& gate, const WeightView& up,
                  float* gu, float* act, int64_t M, int64_t c0, int64_t c1) {
  using G = Bf16DotGemm;
  if (gate.dtype != DType::BF16 || up.dtype != DType::BF16) {
    return gate_up_silu_unfused(avx512_kernels(), x, ldx, gate, up, gu, act, M, c0, c1);
  }
  constexpr int64_t SF = 16;  // features per strip
  const int64_t F = gate.rows, K = gate.cols;
  const auto silu_mul = elementwise_impl::avx512_kernels().silu_mul;
  const int64_t k_blocks = ceil_div<int64_t>(K, G::kKcMax);
  const int64_t kc_max = ceil_div(K, k_blocks);
  const int64_t strips = ceil_div(c1 - c0, SF);
  const int64_t n_chunks = ceil_div<int64_t>(strips, G::kNcStrips);
  const int64_t chunk_strips_max = ceil_div(strips, n_chunks);
  const int64_t m_tiles = ceil_div<int64_t>(M, G::kMr);
  float* wpack = thread_scratch(0, size_t(chunk_strips_max * G::kNr * kc_max));
  float* xpack = thread_scratch(1, size_t(G::kMr * kc_max));
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    const int64_t s0 = split_point(strips, n_chunks, ch), s1 = split_point(strips, n_chunks, ch + 1);
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const int64_t k0 = split_point(K, k_blocks, kb);
      const int64_t kc = split_point(K, k_blocks, kb + 1) - k0;
      const bool last = kb + 1 == k_blocks;
      for (int64_t s = s0; s < s1; ++s) {
        const int64_t c = c0 + s * SF;
        const int nf = int(std::min(SF, c1 - c));
        auto* d = reinterpret_cast<uint32_t*>(wpack + (s - s0) * G::kNr * kc);
        G::pack_half(gate, c, nf, k0, kc, d, 0);
        G::pack_half(up, c, nf, k0, kc, d, 16);
      }
      for (int64_t t = 0; t < m_tiles; ++t) {
        const int64_t ma = split_point(M, m_tiles, t);
        const int mr = int(split_point(M, m_tiles, t + 1) - ma);
        G::pack_x(x + ma * ldx + k0, ldx, mr, kc, xpack);
        for (int64_t s = s0; s < s1; ++s) {
          const int64_t c = c0 + s * SF;
          const int nf = int(std::min(SF, c1 - c));
          G::Out o{gu + ma * 2 * F + c, gu + ma * 2 * F + F + c, 2 * F, nf, nf};
          if (last) {
            o.act = act + ma * F + c;
            o.ld_act = F;
            o.silu_mul = silu_mul;
          }
          G::micro_out(mr, kc, xpack, wpack + (s - s0) * G::kNr * kc, o, nullptr, kb > 0);
        }
      }
    }
  }
}

// ---- skinny tiles (decode batches) ---------------------------------------------------
//
// The f32 skinny tiles' loop nest (skinny_task_t: groups of 4 W rows, tiles of up to 6 x
// rows, the next group prefetched), with the products as bf16 dots: x arrives rounded to
// bf16 and packed by pack_rows_bf16 (rows of bf16_row_stride(K) elements, zero past K), W
// rows are read as stored, 32 elements (one 512-bit load) per step, and one vdpbf16ps per
// (x row, W row) adds 16 pairs of products into that pair's accumulator. Half the
// instructions of the f32 tiles per multiply-add, and no widening of W. Numerics: those of
// the dot GEMM (x rounded to bf16, exact products, f32 sums).
// Example, K 333: steps at k = 0, 32, .., 288 read 32 W elements; the step at k = 320 reads
// W[320..332] through a 13-lane mask (the lanes past K read nothing and hold 0) and the x
// row's elements 320..351 (333..351 are the packing's zeros).

// Packs rows for the tiles: see PackRowsBf16Fn.
void pack_rows_bf16(const float* x, int64_t M, int64_t ldx, int64_t K, uint16_t* dst) {
  const int64_t stride = bf16_row_stride(K);
  for (int64_t m = 0; m < M; ++m) {
    const float* row = x + m * ldx;
    for (int64_t k = 0; k < stride; k += 32) {
      const int64_t left = std::max<int64_t>(0, K - k);
      const __mmask16 lo = mask16(std::min<int64_t>(left, 16));
      const __mmask16 hi = mask16(std::clamp<int64_t>(left - 16, 0, 16));
      // 32 bf16 in K order: elements 0..15 from the second operand, 16..31 from the first.
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, row + k + 16),
                                            _mm512_maskz_loadu_ps(lo, row + k));
      _mm512_storeu_si512(dst + m * stride + k, (__m512i)v);
    }
  }
}

struct Bf16DotSkinny {
  static constexpr int kSm = 6;  // x rows per tile
  static constexpr int kSn = 4;  // W rows per tile: 24 accumulators + 4 W + 1 x register

  // skinny_task_t's tile (linear_driver.h) over bf16 W rows; x: packed rows (see above) with
  // a stride of 2 ldx bf16 elements.
  template <DType DT, int MM>
  static void tile(const float* x, int64_t ldx, const char* const rows[kSn], int64_t K,
                   const float bias[kSn], float* y, int64_t ldy, int nv, const char* pf,
                   int64_t pf_bytes) {
    static_assert(DT == DType::BF16, "the dot tiles read bf16 weights only");
    const auto* xb = reinterpret_cast<const uint16_t*>(x);
    const int64_t xstride = 2 * ldx;
    const uint16_t* w[kSn];
    for (int j = 0; j < kSn; ++j) w[j] = reinterpret_cast<const uint16_t*>(rows[j]);
    __m512 acc[MM][kSn];
#pragma GCC unroll 6
    for (int m = 0; m < MM; ++m)
#pragma GCC unroll 4
      for (int j = 0; j < kSn; ++j) acc[m][j] = _mm512_setzero_ps();
    SpreadPrefetch prefetch(pf, pf_bytes, (K + 31) / 32);  // over the K loop's steps
    // One step: 32 elements of K for every (x row, W row) pair.
    auto step_at = [&](int64_t k, const __m512bh wv[kSn]) {
#pragma GCC unroll 6
      for (int m = 0; m < MM; ++m) {
        const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + m * xstride + k);
#pragma GCC unroll 4
        for (int j = 0; j < kSn; ++j) acc[m][j] = _mm512_dpbf16_ps(acc[m][j], xv, wv[j]);
      }
    };
    int64_t k = 0, step = 0;
    for (; k + 32 <= K; k += 32, ++step) {
      prefetch.at(step);
      __m512bh wv[kSn];
#pragma GCC unroll 4
      for (int j = 0; j < kSn; ++j) wv[j] = (__m512bh)_mm512_loadu_si512(w[j] + k);
      step_at(k, wv);
    }
    if (k < K) {
      const __mmask32 mask = mask32(K - k);
      __m512bh wv[kSn];
#pragma GCC unroll 4
      for (int j = 0; j < kSn; ++j) wv[j] = (__m512bh)_mm512_maskz_loadu_epi16(mask, w[j] + k);
      step_at(k, wv);
    }
    prefetch.rest();
    store_tile_sums<MM>(acc, bias, y, ldy, nv);
  }
};

// Kernels::skinny_bf16. A fused call may pass parts of other dtypes: those get the packed
// rows widened back to f32 (the same rounded values) and the f32 skinny tiles.
void skinny_bf16(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
                 float* y, int64_t ldy, int64_t n0, int64_t n1) {
  if (w.dtype == DType::BF16)
    return skinny_task_t<Bf16DotSkinny, DType::BF16>(x, M, ldx, w, bias, y, ldy, n0, n1);
  const int64_t stride = 2 * ldx;
  float* wide = thread_scratch(1, size_t(M * stride));
  const Kernels& f32 = avx512_kernels();
  for (int64_t m = 0; m < M; ++m)
    f32.widen(reinterpret_cast<const uint16_t*>(x) + m * stride, DType::BF16, stride,
              wide + m * stride);
  f32.skinny(wide, M, stride, w, bias, y, ldy, n0, n1);
}

}  // namespace

// Called only where the CPU has AVX512_BF16 (linear.cpp checks bf16_dot_supported() first).
const Kernels& avx512_bf16_dot_kernels() {
  // The GEMV, f32 skinny tiles and widening of the f32 table; the GEMM differs, and the
  // table adds the dot skinny tiles.
  static const Kernels k = [] {
    Kernels t = avx512_kernels();
    static_assert(Bf16DotGemm::kNr == 32 && Bf16DotGemm::kMr == 14,
                  "the f32 fallback in gemm() assumes the f32 GEMM's tile");
    t.gemm = gemm;
    t.gate_up_silu = gate_up_silu;
    t.skinny_bf16 = skinny_bf16;
    t.pack_rows_bf16 = pack_rows_bf16;
    t.mr = Bf16DotGemm::kMr;
    t.nr = Bf16DotGemm::kNr;
    t.nc_strips = Bf16DotGemm::kNcStrips;
    return t;
  }();
  return k;
}

}  // namespace cpinfer::linear_impl
