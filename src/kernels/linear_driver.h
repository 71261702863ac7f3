// Internal: the blocked GEMM driver shared by linear_{generic,avx2,avx512}.cpp. Templates
// only, instantiated with each ISA's kernel struct from that file's anonymous namespace, so
// every instantiation has internal linkage and is compiled with that file's ISA flags (no
// AVX-512 copy can be picked by the linker for the generic path).
//
// Loop nest of one task, y[m0:m1, n0:n1] (GotoBLAS order with the roles of A and B swapped,
// because W is the big, reused operand):
//   for each N chunk (<= kNcStrips strips of kNr W rows):
//     for each K block (<= kKcMax, balanced):
//       pack the W panel [chunk rows, K block] to f32, strip-major: strip s holds
//         wp[k * kNr + j] = W[row0 + s*kNr + j, k0 + k]          (L2-resident)
//       for each M tile (<= kMr x rows, balanced):
//         pack the x tile: xp[k * mr + i] = x[ma + i, k0 + k]    (L1-resident)
//         for each strip: microkernel, mr x kNr outputs in registers over the K block;
//           the first K block starts from bias (or 0), later ones from y.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/linear_impl.h"

namespace cpinfer::linear_impl {
// Internal linkage for everything here: each ISA file gets its own copy.
namespace {

// Start of part `i` when [0, len) is split into `parts` pieces differing by at most one.
template <typename I>
constexpr I split_point(I len, I parts, I i) {
  return i * len / parts;
}

template <typename I>
constexpr I ceil_div(I a, I b) {
  return (a + b - 1) / b;
}

// Asks for W[r, k0:k0+kc] for r in [r0, r1) ahead of use. Packing reads a strip as 16-32
// short interleaved row segments, which the hardware prefetchers do not follow; without
// this the packing of a cold W runs at a fraction of DRAM bandwidth.
inline void prefetch_rows(const WeightView& w, int64_t r0, int64_t r1, int64_t k0, int64_t kc) {
  const int64_t esz = int64_t(dtype_size(w.dtype));
  const auto* base = static_cast<const char*>(w.data);
  for (int64_t r = r0; r < r1; ++r) {
    const char* p = base + (r * w.ld + k0) * esz;
    for (int64_t b = 0; b < kc * esz; b += 64) __builtin_prefetch(p + b);
  }
}

// xp[k * mr + i] = x[i * ldx + k] for i < mr, k < kc.
template <typename Kern>
void pack_x_tile(const float* x, int64_t ldx, int mr, int64_t kc, float* xp) {
  for (int i = 0; i < mr; ++i) {
    const float* row = x + i * ldx;
    for (int64_t k = 0; k < kc; ++k) xp[k * mr + i] = row[k];
  }
}

// Kern provides: kMr, kNr, kKcMax, kNcStrips;
//   pack_w(w, row0, rows_valid, k0, kc, dst): dst[k * kNr + j] = W[row0 + j, k0 + k] for
//     j < rows_valid, 0 for rows_valid <= j < kNr;
//   micro(mr, kc, xp, wp, y, ldy, nv, bias, accumulate): y[i, j] (i < mr, j < nv) =
//     init + sum_k xp[k * mr + i] * wp[k * kNr + j], init = y if accumulate, else bias or 0.
template <typename Kern>
void gemm_task(const float* x, int64_t ldx, const WeightView& w, const float* bias, float* y,
               int64_t ldy, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  constexpr int64_t NR = Kern::kNr;
  const int64_t K = w.cols;
  const int64_t k_blocks = ceil_div<int64_t>(K, Kern::kKcMax);
  const int64_t kc_max = ceil_div(K, k_blocks);
  const int64_t strips = ceil_div(n1 - n0, NR);
  const int64_t n_chunks = ceil_div<int64_t>(strips, Kern::kNcStrips);
  const int64_t chunk_strips_max = ceil_div(strips, n_chunks);
  const int64_t m_tiles = ceil_div<int64_t>(m1 - m0, Kern::kMr);
  float* wpack = thread_scratch(0, size_t(chunk_strips_max * NR * kc_max));
  float* xpack = thread_scratch(1, size_t(Kern::kMr * kc_max));

  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t s0 = split_point(strips, n_chunks, c);
    const int64_t s1 = split_point(strips, n_chunks, c + 1);
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const int64_t k0 = split_point(K, k_blocks, kb);
      const int64_t kc = split_point(K, k_blocks, kb + 1) - k0;
      for (int64_t s = s0; s < s1; ++s) {
        const int64_t row0 = n0 + s * NR;
        if (s + 1 < s1) prefetch_rows(w, row0 + NR, std::min(row0 + 2 * NR, n1), k0, kc);
        Kern::pack_w(w, row0, int(std::min(NR, n1 - row0)), k0, kc, wpack + (s - s0) * NR * kc);
      }
      for (int64_t t = 0; t < m_tiles; ++t) {
        const int64_t ma = m0 + split_point(m1 - m0, m_tiles, t);
        const int mr = int(m0 + split_point(m1 - m0, m_tiles, t + 1) - ma);
        pack_x_tile<Kern>(x + ma * ldx + k0, ldx, mr, kc, xpack);
        for (int64_t s = s0; s < s1; ++s) {
          const int64_t row0 = n0 + s * NR;
          const float* b = (kb == 0 && bias) ? bias + row0 : nullptr;
          Kern::micro(mr, kc, xpack, wpack + (s - s0) * NR * kc, y + ma * ldy + row0, ldy,
                      int(std::min(NR, n1 - row0)), b, kb > 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace cpinfer::linear_impl
