// AVX-512 attention kernels: the flash core (attention_flash.inc) with zmm lanes for QK and
// the softmax when a task has more than 8 lanes, ymm (AVX-512VL, 32 registers) for decode
// groups of <= 8 heads, and zmm head_dim vectors for P.V; exp2 by roundscale + polynomial +
// scalef. Plus the straightforward kernel (attention_reference.inc).
// GCC 12's AVX-512 intrinsics (the _mm512_undefined_* idiom) trip -W(maybe-)uninitialized
// once inlined; the warnings point into the system header and are false positives.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/attention_impl.h"

namespace cpinfer::attention_impl::avx512 {

namespace {

constexpr int kAccRegs = 24;  // of 32 zmm/ymm registers

struct Z16 {
  using R = __m512;
  static constexpr int64_t W = 16;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  // 2^x = 2^n * 2^f, n = round(x), f in [-0.5, 0.5]; x clamped at -200 so that -inf gives
  // 2^-200 * p, which underflows to exactly 0.
  static R exp2(R x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-200.f));
    const R n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const R f = _mm512_sub_ps(x, n);
    R p = _mm512_set1_ps(kExp2Poly[0]);
    for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2Poly[i]));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
    return _mm512_scalef_ps(p, n);
  }
  static R mask_gt(R s, R j, R lim) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(j, lim, _CMP_GT_OQ), s,
                                _mm512_set1_ps(-INFINITY));
  }
  static R safe(R m) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), m,
                                _mm512_setzero_ps());
  }
  static void bcast_bf16_pair(const uint16_t* p, R& e, R& o) {
    int32_t w;
    std::memcpy(&w, p, 4);
    const __m512i v = _mm512_set1_epi32(w);
    e = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    o = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
  }
  static void load_bf16_evenodd(const uint16_t* p, R& e, R& o) {
    const __m512i v = _mm512_loadu_si512(p);
    e = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    o = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
  }
};

struct Y8 {
  using R = __m256;
  static constexpr int64_t W = 8;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R exp2(R x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-200.f));
    const R n = _mm256_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const R f = _mm256_sub_ps(x, n);
    R p = _mm256_set1_ps(kExp2Poly[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2Poly[i]));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
    return _mm256_scalef_ps(p, n);
  }
  static R mask_gt(R s, R j, R lim) {
    return _mm256_mask_blend_ps(_mm256_cmp_ps_mask(j, lim, _CMP_GT_OQ), s,
                                _mm256_set1_ps(-INFINITY));
  }
  static R safe(R m) {
    return _mm256_mask_blend_ps(_mm256_cmp_ps_mask(m, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ), m,
                                _mm256_setzero_ps());
  }
  static void bcast_bf16_pair(const uint16_t* p, R& e, R& o) {
    int32_t w;
    std::memcpy(&w, p, 4);
    const __m256i v = _mm256_set1_epi32(w);
    e = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    o = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
  }
  static void load_bf16_evenodd(const uint16_t* p, R& e, R& o) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    e = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    o = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
  }
};

#include "kernels/attention_flash.inc"

template <class VQ>
void dispatch_dim(const FlashTask& t) {
  switch (t.head_dim) {
    case 64: flash::run_task<VQ, Z16, 64>(t); break;
    case 128: flash::run_task<VQ, Z16, 128>(t); break;
    default: flash::run_task<VQ, Z16, 0>(t); break;
  }
}

}  // namespace

// bf16 dot products for decode over a bf16 cache (AVX512_BF16: vdpbf16ps does 32 products
// per instruction, twice the f32 FMA rate; decode of a bf16 cache is FMA-bound at 8 FLOP per
// byte). Q (times sm_scale * log2 e) and P are rounded to bf16 like K and V already are, so
// each score moves by at most 2^-9 sum_d |q_d k_d| * scale (the same order as the K storage
// rounding) and O by at most 2^-9 max|v| (as V's); sums and the softmax stay f32.
//   QK: lanes l = 2h + e (h: q head, e: which K pair of a quad): one 64-bit broadcast of
//       K_n[4c .. 4c + 4) and one vdpbf16ps against Qp[c][l] = (q_h[4c + 2e], q_h[4c + 2e + 1])
//       accumulate S_n[h] in lanes 2h and 2h + 1; they are added at the end.
//   PV: pairs along n: Pp[p][m] = (P[2p][m], P[2p + 1][m]); V rows 2p and 2p + 1 interleaved
//       by unpacklo/hi_epi16 give 16 (V[2p][d], V[2p+1][d]) pairs per vector. Within each
//       32-column chunk at c, lo vector lane j is d = c + 8 (j / 4) + j % 4 and hi vector lane
//       j is d = c + 8 (j / 4) + 4 + j % 4 (undone when O is written).
namespace bf16dot {

constexpr int kIR = 8;  // tokens per QK register tile (their pointers fit the GPRs)

bool cpu_has_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

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
    for (int64_t c = 0; c < D / 4; ++c) {
      pf.next();
      const __m512bh q = (__m512bh)_mm512_loadu_si512(Qp + c * 16);
#pragma GCC unroll 16
      for (int i = 0; i < kIR; ++i) {
        // vbroadcastsd from memory: a load-port broadcast of the 4 bf16 (no shuffle uop).
        double k;
        std::memcpy(&k, r[i] + 4 * c, 8);
        acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)_mm512_set1_pd(k), q);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < kIR; ++i) {
      const __m512 x = _mm512_add_ps(acc[i], _mm512_permute_ps(acc[i], 0xB1));
      _mm256_storeu_ps(S + (n0 + i) * 8,
                       _mm512_castps512_ps256(_mm512_maskz_compress_ps(0x5555, x)));
    }
  }
}

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

// O[m][:D] (permuted, see above) (= O * corr[m] |+=) sum_p Pp[p][m] . (V_2p, V_2p+1), 8 rows.
__attribute__((target("avx512bf16"))) void pv(int64_t np, int64_t D, const uint32_t* Pp,
                                               const uint16_t* const* vrows, int64_t off,
                                               float* O, flash::Acc mode, const float* corr,
                                               flash::LineCursor& pf) {
  for (int64_t c = 0; c < D; c += 32) {
    __m512 acc[8][2];
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m)
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
      for (int m = 0; m < 8; ++m) {
        const __m512bh pm = (__m512bh)_mm512_set1_epi32(int(Pp[p * 8 + m]));
        acc[m][0] = _mm512_dpbf16_ps(acc[m][0], pm, lo);
        acc[m][1] = _mm512_dpbf16_ps(acc[m][1], pm, hi);
      }
    }
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m)
      for (int v = 0; v < 2; ++v) _mm512_storeu_ps(O + m * D + c + 16 * v, acc[m][v]);
  }
}

// A decode task (M <= 8 lanes per KV head, head_dim a multiple of 32, bf16 cache) over
// t.num_heads KV heads: each tile's rows are found once and each head's slice of them is
// used in turn, so the tile's K and V rows are read whole (contiguous across heads).
void run_task(const FlashTask& t) {
  const int64_t G = t.group, M = t.rows * G, D = t.head_dim, H = t.num_heads;
  constexpr int64_t Mp = 8, kRowsCap = kTileN + 16;
  // Scratch: per head [Qp [D/4][16] dwords | O [8][D] | m, l, lo_sum, corr [8]], then
  // lim [8] | S [kRowsCap][8] | Pp [kRowsCap / 2][8] dwords | row pointers [4][kRowsCap]
  // (attention_impl::decode_scratch_floats).
  const int64_t per_head = 4 * D + 8 * D + 4 * Mp;
  auto Qp = [&](int64_t h) { return reinterpret_cast<uint32_t*>(t.scratch + h * per_head); };
  auto O = [&](int64_t h) { return t.scratch + h * per_head + 4 * D; };
  auto mrow = [&](int64_t h) { return t.scratch + h * per_head + 12 * D; };
  auto lrow = [&](int64_t h) { return mrow(h) + Mp; };
  auto lo_sum = [&](int64_t h) { return mrow(h) + 2 * Mp; };
  auto corr = [&](int64_t h) { return mrow(h) + 3 * Mp; };
  float* lim = t.scratch + H * per_head;
  float* S = lim + Mp;
  uint32_t* Pp = reinterpret_cast<uint32_t*>(S + kRowsCap * Mp);
  const uint16_t** rows_buf = reinterpret_cast<const uint16_t**>(Pp + kRowsCap / 2 * Mp);
  const uint16_t** krows[2] = {rows_buf, rows_buf + kRowsCap};
  const uint16_t** vrows[2] = {rows_buf + 2 * kRowsCap, rows_buf + 3 * kRowsCap};
  // Row pointers point at head 0 of the task; head h is + h * D.
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
  // Qp_h[c][2g + e] = bf16 pair (q[4c + 2e], q[4c + 2e + 1]) * scale of lane g (< M) of
  // head h (lane g = row g / G, q head g % G of the KV head); zero for g >= M.
  for (int64_t h = 0; h < H; ++h) {
    uint32_t* qp = Qp(h);
    for (int64_t c = 0; c < D / 4; ++c)
      for (int64_t l = 0; l < 16; ++l) {
        const int64_t g = l / 2, d = 4 * c + 2 * (l % 2);
        uint32_t w = 0;
        if (g < M) {
          const float* q = t.q + (g / G) * t.ldq + (h * G + g % G) * D;
          w = uint32_t(bf16(q[d] * t.scale_log2).bits) |
              (uint32_t(bf16(q[d + 1] * t.scale_log2).bits) << 16);
        }
        qp[c * 16 + l] = w;
      }
    for (int64_t m = 0; m < Mp; ++m) {
      mrow(h)[m] = -INFINITY;
      lrow(h)[m] = lo_sum(h)[m] = 0.f;
    }
  }
  for (int64_t m = 0; m < Mp; ++m) lim[m] = m < M ? float(m / G + t.diag) : 3e38f;
  bool first = true;
  int cur = 0;
  const int64_t row_bytes = H * D * 2;  // the task's heads, contiguous in a token's row
  fill_rows(std::min(kTileN, t.kv1 - t.kv0), krows[0], vrows[0]);
  for (int64_t j0 = t.kv0; j0 < t.kv1; j0 += kTileN) {
    const int64_t nv = std::min(kTileN, t.kv1 - j0);
    const int64_t rows_k = round_up(nv, kIR), np = (nv + 1) / 2;
    const int64_t n_next = std::min(kTileN, t.kv1 - j0 - nv);
    const uint16_t** kr = krows[cur];
    const uint16_t** vr = vrows[cur];
    fill_rows(n_next, krows[cur ^ 1], vrows[cur ^ 1]);
    for (int64_t n = nv; n < rows_k; ++n) kr[n] = kr[nv - 1];  // whole QK blocks; ignored
    for (int64_t n = nv; n < 2 * np; ++n) vr[n] = vr[nv - 1];  // P = 0 there
    // Prefetch the next tile's V during the QK phases, its K during the PV phases (a tile
    // ahead: the first tile's rows come from the caches' own prefetchers).
    flash::LineCursor pf_v(reinterpret_cast<const void* const*>(vrows[cur ^ 1]), n_next,
                           row_bytes, H * (rows_k / kIR) * (D / 4));
    flash::LineCursor pf_k(reinterpret_cast<const void* const*>(krows[cur ^ 1]), n_next,
                           row_bytes, H * (D / 32) * np);
    const bool masked = t.causal && j0 + nv - 1 > t.diag;
    for (int64_t h = 0; h < H; ++h) {
      qk(rows_k, D, kr, h * D, Qp(h), S, pf_v);
      softmax8(S, nv, masked, j0, lim, mrow(h), lrow(h), corr(h));
      pack_p(S, nv, Pp, lo_sum(h), corr(h));
      flash::Acc mode = flash::Acc::Zero;
      if (!first) {
        mode = flash::Acc::Add;
        for (int64_t m = 0; m < M; ++m)
          if (corr(h)[m] != 1.f) { mode = flash::Acc::ScaleAdd; break; }
      }
      pv(np, D, Pp, vr, h * D, O(h), mode, corr(h), pf_k);
    }
    first = false;
    cur ^= 1;
  }
  // O / lo_sum (the rounded weights' sum) and LSE = m + log2(l) (the exact sum).
  for (int64_t h = 0; h < H; ++h)
    for (int64_t m = 0; m < M; ++m) {
      float* dst = t.o + (m / G) * t.ldo + (h * G + m % G) * D;
      float& lse = t.lse[(m / G) * t.ld_lse + h * G + m % G];
      const float l = lrow(h)[m], lo = lo_sum(h)[m];
      if (l > 0.f && lo > 0.f) {
        const float inv = 1.f / lo;
        const float* src = O(h) + m * D;
        for (int64_t c = 0; c < D; c += 32)
          for (int64_t j = 0; j < 16; ++j) {
            dst[c + 8 * (j / 4) + j % 4] = src[c + j] * inv;
            dst[c + 8 * (j / 4) + 4 + j % 4] = src[c + 16 + j] * inv;
          }
        lse = mrow(h)[m] + std::log2(l);
      } else {
        for (int64_t d = 0; d < D; ++d) dst[d] = 0.f;
        lse = -INFINITY;
      }
    }
}

}  // namespace bf16dot

void flash_task(const FlashTask& t) {
  const int64_t M = t.rows * t.group;
  if (t.bf16_dot && t.kv_dtype == DType::BF16 && M <= 8 && t.head_dim % 32 == 0 &&
      bf16dot::cpu_has_bf16()) {
    bf16dot::run_task(t);
    return;
  }
  flash::per_head(t, [M](const FlashTask& u) {
    if (M <= 8) dispatch_dim<Y8>(u);
    else dispatch_dim<Z16>(u);
  });
}

void exp2_n(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) Z16::store(y + i, Z16::exp2(Z16::load(x + i)));
  for (; i < n; ++i) y[i] = _mm_cvtss_f32(_mm512_castps512_ps128(Z16::exp2(Z16::set1(x[i]))));
}

#include "kernels/attention_reference.inc"

}  // namespace cpinfer::attention_impl::avx512
