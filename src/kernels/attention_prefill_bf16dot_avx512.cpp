// AVX-512 prefill attention over a bf16 cache with bf16 dot products (vdpbf16ps): the flash
// tasks of more than 8 query lanes (query rows x the q heads of one KV head) with head_dim a
// multiple of 32, where the plan allows bf16 dot products (--bf16-math, AttentionProblem).
// Same loop as the f32 flash core (attention_flash.inc: KV tiles of kTileN tokens, online
// softmax in base 2, bottom-right causal mask), with both products on the dot unit:
//
//   Qp [D/2][Mp] dwords   Qp[c][m] = bf16 pair (q_m[2c], q_m[2c + 1]) * sm_scale * log2 e
//   QK: S^T[n][m] = sum_c K_n.pair(c) . Qp[c][m]   K pairs broadcast straight from the bf16
//       cache row (one 32-bit word), lanes m in the vector, 16 lanes per register
//   softmax_tile (f32, shared with the flash core): S becomes P
//   Pp [np][Mp] dwords    Pp[p][m] = bf16 pair (P[2p][m], P[2p + 1][m]) (0 past the tile)
//   Vp [np][D] dwords     V rows 2p and 2p + 1 interleaved by unpacklo/hi_epi16, once per tile
//   PV: O[m][:] (= O * corr[m] |+=) sum_p Pp[p][m] . Vp[p][:]   head_dim in the vector
//
// unpacklo/hi_epi16 interleave within 128-bit lanes, so each 32-column chunk of O is kept
// permuted (the layout of the decode kernel's PV, attention_decode_avx512.cpp): in the chunk
// at c, O position c + j (j < 16) holds d = c + 8 (j / 4) + j % 4 and position c + 16 + j
// holds d = c + 8 (j / 4) + 4 + j % 4. Example: position c + 5 is d = c + 9; c + 21 is c + 13.
//
// Numerics: Q (with the scale folded in) and P are rounded to bf16 like K and V already are;
// O is divided by the sum of the rounded weights (so it stays a convex combination of V
// rows) and the LSE is m + log2 of the f32 sum. attention_test checks the result against a
// float64 reference within Bound::kBf16Dot.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/attention_avx512_vec.h"

namespace cpinfer::attention_impl::avx512 {

namespace {

using vec::kAccRegs;
using vec::Y8;
using vec::Z16;

#include "kernels/attention_flash.inc"

using flash::Acc;

// Position p of an O row (see the permutation above) -> head_dim column d.
inline int64_t d_of(int64_t p) {
  const int64_t c = p / 32 * 32, j = p % 32;
  return j < 16 ? c + 8 * (j / 4) + j % 4 : c + 8 * ((j - 16) / 4) + 4 + (j - 16) % 4;
}

// QK register tile: S^T rows [0, IR) x lane vectors [0, MV) of the block at mb.
//   acc[i][v] = sum_c bcast(K_i.pair(c)) . Qp[c][mb + 16 v ..]
template <int IR, int MV>
inline void qk_tile(int64_t Dh, const uint16_t* const* kr, const uint32_t* __restrict Qp,
                    int64_t Mp, float* __restrict S) {
  __m512 acc[IR][MV];
#pragma GCC unroll 16
  for (int i = 0; i < IR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < MV; ++v) acc[i][v] = _mm512_setzero_ps();
  const uint16_t* r[IR];
#pragma GCC unroll 16
  for (int i = 0; i < IR; ++i) r[i] = kr[i];
  for (int64_t c = 0; c < Dh; ++c) {
    __m512bh q[MV];
#pragma GCC unroll 4
    for (int v = 0; v < MV; ++v) q[v] = (__m512bh)_mm512_loadu_si512(Qp + c * Mp + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < IR; ++i) {
      int32_t w;
      std::memcpy(&w, r[i] + 2 * c, 4);  // (K_i[2c], K_i[2c + 1])
      const __m512bh k = (__m512bh)_mm512_set1_epi32(w);
#pragma GCC unroll 4
      for (int v = 0; v < MV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], k, q[v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < IR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < MV; ++v) _mm512_storeu_ps(S + i * Mp + 16 * v, acc[i][v]);
}

// Accumulators per tile: at most kAccRegs, at most 12 rows.
constexpr int tile_rows(int mv) { return kAccRegs / mv > 12 ? 12 : kAccRegs / mv; }

// S^T[n][:Mp] for n < rows (a multiple of tile_rows(MV)); prefetch(n0, n1) before each block.
template <int MV, typename PF>
void qk(int64_t rows, int64_t Dh, const uint16_t* const* kr, const uint32_t* Qp, int64_t Mp,
        float* S, PF&& prefetch) {
  constexpr int IR = tile_rows(MV);
  for (int64_t n = 0; n < rows; n += IR) {
    prefetch(n, n + IR);
    for (int64_t mb = 0; mb < Mp; mb += 16 * MV)
      qk_tile<IR, MV>(Dh, kr + n, Qp + mb, Mp, S + n * Mp + mb);
  }
}

// Pp[p][m] for p < np = ceil(nv / 2), m < Mp, from the tile's P^T = S[n][Mp]; and
// lo_sum[m] = lo_sum[m] * corr[m] + sum_n bf16(P[n][m]) (the weights O is divided by).
// bf16 -> dword by zero extension: P[2p] in the low half, P[2p + 1] in the high half.
void pack_p(const float* S, int64_t nv, int64_t Mp, uint32_t* Pp, float* lo_sum,
            const float* corr) {
  const int64_t np = (nv + 1) / 2;
  for (int64_t mv = 0; mv < Mp; mv += 16) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    for (int64_t p = 0; p < np; ++p) {
      const __m512 x0 = _mm512_loadu_ps(S + 2 * p * Mp + mv);
      const __m512 x1 =
          2 * p + 1 < nv ? _mm512_loadu_ps(S + (2 * p + 1) * Mp + mv) : _mm512_setzero_ps();
      const __m512i w0 = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x0));
      const __m512i w1 = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x1));
      _mm512_storeu_si512(Pp + p * Mp + mv, _mm512_or_si512(w0, _mm512_slli_epi32(w1, 16)));
      s0 = _mm512_add_ps(s0, _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)));
      s1 = _mm512_add_ps(s1, _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)));
    }
    _mm512_storeu_ps(lo_sum + mv, _mm512_fmadd_ps(_mm512_loadu_ps(lo_sum + mv),
                                                  _mm512_loadu_ps(corr + mv),
                                                  _mm512_add_ps(s0, s1)));
  }
}

// Vp[p][:D] = V rows 2p and 2p + 1 interleaved (permuted chunks, see above), p < np.
void pack_v(const uint16_t* const* vr, int64_t np, int64_t D, uint32_t* Vp) {
  for (int64_t p = 0; p < np; ++p) {
    const uint16_t* a = vr[2 * p];
    const uint16_t* b = vr[2 * p + 1];
    uint32_t* dst = Vp + p * D;
    for (int64_t c = 0; c < D; c += 32) {
      const __m512i x = _mm512_loadu_si512(a + c), y = _mm512_loadu_si512(b + c);
      _mm512_storeu_si512(dst + c, _mm512_unpacklo_epi16(x, y));
      _mm512_storeu_si512(dst + c + 16, _mm512_unpackhi_epi16(x, y));
    }
  }
}

// PV register tile: O rows [0, IR) x head_dim vectors [0, MV) from column db.
template <int IR, int MV>
inline void pv_tile(int64_t np, const uint32_t* __restrict Pp, int64_t Mp,
                    const uint32_t* __restrict Vp, int64_t D, float* __restrict O, Acc mode,
                    const float* __restrict corr) {
  __m512 acc[IR][MV];
#pragma GCC unroll 16
  for (int i = 0; i < IR; ++i) {
    const __m512 s = _mm512_set1_ps(mode == Acc::ScaleAdd ? corr[i] : 1.f);
#pragma GCC unroll 4
    for (int v = 0; v < MV; ++v) {
      if (mode == Acc::Zero) acc[i][v] = _mm512_setzero_ps();
      else if (mode == Acc::Add) acc[i][v] = _mm512_loadu_ps(O + i * D + 16 * v);
      else acc[i][v] = _mm512_mul_ps(_mm512_loadu_ps(O + i * D + 16 * v), s);
    }
  }
  for (int64_t p = 0; p < np; ++p) {
    __m512bh b[MV];
#pragma GCC unroll 4
    for (int v = 0; v < MV; ++v) b[v] = (__m512bh)_mm512_loadu_si512(Vp + p * D + 16 * v);
    const uint32_t* pp = Pp + p * Mp;
#pragma GCC unroll 16
    for (int i = 0; i < IR; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(pp[i]));
#pragma GCC unroll 4
      for (int v = 0; v < MV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a, b[v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < IR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < MV; ++v) _mm512_storeu_ps(O + i * D + 16 * v, acc[i][v]);
}

// pv_tile over `rows` O rows in blocks of IR, the last block with the remainder.
template <int IR, int MV>
void pv_rows(int64_t rows, int64_t np, const uint32_t* Pp, int64_t Mp, const uint32_t* Vp,
             int64_t D, float* O, Acc mode, const float* corr) {
  int64_t i = 0;
  for (; i + IR <= rows; i += IR)
    pv_tile<IR, MV>(np, Pp + i, Mp, Vp, D, O + i * D, mode, corr + i);
  if constexpr (IR > 1) {
    if (i < rows) pv_rows<IR - 1, MV>(rows - i, np, Pp + i, Mp, Vp, D, O + i * D, mode, corr + i);
  }
}

// O[:M][:D] over the tile: head_dim in blocks of 4 vectors (D a multiple of 64) or 2.
void pv(int64_t M, int64_t np, const uint32_t* Pp, int64_t Mp, const uint32_t* Vp, int64_t D,
        float* O, Acc mode, const float* corr) {
  if (D % 64 == 0) {
    for (int64_t db = 0; db < D; db += 64)
      pv_rows<tile_rows(4), 4>(M, np, Pp, Mp, Vp + db, D, O + db, mode, corr);
  } else {
    for (int64_t db = 0; db < D; db += 32)
      pv_rows<tile_rows(2), 2>(M, np, Pp, Mp, Vp + db, D, O + db, mode, corr);
  }
}

// One KV head of a task (t.num_heads == 1). Scratch (within flash_scratch_floats): Qp
// [D/2][Mp] | S [kTileN + 16][Mp] | Pp [kTileN/2 + 8][Mp] | Vp [kTileN/2 + 8][D] | O [Mp][D] |
// m, l, lo_sum, corr, lim [Mp] | row pointers [4][kTileN + 16].
template <int64_t DC>
void run_head(const FlashTask& t) {
  const int64_t G = t.group, M = t.rows * G;
  const int64_t D = DC ? DC : t.head_dim, Dh = D / 2;
  const int64_t nvq = (M + 15) / 16;
  const int MV = nvq >= 4 ? 4 : int(nvq);
  const int64_t Mp = round_up(M, 16 * MV);
  const int IRq = MV == 1 ? tile_rows(1) : MV == 2 ? tile_rows(2) : MV == 3 ? tile_rows(3)
                                                                             : tile_rows(4);
  constexpr int64_t kRowsCap = kTileN + 16, kPairsCap = kTileN / 2 + 8;
  uint32_t* Qp = reinterpret_cast<uint32_t*>(t.scratch);
  float* S = t.scratch + Dh * Mp;
  uint32_t* Pp = reinterpret_cast<uint32_t*>(S + kRowsCap * Mp);
  uint32_t* Vp = Pp + kPairsCap * Mp;
  float* O = reinterpret_cast<float*>(Vp + kPairsCap * D);
  float* mrow = O + Mp * D;
  float* lrow = mrow + Mp;
  float* lo_sum = lrow + Mp;
  float* corr = lo_sum + Mp;
  float* lim = corr + Mp;
  const uint16_t** rows_buf = reinterpret_cast<const uint16_t**>(lim + Mp);
  const uint16_t** krows[2] = {rows_buf, rows_buf + kRowsCap};
  const uint16_t** vrows[2] = {rows_buf + 2 * kRowsCap, rows_buf + 3 * kRowsCap};
  const uint16_t* kb = static_cast<const uint16_t*>(t.k) + t.head_off;
  const uint16_t* vb = static_cast<const uint16_t*>(t.v) + t.head_off;
  flash::SlotWalk walk(t, t.kv0);
  auto fill_rows = [&](int64_t n, const uint16_t** kr, const uint16_t** vr) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t slot = walk.next();
      kr[i] = kb + slot * t.k_row;
      vr[i] = vb + slot * t.v_row;
    }
  };
  const int64_t row_bytes = D * 2;

  // Qp[c][m]: lane m is row m / G, q head m % G; zero for m >= M.
  for (int64_t m = 0; m < Mp; ++m) {
    const float* src = m < M ? t.q + (m / G) * t.ldq + (m % G) * D : nullptr;
    for (int64_t c = 0; c < Dh; ++c)
      Qp[c * Mp + m] =
          src ? uint32_t(bf16(src[2 * c] * t.scale_log2).bits) |
                    (uint32_t(bf16(src[2 * c + 1] * t.scale_log2).bits) << 16)
              : 0u;
  }
  // Lane m (row m / G) sees tokens j <= m / G + diag; padding lanes see everything.
  for (int64_t m = 0; m < Mp; ++m) {
    lim[m] = m < M ? float(m / G + t.diag) : 3e38f;
    mrow[m] = -INFINITY;
    lrow[m] = lo_sum[m] = 0.f;
  }

  bool first = true;
  int cur = 0;
  fill_rows(std::min(kTileN, t.kv1 - t.kv0), krows[0], vrows[0]);
  for (int64_t j0 = t.kv0; j0 < t.kv1; j0 += kTileN) {
    const int64_t nv = std::min(kTileN, t.kv1 - j0);
    const int64_t rows_k = round_up(nv, IRq), np = (nv + 1) / 2;
    const int64_t n_next = std::min(kTileN, t.kv1 - j0 - nv);
    const uint16_t** kr = krows[cur];
    const uint16_t** vr = vrows[cur];
    const uint16_t** kn = krows[cur ^ 1];
    const uint16_t** vn = vrows[cur ^ 1];
    fill_rows(n_next, kn, vn);
    // Whole QK blocks and V pairs: the extra rows repeat the last one (finite values); their
    // scores are never read and their weights are 0.
    for (int64_t n = nv; n < rows_k; ++n) kr[n] = kr[nv - 1];
    for (int64_t n = nv; n < 2 * np; ++n) vr[n] = vr[nv - 1];
    auto prefetch = [&](int64_t n0, int64_t n1) {
      for (int64_t i = n0; i < std::min(n1, n_next); ++i)
        for (int64_t b = 0; b < row_bytes; b += 64) {
          __builtin_prefetch(reinterpret_cast<const char*>(kn[i]) + b, 0, 2);
          __builtin_prefetch(reinterpret_cast<const char*>(vn[i]) + b, 0, 2);
        }
    };
    switch (MV) {
      case 1: qk<1>(rows_k, Dh, kr, Qp, Mp, S, prefetch); break;
      case 2: qk<2>(rows_k, Dh, kr, Qp, Mp, S, prefetch); break;
      case 3: qk<3>(rows_k, Dh, kr, Qp, Mp, S, prefetch); break;
      default: qk<4>(rows_k, Dh, kr, Qp, Mp, S, prefetch); break;
    }
    // The smallest limit is lane 0's (row 0): diag. Only tiles reaching past it are masked.
    const bool masked = t.causal && j0 + nv - 1 > t.diag;
    flash::softmax_tile<Z16>(S, nv, Mp, masked, j0, lim, mrow, lrow, corr);
    Acc mode = Acc::Zero;
    if (!first) {
      mode = Acc::Add;
      for (int64_t m = 0; m < M; ++m)
        if (corr[m] != 1.f) { mode = Acc::ScaleAdd; break; }
    }
    pack_p(S, nv, Mp, Pp, lo_sum, corr);
    pack_v(vr, np, D, Vp);
    pv(M, np, Pp, Mp, Vp, D, O, mode, corr);
    first = false;
    cur ^= 1;
  }

  // O / (sum of the rounded weights), columns un-permuted; LSE = m + log2(l) (the f32 sum);
  // the empty state (0, -inf) where nothing was visible.
  for (int64_t m = 0; m < M; ++m) {
    float* dst = t.o + (m / G) * t.ldo + (m % G) * D;
    float& lse = t.lse[(m / G) * t.ld_lse + (m % G)];
    const float l = lrow[m], lo = lo_sum[m];
    if (l > 0.f && lo > 0.f) {
      const float inv = 1.f / lo;
      const float* src = O + m * D;
      for (int64_t p = 0; p < D; ++p) dst[d_of(p)] = src[p] * inv;
      lse = mrow[m] + std::log2(l);
    } else {
      for (int64_t d = 0; d < D; ++d) dst[d] = 0.f;
      lse = -INFINITY;
    }
  }
}

bool cpu_has_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

}  // namespace

bool prefill_bf16dot_task(const FlashTask& t) {
  if (!t.bf16_dot || t.kv_dtype != DType::BF16 || t.head_dim % 32 != 0 || !cpu_has_bf16())
    return false;
  flash::per_head(t, [](const FlashTask& u) {
    switch (u.head_dim) {
      case 64: run_head<64>(u); break;
      case 128: run_head<128>(u); break;
      default: run_head<0>(u); break;
    }
  });
  return true;
}

}  // namespace cpinfer::attention_impl::avx512
