// AVX2 decode attention: tasks of at most 8 query lanes per KV head (one decode row of a GQA
// group, or a few rows of a short causal tail) with head_dim a multiple of 16, over every KV
// head of the task at once, with the driver of attention_decode_driver.inc. f32 FMAs on the
// stored K/V (f32, or bf16 widened by one shift or one AND per 8 values): exact f32 arithmetic.
//   QK: the head dimension in the vector. Lane g's 8-wide partial dot products with a token
//       accumulate over the head dimension: 5-8 lanes one token at a time, 1-4 lanes 2 (or 4)
//       tokens per step (each Q vector loaded once serves every token of the step); the 8
//       lanes' vectors of a token are then summed across by one hadd tree into one vector:
//       the token's 8 scores, S [n][8]. No transposes; the tree costs ~9 shuffles per token
//       against M x D / 8 FMAs.
//   Softmax: one token per vector (the 8 lanes side by side).
//   PV: the head dimension in the vector, P[n][g] broadcast against the widened V row; lanes
//       in groups of at most 4 (2 x 4 accumulators per 16 columns, within 16 ymm registers).
// The flash kernel (attention_flash.inc) runs one q head at a time with a single query row in
// its 12-accumulator tiles: on a bf16 cache it read K/V and widened it once per q head.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/attention_avx2_vec.h"
#include "kernels/attention_impl.h"

namespace cpinfer::attention_impl::avx2 {

namespace {

using vec::kAccRegs;
using vec::Y8;

#include "kernels/attention_flash.inc"

#include "kernels/attention_decode_driver.inc"

// How 16 values of a cache row are widened into two f32 vectors a, b, and which head-dimension
// index d each position p = 16 c + 8 e + i of a widened row holds (e = 0 for a, 1 for b; i the
// lane). Q and O are kept in this position order, so rows are widened without shuffles; O is
// put back in d order when it is written.
//   bf16: one 32-byte load, a = the even values (shifted into the f32 top half), b = the odd
//         ones (masked): d = 16 c + 2 i + e. Example: p = 9 (c 0, e 1, i 1) is d = 3.
//   f32:  two 32-byte loads: d = p.
struct KvBf16 {
  using E = uint16_t;
  static void load(const E* p, __m256& a, __m256& b) { Y8::load_bf16_evenodd(p, a, b); }
  // a (e = 0) or b (e = 1) alone.
  static __m256 half(const E* p, int e) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm256_castsi256_ps(e == 0 ? _mm256_slli_epi32(v, 16)
                                      : _mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
  }
  static int64_t d_of(int64_t p) { return p / 16 * 16 + 2 * (p % 8) + (p % 16) / 8; }
};
struct KvF32 {
  using E = float;
  static void load(const E* p, __m256& a, __m256& b) {
    a = _mm256_loadu_ps(p);
    b = _mm256_loadu_ps(p + 8);
  }
  static __m256 half(const E* p, int e) { return _mm256_loadu_ps(p + 8 * e); }
  static int64_t d_of(int64_t p) { return p; }
};

// The horizontal sums of v[0..7] in one vector: lane g = sum of v[g]'s 8 lanes.
//   hadd(a, b) = [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]; two rounds give
//   s0123 = [sum v0[0..4), v1[0..4), v2[0..4), v3[0..4) | the same over [4..8)], and the two
//   128-bit halves of s0123 and s4567 are added across. Example: lane 5 of the result is
//   s4567's lane 1 (v5[0..4)) + its lane 5 (v5[4..8)).
inline __m256 hsum8(const __m256* v) {
  const __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20),
                       _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// The online softmax over a tile, one token per vector (S [n][8]): tokens at or past nv are not
// touched; when masked, lane m's tokens past lim[m] get -inf. m, l and corr per lane: m the
// running maximum, l = l * corr + sum of the tile's weights, corr = 2^(m_old - m_new).
void softmax8(float* S, int64_t nv, bool masked, int64_t j0, const float* lim, float* mrow,
              float* lrow, float* corr) {
  const __m256 mo = _mm256_loadu_ps(mrow);
  const __m256 limv = _mm256_loadu_ps(lim);
  __m256 mx = _mm256_set1_ps(-INFINITY);
  for (int64_t n = 0; n < nv; ++n) {
    __m256 x = _mm256_loadu_ps(S + n * kLanes);
    if (masked) {
      x = Y8::mask_gt(x, _mm256_set1_ps(float(j0 + n)), limv);
      _mm256_storeu_ps(S + n * kLanes, x);
    }
    mx = _mm256_max_ps(mx, x);
  }
  const __m256 mn = _mm256_max_ps(mo, mx);
  const __m256 ms = Y8::safe(mn);
  const __m256 c = Y8::exp2(_mm256_sub_ps(mo, ms));
  __m256 sum = _mm256_setzero_ps();
  for (int64_t n = 0; n < nv; ++n) {
    const __m256 e = Y8::exp2(_mm256_sub_ps(_mm256_loadu_ps(S + n * kLanes), ms));
    _mm256_storeu_ps(S + n * kLanes, e);
    sum = _mm256_add_ps(sum, e);
  }
  _mm256_storeu_ps(lrow, _mm256_fmadd_ps(_mm256_loadu_ps(lrow), c, sum));
  _mm256_storeu_ps(mrow, mn);
  _mm256_storeu_ps(corr, c);
}

// M lanes (1..8), known at compile time so that the accumulators stay in registers.
template <class Kv, int M>
struct Wide {
  using E = typename Kv::E;
  // Lanes of PV's first group (PV works on at most 4 lanes at a time).
  static constexpr int kNg0 = M > 4 ? 4 : M;
  // Tokens per QK step: UT x M accumulators (5-8 for 5-8 lanes, 6-8 for 3-4, 4-8 for 1-2).
  // With 5-8 lanes all of them in one pass: each K vector is loaded and widened once per
  // token (in two passes of 4 lanes x 2 tokens it was twice, with the Q pointers spilled).
  static constexpr int UT = M > 4 ? 1 : M >= 3 ? 2 : 4;
  // Token streams per PV lane group (2 x lanes x streams accumulators).
  static constexpr int UV = M == 1 ? 4 : M == 2 ? 2 : 1;
  static constexpr int kGroups = M > 4 ? 2 : 1;
  static constexpr int64_t kRowQuantum = UT;
  static constexpr bool kRoundedWeights = false;

  static int64_t q_floats(int64_t D) { return kLanes * D; }
  static int64_t qk_steps(int64_t rows, int64_t D) { return rows / UT * (D / 16); }
  static int64_t pv_steps(int64_t nv, int64_t D) {
    return kGroups * (D / 16) * (nv / UV + nv % UV);
  }
  static int64_t d_of(int64_t p) { return Kv::d_of(p); }

  // Q in position order, in blocks of 8 positions with the lanes side by side, so that one
  // base pointer and constant offsets reach every lane's vector of a block:
  // qb[(p / 8) * 64 + g * 8 + p % 8] = q_g[d_of(p)] * sm_scale * log2 e, lanes g < M.
  // Example: position 19 of lane 2 is qb[2 * 64 + 2 * 8 + 3] = qb[147].
  static void prep_q(const FlashTask& t, int64_t h, float* qb) {
    const int64_t G = t.group, D = t.head_dim;
    for (int64_t g = 0; g < M; ++g) {
      const float* q = t.q + (g / G) * t.ldq + (h * G + g % G) * D;
      for (int64_t p = 0; p < D; ++p)
        qb[(p / 8) * kLanes * 8 + g * 8 + p % 8] = q[Kv::d_of(p)] * t.scale_log2;
    }
  }

  // S[n][g] = Q_g . K_n for n < rows (a multiple of UT), g < M (lanes past M: 0). UT tokens
  // at a time, every lane (qk_tokens); the 8-wide partial sums go to part, summed across per
  // token by hsum8.
  static void qk(int64_t rows, int64_t D, const E* const* kr, int64_t off, const float* Q,
                 float* S, flash::LineCursor& pf) {
    for (int64_t n0 = 0; n0 < rows; n0 += UT) {
      __m256 part[UT][8];
      qk_tokens(D, kr + n0, off, Q, part, pf);
#pragma GCC unroll 4
      for (int u = 0; u < UT; ++u) {
#pragma GCC unroll 8
        for (int g = M; g < 8; ++g) part[u][g] = _mm256_setzero_ps();
        _mm256_storeu_ps(S + (n0 + u) * kLanes, hsum8(part[u]));
      }
    }
  }

  // Every lane against K rows r[0, UT): part[u][g] = the 8-wide partial sums of Q_g . K_u.
  // Per half chunk (8 values), UT K loads and M Q loads feed UT x M FMAs (each Q vector serves
  // UT tokens).
  static void qk_tokens(int64_t D, const E* const* r, int64_t off, const float* Q,
                        __m256 (&part)[UT][8], flash::LineCursor& pf) {
    __m256 acc[UT][M];
#pragma GCC unroll 4
    for (int u = 0; u < UT; ++u)
#pragma GCC unroll 8
      for (int g = 0; g < M; ++g) acc[u][g] = _mm256_setzero_ps();
    for (int64_t c = 0; c < D; c += 16) {
      pf.next();
#pragma GCC unroll 2
      for (int e = 0; e < 2; ++e) {
        __m256 k[UT];
#pragma GCC unroll 4
        for (int u = 0; u < UT; ++u) k[u] = Kv::half(r[u] + off + c, e);
#pragma GCC unroll 8
        for (int g = 0; g < M; ++g) {
          const __m256 q = _mm256_loadu_ps(Q + (c / 8 + e) * kLanes * 8 + g * 8);
#pragma GCC unroll 4
          for (int u = 0; u < UT; ++u) acc[u][g] = _mm256_fmadd_ps(k[u], q, acc[u][g]);
        }
      }
    }
#pragma GCC unroll 4
    for (int u = 0; u < UT; ++u)
#pragma GCC unroll 8
      for (int g = 0; g < M; ++g) part[u][g] = acc[u][g];
  }

  static void softmax(float* S, int64_t nv, bool masked, int64_t j0, const float* lim,
                      float* mrow, float* lrow, float* corr) {
    softmax8(S, nv, masked, j0, lim, mrow, lrow, corr);
  }

  // Lanes [G0, G0 + NG) of O (position order), columns [c, c + 16):
  // O_g (= O_g * corr[g] |+=) sum_{n < nv} P[n][g] V_n.
  template <int G0, int NG>
  static void pv_group(int64_t nv, int64_t D, int64_t c, const float* P, const E* const* vr,
                       int64_t off, float* O, flash::Acc mode, const float* corr,
                       flash::LineCursor& pf) {
    __m256 acc[UV][NG][2];
#pragma GCC unroll 4
    for (int g = 0; g < NG; ++g)
      for (int e = 0; e < 2; ++e) {
        const float* o = O + (G0 + g) * D + c + 8 * e;
        if (mode == flash::Acc::Zero) acc[0][g][e] = _mm256_setzero_ps();
        else if (mode == flash::Acc::Add) acc[0][g][e] = _mm256_loadu_ps(o);
        else acc[0][g][e] = _mm256_mul_ps(_mm256_loadu_ps(o), _mm256_set1_ps(corr[G0 + g]));
#pragma GCC unroll 4
        for (int u = 1; u < UV; ++u) acc[u][g][e] = _mm256_setzero_ps();
      }
    auto step = [&](int u, int64_t n) {
      __m256 a, b;
      Kv::load(vr[n] + off + c, a, b);
#pragma GCC unroll 4
      for (int g = 0; g < NG; ++g) {
        const __m256 p = _mm256_set1_ps(P[n * kLanes + G0 + g]);
        acc[u][g][0] = _mm256_fmadd_ps(p, a, acc[u][g][0]);
        acc[u][g][1] = _mm256_fmadd_ps(p, b, acc[u][g][1]);
      }
    };
    int64_t n = 0;
    for (; n + UV <= nv; n += UV) {
      pf.next();
#pragma GCC unroll 4
      for (int u = 0; u < UV; ++u) step(u, n + u);
    }
    for (; n < nv; ++n) {
      pf.next();
      step(0, n);
    }
#pragma GCC unroll 4
    for (int g = 0; g < NG; ++g)
      for (int e = 0; e < 2; ++e) {
        __m256 x = acc[0][g][e];
#pragma GCC unroll 4
        for (int u = 1; u < UV; ++u) x = _mm256_add_ps(x, acc[u][g][e]);
        _mm256_storeu_ps(O + (G0 + g) * D + c + 8 * e, x);
      }
  }

  static void pv(int64_t nv, int64_t D, const float* P, uint32_t* /*Pp*/, const E* const* vr,
                 int64_t off, float* O, flash::Acc mode, const float* corr,
                 float* /*lo_sum*/, flash::LineCursor& pf) {
    for (int64_t c = 0; c < D; c += 16) {
      if constexpr (M > 4) {
        pv_group<0, 4>(nv, D, c, P, vr, off, O, mode, corr, pf);
        pv_group<4, M - 4>(nv, D, c, P, vr, off, O, mode, corr, pf);
      } else {
        pv_group<0, M>(nv, D, c, P, vr, off, O, mode, corr, pf);
      }
    }
  }
};

}  // namespace

bool decode_task(const FlashTask& t) {
  const int64_t M = t.rows * t.group;
  if (M < 1 || M > kLanes || t.head_dim % 16 != 0) return false;
  if (t.kv_dtype == DType::BF16) {
    run_lanes<Wide, KvBf16>(t, M);
    return true;
  }
  if (t.kv_dtype == DType::F32) {
    run_lanes<Wide, KvF32>(t, M);
    return true;
  }
  return false;
}

}  // namespace cpinfer::attention_impl::avx2
