// AVX-512 decode attention: tasks of at most 8 query lanes per KV head (one decode row of a
// GQA group, or a few rows of a short causal tail) with head_dim a multiple of 32, over every
// KV head of the task at once (each KV tile's rows are found once and read whole).
//
// One driver (run_decode), two kinds of arithmetic:
//   Wide (f32 or bf16 cache): f32 FMAs on full vectors whatever the lane count: Q.K with 16
//     tokens per vector (K blocks transposed in registers, q values broadcast), P.V with the
//     head dimension in the vector (each weight broadcast against the widened V row); bf16
//     -> f32 is one shift or one AND per 16 values. Exact f32 arithmetic on the stored K/V.
//   Dot (bf16 cache, AVX512_BF16): vdpbf16ps with Q and P rounded to bf16 (below). It is
//     used where the CPU's bf16 dot unit outruns its f32 FMAs (bf16_dot_preferred).
// The online softmax (two tokens per zmm) is shared.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/attention_avx512_vec.h"

namespace cpinfer::attention_impl::avx512 {

namespace {

using vec::kAccRegs;
using vec::Y8;
using vec::Z16;

#include "kernels/attention_flash.inc"

#include "kernels/attention_decode_driver.inc"

// Dot keeps a tile's scores and weights in S [n][kLanes]: lane m of token n at S[n * 8 + m].
// The online softmax of flash::softmax_tile for 8 lanes, two tokens per zmm (S^T rows n and
// n + 1 are adjacent: lanes 0-7 token n, 8-15 token n + 1): half the instructions of ymm.
// A lone last token gets -inf in its upper half (so P = 0 there; S row nv is scratch).
void softmax8(float* S, int64_t nv, bool masked, int64_t j0, const float* lim, float* mrow,
              float* lrow, float* corr) {
  const __m256 mo = _mm256_loadu_ps(mrow);
  const __m512 limz = _mm512_broadcast_f32x8(_mm256_loadu_ps(lim));
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  const int64_t np = (nv + 1) / 2;
  __m512 mx = ninf;
  for (int64_t p = 0; p < np; ++p) {
    __m512 x = _mm512_loadu_ps(S + 2 * p * 8);
    if (2 * p + 1 == nv) x = _mm512_mask_blend_ps(__mmask16(0xFF00), x, ninf);
    if (masked) {
      const __m512 j = _mm512_mask_blend_ps(__mmask16(0xFF00), _mm512_set1_ps(float(j0 + 2 * p)),
                                            _mm512_set1_ps(float(j0 + 2 * p + 1)));
      x = Z16::mask_gt(x, j, limz);
    }
    _mm512_storeu_ps(S + 2 * p * 8, x);
    mx = _mm512_max_ps(mx, x);
  }
  const __m256 mn = _mm256_max_ps(mo, _mm256_max_ps(_mm512_castps512_ps256(mx),
                                                    _mm512_extractf32x8_ps(mx, 1)));
  const __m256 ms = Y8::safe(mn);
  const __m256 c = Y8::exp2(_mm256_sub_ps(mo, ms));
  const __m512 msz = _mm512_broadcast_f32x8(ms);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t p = 0; p < np; ++p) {
    const __m512 e = Z16::exp2(_mm512_sub_ps(_mm512_loadu_ps(S + 2 * p * 8), msz));
    _mm512_storeu_ps(S + 2 * p * 8, e);
    sum = _mm512_add_ps(sum, e);
  }
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(sum), _mm512_extractf32x8_ps(sum, 1));
  _mm256_storeu_ps(lrow, _mm256_fmadd_ps(_mm256_loadu_ps(lrow), c, s8));
  _mm256_storeu_ps(mrow, mn);
  _mm256_storeu_ps(corr, c);
}

// ---- Wide: f32 FMAs along the head dimension --------------------------------------------

// How a 32-value chunk of a cache row is widened into two f32 vectors a, b, and which head
// dimension index d each position p = 32 c + 16 e + i of a widened row holds (e = 0 for a,
// 1 for b; i the lane). P.V accumulates O in this order, so V rows are widened without
// shuffles; O is put back in d order when it is written.
//   bf16: one 64-byte load, a = the even values (shifted into the f32 top half), b = the odd
//         ones (masked): d = 32 c + 2 i + e. Example: p = 17 (c 0, e 1, i 1) is d = 3.
//   f32:  two 64-byte loads: d = p.
struct KvBf16 {
  using E = uint16_t;
  static void load(const E* p, __m512& a, __m512& b) { Z16::load_bf16_evenodd(p, a, b); }
  static int64_t d_of(int64_t p) { return p / 32 * 32 + 2 * (p % 16) + (p % 32) / 16; }
};
struct KvF32 {
  using E = float;
  static void load(const E* p, __m512& a, __m512& b) {
    a = _mm512_loadu_ps(p);
    b = _mm512_loadu_ps(p + 16);
  }
  static int64_t d_of(int64_t p) { return p; }
};

// The 16 x 16 transpose of 32-bit elements: t[i] lane j -> t[j] lane i (row i, column j).
//   1: unpack{lo,hi}_epi32 of row pairs; 2: unpack{lo,hi}_epi64 of those: t[4i + k] holds, in
//      128-bit quarter Q, rows 4i .. 4i + 3 of column 4Q + k;
//   3, 4: 128-bit shuffles gather quarter Q of t[k], t[4 + k], t[8 + k], t[12 + k] into column
//      4Q + k. Example: column 6 (Q 1, k 2) = quarters 1 of t[2], t[6], t[10], t[14].
// 64 shuffles for 256 elements (the reduction of 16 dot products would take 36 for 16).
inline void transpose16(__m512i* t) {
  __m512i u[16];
  for (int i = 0; i < 8; ++i) {
    u[2 * i] = _mm512_unpacklo_epi32(t[2 * i], t[2 * i + 1]);
    u[2 * i + 1] = _mm512_unpackhi_epi32(t[2 * i], t[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    t[4 * i] = _mm512_unpacklo_epi64(u[4 * i], u[4 * i + 2]);
    t[4 * i + 1] = _mm512_unpackhi_epi64(u[4 * i], u[4 * i + 2]);
    t[4 * i + 2] = _mm512_unpacklo_epi64(u[4 * i + 1], u[4 * i + 3]);
    t[4 * i + 3] = _mm512_unpackhi_epi64(u[4 * i + 1], u[4 * i + 3]);
  }
  constexpr int kEven = _MM_SHUFFLE(2, 0, 2, 0), kOdd = _MM_SHUFFLE(3, 1, 3, 1);
  for (int k = 0; k < 4; ++k) {
    const __m512i x = _mm512_shuffle_i32x4(t[k], t[4 + k], kEven);
    const __m512i y = _mm512_shuffle_i32x4(t[k], t[4 + k], kOdd);
    const __m512i x2 = _mm512_shuffle_i32x4(t[8 + k], t[12 + k], kEven);
    const __m512i y2 = _mm512_shuffle_i32x4(t[8 + k], t[12 + k], kOdd);
    t[k] = _mm512_shuffle_i32x4(x, x2, kEven);
    t[8 + k] = _mm512_shuffle_i32x4(x, x2, kOdd);
    t[4 + k] = _mm512_shuffle_i32x4(y, y2, kEven);
    t[12 + k] = _mm512_shuffle_i32x4(y, y2, kOdd);
  }
}

// M lanes (1..8), known at compile time so that the accumulators stay in registers.
//   QK: 16 tokens per vector. A block of 16 K rows x 32 head-dim values is transposed in
//       registers (bf16: one 16 x 16 transpose of value pairs, then even / odd values widened
//       by a shift / an AND; f32: two transposes), then S[g][n0 .. n0 + 16) += K^T[d] q_g[d]
//       with q_g[d] broadcast from memory: 2 FMAs per lane per value pair, no reductions.
//       A accumulator sets (consecutive transposed columns alternate between them; more sets
//       when M is small) keep
//       >= 8 FMA chains in flight (A = 2 at M = 7 measured 4% faster than 1).
//   Softmax per lane along the tokens (S [8][kTileN]: lane g's scores in row g).
//   PV: M x 2 accumulators per 32 columns of O (position order, Kv::d_of), P[g][n]
//       broadcast against the widened V row; U interleaved token streams when M is small.
// Q is kept as Q [D][8] (d-major): one pointer per head-dim value, lanes at constant offsets.
template <class Kv, int M>
struct Wide {
  using E = typename Kv::E;
  static constexpr int A = M == 1 ? 8 : M == 2 ? 4 : 2;
  static constexpr int U = M <= 2 ? 4 : M <= 4 ? 2 : 1;
  static constexpr int V = U < 2 ? 2 : U;  // tokens per prefetch step in PV
  static constexpr int64_t kRowQuantum = 16;
  static constexpr bool kRoundedWeights = false;

  static int64_t q_floats(int64_t D) { return kLanes * D; }
  static int64_t qk_steps(int64_t rows, int64_t D) { return rows / 16 * (D / 32); }
  static int64_t pv_steps(int64_t nv, int64_t D) { return (D / 32) * (nv / V + nv % V); }
  static int64_t d_of(int64_t p) { return Kv::d_of(p); }

  // Q [D][8]: qb[d * 8 + g] = q_g[d] * sm_scale * log2 e for lanes g < M.
  static void prep_q(const FlashTask& t, int64_t h, float* qb) {
    const int64_t G = t.group, D = t.head_dim;
    for (int64_t g = 0; g < M; ++g) {
      const float* q = t.q + (g / G) * t.ldq + (h * G + g % G) * D;
      for (int64_t d = 0; d < D; ++d) qb[d * kLanes + g] = q[d] * t.scale_log2;
    }
  }

  // S[g][n] = Q_g . K_n for n < rows (a multiple of 16), g < M.
  static void qk(int64_t rows, int64_t D, const E* const* kr, int64_t off, const float* Q,
                 float* S, flash::LineCursor& pf) {
    for (int64_t n0 = 0; n0 < rows; n0 += 16) {
      __m512 acc[A][M];
#pragma GCC unroll 8
      for (int a = 0; a < A; ++a)
#pragma GCC unroll 8
        for (int g = 0; g < M; ++g) acc[a][g] = _mm512_setzero_ps();
      // Column j of a transposed block (16 tokens) times the lanes' q at head-dim index d.
      auto column = [&](int j, __m512 k, const float* q) {
#pragma GCC unroll 8
        for (int g = 0; g < M; ++g)
          acc[j % A][g] = _mm512_fmadd_ps(k, _mm512_set1_ps(q[g]), acc[j % A][g]);
      };
      for (int64_t c = 0; c < D; c += 32) {
        pf.next();
        __m512i t[16];
        if constexpr (std::is_same_v<E, uint16_t>) {
#pragma GCC unroll 16
          for (int i = 0; i < 16; ++i) t[i] = _mm512_loadu_si512(kr[n0 + i] + off + c);
          transpose16(t);  // t[j]: the value pair (c + 2j, c + 2j + 1) of the 16 tokens
          const __m512i hi = _mm512_set1_epi32(int(0xffff0000u));
#pragma GCC unroll 16
          for (int j = 0; j < 16; ++j) {
            const float* q = Q + (c + 2 * j) * kLanes;
            column(j, _mm512_castsi512_ps(_mm512_slli_epi32(t[j], 16)), q);
            column(j, _mm512_castsi512_ps(_mm512_and_si512(t[j], hi)), q + kLanes);
          }
        } else {
#pragma GCC unroll 2
          for (int64_t h2 = 0; h2 < 32; h2 += 16) {
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i)
              t[i] = _mm512_castps_si512(_mm512_loadu_ps(kr[n0 + i] + off + c + h2));
            transpose16(t);  // t[j]: value c + h2 + j of the 16 tokens
#pragma GCC unroll 16
            for (int j = 0; j < 16; ++j)
              column(j, _mm512_castsi512_ps(t[j]), Q + (c + h2 + j) * kLanes);
          }
        }
      }
#pragma GCC unroll 8
      for (int g = 0; g < M; ++g) {
        __m512 x = acc[0][g];
#pragma GCC unroll 8
        for (int a = 1; a < A; ++a) x = _mm512_add_ps(x, acc[a][g]);
        _mm512_storeu_ps(S + g * kTileN + n0, x);
      }
    }
  }

  // The online softmax of lane g < M over S[g][0, nv): tokens past nv and, when masked,
  // tokens past the lane's limit (j > lim[g]) get -inf; m, l and corr as in softmax8.
  static void softmax(float* S, int64_t nv, bool masked, int64_t j0, const float* lim,
                      float* mrow, float* lrow, float* corr) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const int64_t nvec = (nv + 15) / 16;
    for (int g = 0; g < M; ++g) {
      float* s = S + g * kTileN;
      const __m512 limg = _mm512_set1_ps(lim[g]);
      __m512 mx = ninf;
      for (int64_t v = 0; v < nvec; ++v) {
        __mmask16 keep = 16 * v + 16 <= nv ? __mmask16(0xFFFF)
                                             : __mmask16((1u << (nv - 16 * v)) - 1);
        if (masked) {
          const __m512 j = _mm512_add_ps(_mm512_set1_ps(float(j0 + 16 * v)), iota);
          keep &= _mm512_cmp_ps_mask(j, limg, _CMP_LE_OQ);
        }
        const __m512 x = _mm512_mask_blend_ps(keep, ninf, _mm512_loadu_ps(s + 16 * v));
        _mm512_storeu_ps(s + 16 * v, x);
        mx = _mm512_max_ps(mx, x);
      }
      const float mo = mrow[g], mn = std::max(mo, _mm512_reduce_max_ps(mx));
      const float ms = mn == -INFINITY ? 0.f : mn;
      const float cg = _mm_cvtss_f32(_mm512_castps512_ps128(Z16::exp2(_mm512_set1_ps(mo - ms))));
      const __m512 msv = _mm512_set1_ps(ms);
      __m512 sum = _mm512_setzero_ps();
      for (int64_t v = 0; v < nvec; ++v) {
        const __m512 e = Z16::exp2(_mm512_sub_ps(_mm512_loadu_ps(s + 16 * v), msv));
        _mm512_storeu_ps(s + 16 * v, e);
        sum = _mm512_add_ps(sum, e);
      }
      lrow[g] = lrow[g] * cg + _mm512_reduce_add_ps(sum);
      mrow[g] = mn;
      corr[g] = cg;
    }
  }

  // O_g (position order) (= O_g * corr[g] |+=) sum_{n < nv} P[g][n] V_n, lanes g < M.
  static void pv(int64_t nv, int64_t D, const float* P, uint32_t* /*Pp*/, const E* const* vr,
                 int64_t off, float* O, flash::Acc mode, const float* corr,
                 float* /*lo_sum*/, flash::LineCursor& pf) {
    for (int64_t c = 0; c < D; c += 32) {
      __m512 acc[U][M][2];
#pragma GCC unroll 8
      for (int g = 0; g < M; ++g)
        for (int e = 0; e < 2; ++e) {
          const float* o = O + g * D + c + 16 * e;
          if (mode == flash::Acc::Zero) acc[0][g][e] = _mm512_setzero_ps();
          else if (mode == flash::Acc::Add) acc[0][g][e] = _mm512_loadu_ps(o);
          else acc[0][g][e] = _mm512_mul_ps(_mm512_loadu_ps(o), _mm512_set1_ps(corr[g]));
#pragma GCC unroll 4
          for (int u = 1; u < U; ++u) acc[u][g][e] = _mm512_setzero_ps();
        }
      auto step = [&](int u, int64_t j) {
        __m512 va, vb;
        Kv::load(vr[j] + off + c, va, vb);
#pragma GCC unroll 8
        for (int g = 0; g < M; ++g) {
          const __m512 p = _mm512_set1_ps(P[g * kTileN + j]);
          acc[u][g][0] = _mm512_fmadd_ps(p, va, acc[u][g][0]);
          acc[u][g][1] = _mm512_fmadd_ps(p, vb, acc[u][g][1]);
        }
      };
      int64_t n = 0;
      for (; n + V <= nv; n += V) {
        pf.next();
#pragma GCC unroll 4
        for (int k = 0; k < V; ++k) step(k % U, n + k);
      }
      for (; n < nv; ++n) {
        pf.next();
        step(0, n);
      }
#pragma GCC unroll 8
      for (int g = 0; g < M; ++g)
        for (int e = 0; e < 2; ++e) {
          __m512 x = acc[0][g][e];
#pragma GCC unroll 4
          for (int u = 1; u < U; ++u) x = _mm512_add_ps(x, acc[u][g][e]);
          _mm512_storeu_ps(O + g * D + c + 16 * e, x);
        }
    }
  }
};

// ---- Dot: bf16 dot products ---------------------------------------------------------------

// bf16 dot products for decode over a bf16 cache (AVX512_BF16: vdpbf16ps does 32 products
// per instruction; on CPUs that run it at twice the f32 FMA rate, decode of a bf16 cache is
// faster this way). Q (times sm_scale * log2 e) and P are rounded to bf16 like K and V
// already are, so each score moves by at most 2^-9 sum_d |q_d k_d| * scale (the same order
// as the K storage rounding) and O by at most 2^-9 max|v| (as V's); sums and the softmax
// stay f32. M lanes (1..8) are known at compile time.
//   QK: lanes l = W h + e of a vector (h: lane of the task, e < W: which pair of a chunk of
//       2W K values), W = 2 for M > 4 (8 lanes x 2) and W = 4 for M <= 4 (4 lanes x 4, so
//       no half-empty vectors): one 2W-value broadcast of K_n[2W c .. 2W (c + 1)) and one
//       vdpbf16ps against Qp[c][l] = (q_h[2W c + 2e], q_h[2W c + 2e + 1]) accumulate S_n[h]
//       in lanes W h .. W h + W - 1; they are added at the end, two tokens (W = 2) or four
//       (W = 4) at a time. Example, W = 4, c = 1: lane 6 (h 1, e 2) adds
//       q_1[12] K_n[12] + q_1[13] K_n[13].
//   PV: pairs along n: Pp[p][m] = (P[2p][m], P[2p + 1][m]); V rows 2p and 2p + 1 interleaved
//       by unpacklo/hi_epi16 give 16 (V[2p][d], V[2p+1][d]) pairs per vector. Within each
//       32-column chunk at c, lo vector lane j is d = c + 8 (j / 4) + j % 4 and hi vector lane
//       j is d = c + 8 (j / 4) + 4 + j % 4 (undone when O is written). M x 2 accumulators.
namespace bf16dot {

constexpr int kIR = 8;  // tokens per QK register tile (their pointers fit the GPRs)

// Lanes 0-7 of even / odd elements of the 32-lane pair (a, b): sums of adjacent lanes of
// a then b: (a0 + a1, a2 + a3, ..., b14 + b15).
__attribute__((target("avx512f"))) inline __m512 add_adjacent(__m512 a, __m512 b) {
  const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  return _mm512_add_ps(_mm512_permutex2var_ps(a, ev, b), _mm512_permutex2var_ps(a, od, b));
}

// S[n][0, 8) (lanes of token n) for n in [0, rows), rows a multiple of kIR.
template <int W>
__attribute__((target("avx512bf16"))) void qk(int64_t rows, int64_t D,
                                               const uint16_t* const* krows, int64_t off,
                                               const uint32_t* Qp, float* S,
                                               flash::LineCursor& pf) {
  for (int64_t n0 = 0; n0 < rows; n0 += kIR) {
    __m512 acc[kIR];
    const uint16_t* r[kIR];
#pragma GCC unroll 16
    for (int i = 0; i < kIR; ++i) {
      acc[i] = _mm512_setzero_ps();
      r[i] = krows[n0 + i] + off;
    }
    for (int64_t c = 0; c < D / (2 * W); ++c) {
      pf.next();
      const __m512bh q = (__m512bh)_mm512_loadu_si512(Qp + c * 16);
#pragma GCC unroll 16
      for (int i = 0; i < kIR; ++i) {
        // A load-port broadcast of the 2W bf16 (no shuffle uop).
        __m512i k;
        if constexpr (W == 2) {
          double k4;
          std::memcpy(&k4, r[i] + 4 * c, 8);
          k = _mm512_castpd_si512(_mm512_set1_pd(k4));
        } else {
          k = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[i] + 8 * c)));
        }
        acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)k, q);
      }
    }
    if constexpr (W == 2) {
      // Tokens i, i + 1: lanes 0-7 and 8-15 = S rows n0 + i and n0 + i + 1.
#pragma GCC unroll 8
      for (int i = 0; i < kIR; i += 2)
        _mm512_storeu_ps(S + (n0 + i) * 8, add_adjacent(acc[i], acc[i + 1]));
    } else {
      // Two levels: lanes 4 t + h of y hold token i + t, lane h (t, h < 4); spread into
      // S rows of 8 (lanes 4-7 zero).
      const __m512i spread = _mm512_setr_epi32(0, 1, 2, 3, 0, 0, 0, 0, 4, 5, 6, 7, 0, 0, 0, 0);
      const __m512i spread_hi =
          _mm512_setr_epi32(8, 9, 10, 11, 0, 0, 0, 0, 12, 13, 14, 15, 0, 0, 0, 0);
#pragma GCC unroll 4
      for (int i = 0; i < kIR; i += 4) {
        const __m512 y = add_adjacent(add_adjacent(acc[i], acc[i + 1]),
                                      add_adjacent(acc[i + 2], acc[i + 3]));
        _mm512_storeu_ps(S + (n0 + i) * 8, _mm512_maskz_permutexvar_ps(0x0F0F, spread, y));
        _mm512_storeu_ps(S + (n0 + i + 2) * 8,
                         _mm512_maskz_permutexvar_ps(0x0F0F, spread_hi, y));
      }
    }
  }
}

// Pp[p][m] = bf16 pairs (P[2p][m], P[2p + 1][m]) of the tile's P^T[n][8] (a zero past nv);
// lo_sum[m] = lo_sum[m] * corr[m] + sum_n bf16(P[n][m]): the weights O is normalised by.
__attribute__((target("avx512bf16"))) void pack_p(const float* S, int64_t nv, uint32_t* Pp,
                                                   float* lo_sum, const float* corr) {
  __m256 sum = _mm256_setzero_ps();
  for (int64_t p = 0; 2 * p < nv; ++p) {
    const __m256 x0 = _mm256_loadu_ps(S + 2 * p * 8);
    const __m256 x1 = 2 * p + 1 < nv ? _mm256_loadu_ps(S + (2 * p + 1) * 8) : _mm256_setzero_ps();
    const __m128i b0 = (__m128i)_mm256_cvtneps_pbh(x0);
    const __m128i b1 = (__m128i)_mm256_cvtneps_pbh(x1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(Pp + p * 8), _mm_unpacklo_epi16(b0, b1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(Pp + p * 8 + 4), _mm_unpackhi_epi16(b0, b1));
    sum = _mm256_add_ps(sum, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b0), 16)));
    sum = _mm256_add_ps(sum, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b1), 16)));
  }
  _mm256_storeu_ps(lo_sum, _mm256_fmadd_ps(_mm256_loadu_ps(lo_sum), _mm256_loadu_ps(corr), sum));
}

// O[m][:D] (permuted, see above) (= O * corr[m] |+=) sum_p Pp[p][m] . (V_2p, V_2p+1), m < M.
template <int M>
__attribute__((target("avx512bf16"))) void pv(int64_t np, int64_t D, const uint32_t* Pp,
                                               const uint16_t* const* vrows, int64_t off,
                                               float* O, flash::Acc mode, const float* corr,
                                               flash::LineCursor& pf) {
  for (int64_t c = 0; c < D; c += 32) {
    __m512 acc[M][2];
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m)
      for (int v = 0; v < 2; ++v) {
        float* o = O + m * D + c + 16 * v;
        if (mode == flash::Acc::Zero) acc[m][v] = _mm512_setzero_ps();
        else if (mode == flash::Acc::Add) acc[m][v] = _mm512_loadu_ps(o);
        else acc[m][v] = _mm512_mul_ps(_mm512_loadu_ps(o), _mm512_set1_ps(corr[m]));
      }
    for (int64_t p = 0; p < np; ++p) {
      pf.next();
      const __m512i a = _mm512_loadu_si512(vrows[2 * p] + off + c);
      const __m512i b = _mm512_loadu_si512(vrows[2 * p + 1] + off + c);
      const __m512bh lo = (__m512bh)_mm512_unpacklo_epi16(a, b);
      const __m512bh hi = (__m512bh)_mm512_unpackhi_epi16(a, b);
#pragma GCC unroll 8
      for (int m = 0; m < M; ++m) {
        const __m512bh pm = (__m512bh)_mm512_set1_epi32(int(Pp[p * 8 + m]));
        acc[m][0] = _mm512_dpbf16_ps(acc[m][0], pm, lo);
        acc[m][1] = _mm512_dpbf16_ps(acc[m][1], pm, hi);
      }
    }
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m)
      for (int v = 0; v < 2; ++v) _mm512_storeu_ps(O + m * D + c + 16 * v, acc[m][v]);
  }
}

}  // namespace bf16dot

// The Math of run_decode for M lanes (the Kv parameter only fits run_lanes; always bf16).
template <class Kv, int M>
struct Dot {
  static_assert(std::is_same_v<typename Kv::E, uint16_t>);
  using E = uint16_t;
  static constexpr int W = M <= 4 ? 4 : 2;  // QK lanes per q lane (see above)
  static constexpr int64_t kRowQuantum = bf16dot::kIR;
  static constexpr bool kRoundedWeights = true;

  static int64_t q_floats(int64_t D) { return 8 * D / W; }
  static int64_t qk_steps(int64_t rows, int64_t D) { return rows / bf16dot::kIR * (D / (2 * W)); }
  static int64_t pv_steps(int64_t nv, int64_t D) { return (D / 32) * ((nv + 1) / 2); }
  // Position p of a lane's O row (see the PV layout above): d.
  static int64_t d_of(int64_t p) {
    const int64_t c = p / 32 * 32, j = p % 32;
    return j < 16 ? c + 8 * (j / 4) + j % 4 : c + 8 * ((j - 16) / 4) + 4 + (j - 16) % 4;
  }

  // Qp[c][W g + e] = bf16 pair (q[2W c + 2e], q[2W c + 2e + 1]) * scale of lane g (< M) of
  // head h (lane g = row g / G, q head g % G of the KV head); zero for g >= M.
  static void prep_q(const FlashTask& t, int64_t h, float* qb) {
    const int64_t G = t.group, D = t.head_dim;
    uint32_t* qp = reinterpret_cast<uint32_t*>(qb);
    for (int64_t c = 0; c < D / (2 * W); ++c)
      for (int64_t l = 0; l < 16; ++l) {
        const int64_t g = l / W, d = 2 * W * c + 2 * (l % W);
        uint32_t w = 0;
        if (g < M) {
          const float* q = t.q + (g / G) * t.ldq + (h * G + g % G) * D;
          w = uint32_t(bf16(q[d] * t.scale_log2).bits) |
              (uint32_t(bf16(q[d + 1] * t.scale_log2).bits) << 16);
        }
        qp[c * 16 + l] = w;
      }
  }
  static void softmax(float* S, int64_t nv, bool masked, int64_t j0, const float* lim,
                      float* mrow, float* lrow, float* corr) {
    softmax8(S, nv, masked, j0, lim, mrow, lrow, corr);
  }
  static void qk(int64_t rows, int64_t D, const E* const* kr, int64_t off, const float* Q,
                 float* S, flash::LineCursor& pf) {
    bf16dot::qk<W>(rows, D, kr, off, reinterpret_cast<const uint32_t*>(Q), S, pf);
  }
  static void pv(int64_t nv, int64_t D, const float* P, uint32_t* Pp, const E* const* vr,
                 int64_t off, float* O, flash::Acc mode, const float* corr, float* lo_sum,
                 flash::LineCursor& pf) {
    bf16dot::pack_p(P, nv, Pp, lo_sum, corr);
    bf16dot::pv<M>((nv + 1) / 2, D, Pp, vr, off, O, mode, corr, pf);
  }
};

bool cpu_has_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

}  // namespace

bool decode_task(const FlashTask& t) {
  const int64_t M = t.rows * t.group;
  if (M < 1 || M > kLanes || t.head_dim % 32 != 0) return false;
  if (t.kv_dtype == DType::BF16) {
    if (t.bf16_dot && cpu_has_bf16()) run_lanes<Dot, KvBf16>(t, M);
    else run_lanes<Wide, KvBf16>(t, M);
    return true;
  }
  if (t.kv_dtype == DType::F32) {
    run_lanes<Wide, KvF32>(t, M);
    return true;
  }
  return false;
}

}  // namespace cpinfer::attention_impl::avx512
