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
//
// The GEMM (prefill, and decode batches from 5 rows: choose_path) on the same products, with
// gemm_task's loop nest
// (linear_driver.h) and its own panel and tile formats:
//   * W panel: a strip of 16 W rows, per 32-element block 576 bytes: 8 vectors whose lane j
//     holds the 4 weights W[row0 + j, 4 g .. 4 g + 3] of word g (g = 0..7) as unsigned bytes
//     w + 128 (w XOR 0x80), then the 16 rows' scales dw as f32.
//   * x tile: per block and row 10 words: the row's 32 q as 8 words, -128 * sum(q), and its
//     scale dx (f32 bits); records in block-major order, (b * mr + i) * 10.
//   * Microkernel: 12 x 16 outputs; per block and row an int32 vector starts at
//     -128 sum(q) and takes 8 vpdpbusd of a W vector by the row's word g broadcast:
//     sum_j (w_j + 128) q_j - 128 sum_j q_j = sum_j w_j q_j, exact; then one conversion and
//     one FMA by dw * dx into the row's f32 accumulator.
// Example, W rows 0..15, block 0, word 2: lane 5 of vector 2 holds W[5, 8..11] + 128.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/avx512_transpose.h"
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

inline __mmask16 mask16(int n) { return __mmask16((1u << n) - 1u); }

struct GemmInt8 {
  static constexpr bool kPackedRows = true;
  static constexpr int kMr = 12;
  static constexpr int kNr = 16;
  // K blocks of up to 1024 (32 Q8_0 blocks: 18 KB of panel per strip), 32 strips (512 W
  // rows, ~590 KB) per panel: the panel stays in L2, a tile's x (12 KB) in L1.
  static constexpr int kKcMax = 1024;
  static constexpr int kNcStrips = 32;
  static constexpr int64_t kPanelBlockBytes = 8 * 64 + 16 * 4;
  static constexpr int kXWords = 10;  // per block and x row: 8 words of q, -128 sum q, dx

  // The strip of W rows row0 .. row0 + 15 (rows past `rows` zero, scale 0) over columns
  // [k0, k0 + kc), whole blocks: see the top of the file.
  static void pack_w_q8_0(const WeightView& w, int64_t row0, int rows, int64_t k0, int64_t kc,
                          float* dst) {
    const auto* base = static_cast<const char*>(w.data);
    const int64_t ld_bytes = w.ld / kQ8BlockElems * kQ8BlockBytes;
    auto* out = reinterpret_cast<char*>(dst);
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    for (int64_t b = 0; b < kc / kQ8BlockElems; ++b, out += kPanelBlockBytes) {
      const int64_t block_offset = (k0 / kQ8BlockElems + b) * kQ8BlockBytes;
      __m512 r[16];
      alignas(64) float scales[16];
      for (int j = 0; j < 16; ++j) {
        if (j < rows) {
          const char* blk = base + (row0 + j) * ld_bytes + block_offset;
          r[j] = _mm512_castsi512_ps(_mm512_zextsi256_si512(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2))));
          uint16_t d_bits;
          std::memcpy(&d_bits, blk, 2);
          scales[j] = _cvtsh_ss(d_bits);
        } else {
          r[j] = _mm512_setzero_ps();
          scales[j] = 0.0f;
        }
      }
      transpose16(r);  // r[g] = word g of rows 0..15 (g < 8; the rest is zero)
      for (int g = 0; g < 8; ++g)
        _mm512_store_si512(out + 64 * g, _mm512_xor_si512(_mm512_castps_si512(r[g]), flip));
      _mm512_store_ps(reinterpret_cast<float*>(out + 8 * 64), _mm512_load_ps(scales));
    }
  }

  // The x tile: rows x_row0 .. + mr of q8_act_rows' packed rows (stride ldx floats, K
  // columns), columns [k0, k0 + kc): see the top of the file.
  static void pack_x_rows(const float* x_row0, int64_t ldx, int64_t K, int mr, int64_t k0,
                          int64_t kc, float* xp_f) {
    auto* xp = reinterpret_cast<int32_t*>(xp_f);
    for (int i = 0; i < mr; ++i) {
      const float* row = x_row0 + i * ldx;
      const auto* q = reinterpret_cast<const int8_t*>(row) + k0;
      const float* d = row + K / 4 + k0 / kQ8BlockElems;
      for (int64_t b = 0; b < kc / kQ8BlockElems; ++b) {
        int32_t* rec = xp + (b * mr + i) * kXWords;
        const int8_t* qb = q + b * kQ8BlockElems;
        std::memcpy(rec, qb, kQ8BlockElems);
        int32_t sum = 0;
        for (int j = 0; j < kQ8BlockElems; ++j) sum += qb[j];
        rec[8] = -128 * sum;
        std::memcpy(rec + 9, d + b, 4);
      }
    }
  }

  template <int MR>
  static void micro_t(int64_t kc, const int32_t* xp, const char* wp, float* y, int64_t ldy,
                      int nv, const float* bias, bool accumulate) {
    const __mmask16 m = mask16(nv);
    __m512 acc[MR];
    const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m, bias) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i)
      acc[i] = accumulate ? _mm512_maskz_loadu_ps(m, y + i * ldy) : b0;
    for (int64_t b = 0; b < kc / kQ8BlockElems; ++b, wp += kPanelBlockBytes, xp += MR * kXWords) {
      __m512i s[MR];
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) s[i] = _mm512_set1_epi32(xp[i * kXWords + 8]);
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m512i wv = _mm512_load_si512(wp + 64 * g);
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i)
          s[i] = _mm512_dpbusd_epi32(s[i], wv, _mm512_set1_epi32(xp[i * kXWords + g]));
      }
      const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(wp + 8 * 64));
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        float dx;
        std::memcpy(&dx, xp + i * kXWords + 9, 4);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i]), _mm512_mul_ps(dw, _mm512_set1_ps(dx)),
                                 acc[i]);
      }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + i * ldy, m, acc[i]);
  }

  static void micro(int mr, int64_t kc, const float* xp, const float* wp, float* y, int64_t ldy,
                    int nv, const float* bias, bool accumulate) {
    using Fn = void (*)(int64_t, const int32_t*, const char*, float*, int64_t, int, const float*,
                        bool);
    static constexpr auto table =
        rows_table<kMr, Fn>([](auto r) -> Fn { return &micro_t<r()>; });
    table[size_t(mr - 1)](kc, reinterpret_cast<const int32_t*>(xp),
                          reinterpret_cast<const char*>(wp), y, ldy, nv, bias, accumulate);
  }
};

void gemm_int8_dot(const float* x, int64_t ldx, const WeightView& w, const float* bias, float* y,
                   int64_t ldy, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  CPI_CHECK(w.dtype == DType::Q8_0, "the int8-dot GEMM reads Q8_0 weights, not {}",
            dtype_name(w.dtype));
  gemm_task<GemmInt8>(x, ldx, w, bias, y, ldy, m0, m1, n0, n1);
}

}  // namespace

// Called only where the CPU has AVX512_VNNI (linear.cpp checks int8_dot_supported() first).
const Kernels& avx512_int8_dot_kernels() {
  // The f32 table's kernels, with the int8-dot GEMM and its tile.
  static const Kernels k = [] {
    Kernels t = avx512_kernels();
    t.gemm = gemm_int8_dot;
    t.gate_up_silu = nullptr;  // gate_up_silu_unfused over this table's GEMM
    t.mr = GemmInt8::kMr;
    t.nr = GemmInt8::kNr;
    t.nc_strips = GemmInt8::kNcStrips;
    return t;
  }();
  return k;
}

void gemv_int8_dot(const float* x, int64_t M, int64_t ldx, const WeightView& w,
                   const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  CPI_CHECK(w.dtype == DType::Q8_0, "the int8-dot GEMV reads Q8_0 weights, not {}",
            dtype_name(w.dtype));
  gemv_task_t<GemvInt8, DType::Q8_0>(x, M, ldx, w, bias, y, ldy, n0, n1);
}

}  // namespace cpinfer::linear_impl
