// AVX2 prefill attention: the flash tasks of more than 8 query lanes (query rows x the q heads
// of one KV head) with head_dim a multiple of 8, over an f32 or bf16 cache, in f32 arithmetic.
// The loop and the numerics contract are the flash core's (attention_flash.inc: KV tiles of
// kTileN tokens, online softmax in base 2, bottom-right causal mask, O / l and LSE = m +
// log2 l); what differs is where the operands live, for a CPU with 16 vector registers.
//
// The flash core's AVX2 register tiles (3 x 4 ymm accumulators) load one operand as vectors
// from L2 at every step: Qs [D][Mp] (64 KiB at 128 lanes and head_dim 128) once per 3 K rows
// in QK, and in PV a 32-column slice of the V tile (16 KiB, rows 512 bytes apart, so its lines
// fall on a quarter of L1's sets) once per 3 lanes: ~50% of the FMA peak on a Zen 3 core. Here
// the operand loaded as vectors is always one contiguous 16 KiB block that stays in L1:
//
//   Lanes in blocks of LB = 8 MV (MV = 4 ymm vectors; fewer for a task of <= 24 lanes), each
//   block contiguous: Qb [NB][D][LB], S [NB][kTileN + 16][LB], Ot [NB][D][LB], NB = Mp / LB.
//   Lane m is column m % LB of block m / LB. Example, LB 32: lane 70 is block 2, column 6.
//   QK: S^T[n][m] = sum_d K_n[d] Qb[d][m], K values broadcast (f32 rows read in place, bf16
//       rows widened once per tile into Kp), the block's Q rows loaded as vectors; blocks are
//       the outer loop, so a block's Q stays in L1 while the tile's K rows pass by.
//   softmax_tile (the flash core's) on each block, as on a task of LB lanes.
//   PV, transposed: O^T[d][m] (= O^T[d][m] * corr[m] |+=) sum_n Vt[d][n] P^T[n][m], with
//       Vt the tile's V transposed once (8 x 8 blocks; bf16 widened), its values broadcast,
//       the block's P^T rows loaded as vectors. The rescale is per lane, so per column here
//       (Acc::ScaleCols).
//   Output: lane m's row is column m % LB of Ot's block, read with stride LB.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/attention_avx2_vec.h"
#include "kernels/attention_impl.h"
#include "kernels/avx2_transpose.h"

namespace cpinfer::attention_impl::avx2 {

namespace {

using vec::kAccRegs;
using vec::Y8;

#include "kernels/attention_flash.inc"

using flash::Acc;

// 8 consecutive values of a cache row as f32 (bf16: the top half of an f32).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Vt[d][n] = V_n[d] for d < D, n < nv; Vt rows kTileN floats apart. By 8 x 8 blocks: rows n0..
// n0 + 7 become columns n0.. n0 + 7. In the last block, rows past nv repeat row nv - 1 (those
// columns are never read: PV sums over n < nv).
template <typename T>
void pack_vt(const T* const* vr, int64_t nv, int64_t D, float* __restrict Vt) {
  for (int64_t n0 = 0; n0 < nv; n0 += 8) {
    const T* r[8];
    for (int64_t i = 0; i < 8; ++i) r[i] = vr[std::min(n0 + i, nv - 1)];
    for (int64_t d0 = 0; d0 < D; d0 += 8) {
      __m256 x[8];
      for (int i = 0; i < 8; ++i) x[i] = load8(r[i] + d0);
      avx2_util::transpose8(x);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(Vt + (d0 + i) * kTileN + n0, x[i]);
    }
  }
}

// Kp[n][:D] = K_n widened to f32 for n < nv; rows [nv, rows_k) zero (QK reads whole blocks).
void pack_k(const uint16_t* const* kr, int64_t nv, int64_t rows_k, int64_t D,
            float* __restrict Kp) {
  for (int64_t n = 0; n < nv; ++n)
    for (int64_t d = 0; d < D; d += 8) _mm256_storeu_ps(Kp + n * D + d, load8(kr[n] + d));
  std::fill(Kp + nv * D, Kp + rows_k * D, 0.f);
}

// One KV head's task. MV: lane vectors per block (LB = 8 MV lanes); DC: compile-time head_dim
// (64, 128) or 0; T: the KV element type.
template <int MV, int64_t DC, typename T>
void run_task(const FlashTask& t) {
  constexpr int64_t LB = 8 * MV;
  constexpr int IR = flash::qk_ir(MV);  // accumulator rows per tile: 12 / MV
  constexpr int64_t ST = kTileN + 16;   // S rows per block (a tile rounded up to IR)
  constexpr bool kF32 = std::is_same_v<T, float>;
  const int64_t G = t.group, M = t.rows * G;
  const int64_t D = DC ? DC : t.head_dim;
  const int64_t Mp = round_up(M, LB), NB = Mp / LB;
  // Scratch (floats; within flash_scratch_floats(M, D), every block a multiple of 8 floats).
  float* Qb = t.scratch;     // [NB][D][LB]
  float* S = Qb + Mp * D;    // [NB][ST][LB]
  float* Kp = S + Mp * ST;   // [ST][D] (bf16 only)
  float* Vt = Kp + ST * D;   // [D][kTileN]
  float* Ot = Vt + D * kTileN;  // [NB][D][LB]
  float* mrow = Ot + Mp * D;    // [Mp] x 4
  float* lrow = mrow + Mp;
  float* corr = lrow + Mp;
  float* lim = corr + Mp;
  // K/V row pointers of this tile and the next (double buffered): [4][ST] after lim.
  const T** rows_buf = reinterpret_cast<const T**>(lim + Mp);
  const T** krows[2] = {rows_buf, rows_buf + ST};
  const T** vrows[2] = {rows_buf + 2 * ST, rows_buf + 3 * ST};
  const T* kb = static_cast<const T*>(t.k) + t.head_off;
  const T* vb = static_cast<const T*>(t.v) + t.head_off;
  flash::SlotWalk walk(t, t.kv0);
  auto fill_rows = [&](int64_t n, const T** kr, const T** vr) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t slot = walk.next();
      kr[i] = kb + slot * t.k_row;
      vr[i] = vb + slot * t.v_row;
    }
  };
  const int64_t row_bytes = D * int64_t(sizeof(T));

  // Qb = Q * sm_scale * log2(e) (zero in padding lanes); lane m (row m / G, head m % G) sees
  // tokens j <= m / G + diag, padding lanes everything.
  for (int64_t m = 0; m < Mp; ++m) {
    float* dst = Qb + (m / LB) * D * LB + m % LB;  // element d at dst[d * LB]
    if (m < M) {
      const float* src = t.q + (m / G) * t.ldq + (m % G) * D;
      for (int64_t d = 0; d < D; ++d) dst[d * LB] = src[d] * t.scale_log2;
    } else {
      for (int64_t d = 0; d < D; ++d) dst[d * LB] = 0.f;
    }
    lim[m] = m < M ? float(m / G + t.diag) : 3e38f;
    mrow[m] = -INFINITY;
    lrow[m] = 0.f;
  }

  bool first = true;
  int cur = 0;
  fill_rows(std::min(kTileN, t.kv1 - t.kv0), krows[0], vrows[0]);
  for (int64_t j0 = t.kv0; j0 < t.kv1; j0 += kTileN) {
    const int64_t nv = std::min(kTileN, t.kv1 - j0);
    const int64_t rows_k = round_up(nv, IR);
    const int64_t n_next = std::min(kTileN, t.kv1 - j0 - nv);
    const T** kn = krows[cur ^ 1];
    const T** vn = vrows[cur ^ 1];
    fill_rows(n_next, kn, vn);
    const T** kr = krows[cur];
    const T** vr = vrows[cur];

    // QK, block by block. The next tile's K/V rows are prefetched into L2 during block 0.
    if constexpr (kF32) {
      for (int64_t n = nv; n < rows_k; ++n) kr[n] = kr[nv - 1];  // whole tiles; ignored
    } else {
      pack_k(kr, nv, rows_k, D, Kp);
    }
    for (int64_t b = 0; b < NB; ++b) {
      const flash::DenseB qb{Qb + b * D * LB, LB};
      float* Sb = S + b * ST * LB;
      for (int64_t n = 0; n < rows_k; n += IR) {
        if (b == 0)
          for (int64_t i = n; i < std::min(n + IR, n_next); ++i)
            for (int64_t c = 0; c < row_bytes; c += 64) {
              __builtin_prefetch(reinterpret_cast<const char*>(kn[i]) + c, 0, 2);
              __builtin_prefetch(reinterpret_cast<const char*>(vn[i]) + c, 0, 2);
            }
        if constexpr (kF32)
          flash::micro<Y8, IR, MV>(D, flash::RowsA{kr + n}, qb, Sb + n * LB, LB, Acc::Zero,
                                   nullptr);
        else
          flash::micro<Y8, IR, MV>(D, flash::DenseA<DC>{Kp + n * D, D, 1}, qb, Sb + n * LB, LB,
                                   Acc::Zero, nullptr);
      }
    }

    // The smallest limit is lane 0's (row 0): diag. Only tiles reaching past it are masked.
    const bool masked = t.causal && j0 + nv - 1 > t.diag;
    for (int64_t b = 0; b < NB; ++b)
      flash::softmax_tile<Y8>(S + b * ST * LB, nv, LB, masked, j0, lim + b * LB, mrow + b * LB,
                              lrow + b * LB, corr + b * LB);

    // PV, transposed, block by block.
    pack_vt<T>(vr, nv, D, Vt);
    for (int64_t b = 0; b < NB; ++b) {
      const float* cb = corr + b * LB;
      Acc mode = Acc::Zero;
      if (!first) {
        mode = Acc::Add;
        for (int64_t j = 0; j < LB; ++j)
          if (cb[j] != 1.f) {
            mode = Acc::ScaleCols;
            break;
          }
      }
      flash::micro_rows<Y8, IR, MV>(D, nv, flash::DenseA<kTileN>{Vt, kTileN, 1},
                                    flash::DenseB{S + b * ST * LB, LB}, Ot + b * D * LB, LB,
                                    mode, cb);
    }
    first = false;
    cur ^= 1;
  }

  // O / l and LSE = m + log2(l); the empty state (0, -inf) where nothing was visible.
  for (int64_t m = 0; m < M; ++m) {
    float* dst = t.o + (m / G) * t.ldo + (m % G) * D;
    float& lse = t.lse[(m / G) * t.ld_lse + (m % G)];
    const float* src = Ot + (m / LB) * D * LB + m % LB;  // element d at src[d * LB]
    const float l = lrow[m];
    if (l > 0.f) {
      const float inv = 1.f / l;
      for (int64_t d = 0; d < D; ++d) dst[d] = src[d * LB] * inv;
      lse = mrow[m] + std::log2(l);
    } else {
      for (int64_t d = 0; d < D; ++d) dst[d] = 0.f;
      lse = -INFINITY;
    }
  }
}

template <int MV, typename T>
void dispatch_dim(const FlashTask& t) {
  switch (t.head_dim) {
    case 64: run_task<MV, 64, T>(t); break;
    case 128: run_task<MV, 128, T>(t); break;
    default: run_task<MV, 0, T>(t); break;
  }
}

template <typename T>
void dispatch_lanes(const FlashTask& t) {
  // Lane vectors per block: 4, or what a task of 9-24 lanes fills (9-16: 2, 17-24: 3).
  const int64_t M = t.rows * t.group;
  if (M > 24) dispatch_dim<4, T>(t);
  else if (M > 16) dispatch_dim<3, T>(t);
  else dispatch_dim<2, T>(t);
}

}  // namespace

bool prefill_task(const FlashTask& t) {
  if (t.rows * t.group <= kDecodeLanes || t.head_dim % 8 != 0) return false;
  const bool bf16 = t.kv_dtype == DType::BF16;
  flash::per_head(t, [bf16](const FlashTask& u) {
    if (bf16) dispatch_lanes<uint16_t>(u);
    else dispatch_lanes<float>(u);
  });
  return true;
}

}  // namespace cpinfer::attention_impl::avx2
