// Internal: the GEMV and blocked-GEMM drivers shared by linear_{generic,avx2,avx512}.cpp.
// Templates only, instantiated with each ISA's kernel struct from that file's anonymous
// namespace, so every instantiation has internal linkage and is compiled with that file's
// ISA flags (no AVX-512 copy can be picked by the linker for the generic path).
//
// GEMM loop nest of one task, y[m0:m1, n0:n1] (GotoBLAS order with the roles of A and B
// swapped, because W is the big, reused operand):
//   for each N chunk (<= kNcStrips strips of kNr W rows):
//     for each K block (<= kKcMax, balanced):
//       pack the W panel [chunk rows, K block] to f32, strip-major: strip s holds
//         wp[k * kNr + j] = W[row0 + s*kNr + j, k0 + k]          (L2-resident)
//       for each M tile (<= kMr x rows, balanced):
//         pack the x tile: xp[k * mr + i] = x[ma + i, k0 + k]    (L1-resident)
//         for each strip: microkernel, mr x kNr outputs in registers over the K block;
//           the first K block starts from bias (or 0), later ones from y.
// The GEMV's loop nest is described above gemv_task_t.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/linear_impl.h"
#include "kernels/quantize.h"

namespace cpinfer::linear_impl {
// Internal linkage for everything here: each ISA file gets its own copy.
namespace {

// Bytes of n consecutive elements of a row of DT, and the K granule a kernel may start a
// slice of K at: Q8_0 rows are cut only at 32-element block boundaries (linear() checks
// K % 32 == 0 and ld % 32 == 0). Example: Q8_0, 896 elements = 28 blocks = 952 bytes.
template <DType DT>
constexpr int64_t row_bytes(int64_t n) {
  if constexpr (DT == DType::Q8_0) return n / kQ8BlockElems * kQ8BlockBytes;
  else return n * (DT == DType::F32 ? 4 : 2);
}
constexpr int64_t k_granule(DType dt) { return dt == DType::Q8_0 ? kQ8BlockElems : 1; }

// Start of part `i` when [0, len) is split into `parts` pieces differing by at most one.
template <typename I>
constexpr I split_point(I len, I parts, I i) {
  return i * len / parts;
}

template <typename I>
constexpr I ceil_div(I a, I b) {
  return (a + b - 1) / b;
}

// xp[k * mr + i] = x[i * ldx + k] for i < mr, k < kc.
template <typename Kern>
void pack_x_tile(const float* x, int64_t ldx, int mr, int64_t kc, float* xp) {
  for (int i = 0; i < mr; ++i) {
    const float* row = x + i * ldx;
    for (int64_t k = 0; k < kc; ++k) xp[k * mr + i] = row[k];
  }
}

// ---- GEMV (decode) ----------------------------------------------------------------------
//
// Each W row is read front to back once from memory, for all M rows of x: one sequential
// stream is what the hardware prefetchers follow best (interleaving even two rows halves
// the DRAM bandwidth here). While the first group of x rows streams row n, the kernel
// prefetches the same piece of row n + 2, spread over its loop: the hardware prefetcher
// alone does not run far enough ahead to keep DRAM busy while the core computes (Xeon with
// AVX512_BF16, 1 thread, qwen2.5-0.5b gate/up [9728, 896]: bf16 8.8-9.6 -> 12.4-12.8 GB/s,
// the thread's read peak; Q8_0, whose widening costs more per byte, 6.2 -> 10.4 GB/s).
// Not on every CPU: on AMD Zen 4 the same prefetch halves the bf16 GEMV's stream, so it is
// a per-CPU choice (gemv_prefetch_for).
// x rows go in groups of up to 4 per pass over a W row.
//   * Several groups (M > 4): W rows go in blocks of about 16 KB, so the block the first
//     group pulled from DRAM is still in L1/L2 for the others.
//   * A group of x longer than ~20 KB (4 B * rows * K) no longer shares L1 with the W
//     stream and every x load misses; then K is split into chunks whose x fits in 12 KB
//     and the partial sums accumulate in y (rows are then read in strided pieces, and the
//     prefetch two rows ahead matters more).
inline constexpr int64_t kGemvXGroup = 4;
inline constexpr int64_t kGemvXBytesMax = 20 << 10;
inline constexpr int64_t kGemvXChunkBytes = 12 << 10;
inline constexpr int64_t kGemvBlockBytes = 16 << 10;
inline constexpr int64_t kGemvPrefetchRows = 2;

// Kern provides: template <DType DT, int MM> row(x, ldx, w, K, bias, accumulate, y, ldy, pf):
//   y[m * ldy] = (accumulate ? y[m * ldy] : bias) + x[m, 0:K] · w[0:K] for m < MM, and
//   prefetches pf[0 : K elements] when pf is not null (DT F32, BF16, F16); and
//   template <int MM> row_q8_0(same arguments): the same over K / 32 Q8_0 blocks.
template <typename Kern, DType DT, int MM>
inline void gemv_row(const float* x, int64_t ldx, const char* w, int64_t K, float bias,
                     bool accumulate, float* y, int64_t ldy, const char* pf) {
  if constexpr (DT == DType::Q8_0)
    Kern::template row_q8_0<MM>(x, ldx, w, K, bias, accumulate, y, ldy, pf);
  else
    Kern::template row<DT, MM>(x, ldx, w, K, bias, accumulate, y, ldy, pf);
}

// A Kern with `static constexpr bool kPackedRows = true` reads x rows in its own packed form
// (row m at x + m * ldx floats, whole rows only): no K chunks then. Those are the int8-dot
// kernels; the GEMV's software prefetch follows its own rule (gemv_int8_dot_prefetch).
template <typename Kern>
constexpr bool packed_rows() {
  if constexpr (requires { Kern::kPackedRows; }) return Kern::kPackedRows;
  else return false;
}

template <typename Kern, DType DT>
void gemv_task_t(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
                 float* y, int64_t ldy, int64_t n0, int64_t n1) {
  const int64_t K = w.cols, g = k_granule(DT);
  const auto* base = static_cast<const char*>(w.data);
  const int64_t x_bytes = std::min(M, kGemvXGroup) * K * int64_t(sizeof(float));
  const int64_t k_chunks =
      packed_rows<Kern>() ? 1
      : std::min(K / g, x_bytes > kGemvXBytesMax ? ceil_div(x_bytes, kGemvXChunkBytes) : 1);
  const int64_t chunk_bytes = row_bytes<DT>(ceil_div(K / g, k_chunks) * g);
  const int64_t ld_bytes = row_bytes<DT>(w.ld);
  const bool prefetch = packed_rows<Kern>() ? gemv_int8_dot_prefetch() : gemv_prefetch_for(DT);
  const int64_t block =
      M <= kGemvXGroup ? n1 - n0 : std::max<int64_t>(1, kGemvBlockBytes / chunk_bytes);
  for (int64_t c = 0; c < k_chunks; ++c) {
    // Chunks in whole granules: k0 = g * (the c-th split point of K / g granules).
    const int64_t k0 = g * split_point(K / g, k_chunks, c);
    const int64_t kc = g * split_point(K / g, k_chunks, c + 1) - k0;
    for (int64_t nb = n0; nb < n1; nb += block) {
      const int64_t ne = std::min(n1, nb + block);
      for (int64_t m = 0; m < M; m += kGemvXGroup) {
        const float* xm = x + m * ldx + k0;
        for (int64_t n = nb; n < ne; ++n) {
          const char* wr = base + n * ld_bytes + row_bytes<DT>(k0);
          const char* pf = prefetch && m == 0 && n + kGemvPrefetchRows < n1
                               ? wr + kGemvPrefetchRows * ld_bytes
                               : nullptr;
          const float b = bias ? bias[n] : 0.0f;
          float* ym = y + m * ldy + n;
          switch (std::min(kGemvXGroup, M - m)) {
            case 1: gemv_row<Kern, DT, 1>(xm, ldx, wr, kc, b, c > 0, ym, ldy, pf); break;
            case 2: gemv_row<Kern, DT, 2>(xm, ldx, wr, kc, b, c > 0, ym, ldy, pf); break;
            case 3: gemv_row<Kern, DT, 3>(xm, ldx, wr, kc, b, c > 0, ym, ldy, pf); break;
            default: gemv_row<Kern, DT, 4>(xm, ldx, wr, kc, b, c > 0, ym, ldy, pf); break;
          }
        }
      }
    }
  }
}

template <typename Kern>
void gemv_task(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
               float* y, int64_t ldy, int64_t n0, int64_t n1) {
  switch (w.dtype) {
    case DType::BF16: return gemv_task_t<Kern, DType::BF16>(x, M, ldx, w, bias, y, ldy, n0, n1);
    case DType::F16: return gemv_task_t<Kern, DType::F16>(x, M, ldx, w, bias, y, ldy, n0, n1);
    case DType::Q8_0: return gemv_task_t<Kern, DType::Q8_0>(x, M, ldx, w, bias, y, ldy, n0, n1);
    default: return gemv_task_t<Kern, DType::F32>(x, M, ldx, w, bias, y, ldy, n0, n1);
  }
}

// Prefetches bytes [0, bytes) of pf spread evenly over a loop of `steps` steps, one 64-byte
// line at a time: at(i) at the top of step i issues the lines due by then, rest() after the
// loop issues what is left. pf null: nothing. Example: 10 lines over 4 steps: step 0
// issues lines 0-2 (line l is due at step l * steps / lines), 1: 3-4, 2: 5-7, 3: 8-9.
class SpreadPrefetch {
 public:
  SpreadPrefetch(const char* pf, int64_t bytes, int64_t steps)
      : pf_(pf), lines_(pf ? (bytes + 63) / 64 : 0), steps_(steps),
        to_l2_(skinny_prefetch_to_l2()) {}
  void at(int64_t step) {
    while (next_ < lines_ && next_ * steps_ < (step + 1) * lines_) issue();
  }
  void rest() {
    while (next_ < lines_) issue();
  }

 private:
  // Read; into L1 (prefetcht0), or into L2 only (prefetcht1) where skinny_prefetch_to_l2().
  void issue() {
    if (to_l2_) __builtin_prefetch(pf_ + 64 * next_++, 0, 2);
    else __builtin_prefetch(pf_ + 64 * next_++, 0, 3);
  }
  const char* pf_;
  int64_t lines_, steps_, next_ = 0;
  bool to_l2_;
};

// The N instantiations of a kernel template over its row count, as a table of function
// pointers indexed by rows - 1, so that a run-time row count picks its compile-time kernel
// in one indirect call. pick(std::integral_constant<int, R>) returns the pointer for R rows.
// Example, N 14: table[3] is pick(integral_constant<int, 4>), e.g. &micro_t<4>.
template <int N, typename Fn, typename Pick>
constexpr std::array<Fn, N> rows_table(Pick pick) {
  return [&]<int... I>(std::integer_sequence<int, I...>) {
    return std::array<Fn, N>{pick(std::integral_constant<int, I + 1>{})...};
  }(std::make_integer_sequence<int, N>());
}

// Kern::tile<DT, mr>(args...) for a run-time mr in [1, Kern::kSm] (rows_table above).
template <typename Kern, DType DT, typename... Args>
void tile_for_rows(int mr, Args... args) {
  using Fn = void (*)(Args...);
  static constexpr auto table =
      rows_table<Kern::kSm, Fn>([](auto r) -> Fn { return &Kern::template tile<DT, r()>; });
  table[size_t(mr - 1)](args...);
}

// ---- Skinny GEMM (decode batches) -----------------------------------------------------
//
// y[0:M, n0:n1] for a few dozen x rows at most, W read in its own dtype with no packing:
//   for each group of kSn consecutive W rows (n, n+1, ..., n+kSn-1):
//     for each tile of at most kSm x rows (balanced split of M):
//       tile: kSm x kSn dot products over all of K, in registers; every 16 W elements are
//       widened once and used for all the tile's x rows.
// The group's W rows (kSn * K elements: 7 KB for K = 896 in bf16) come from DRAM during the
// first tile and from L1/L2 for the others. While the tiles run, the kernel prefetches the
// next group's rows, so the four row streams do not each wait on DRAM.
// Example, M = 16, kSm = 6: tiles of x rows 0-4, 5-10, 11-15 (5, 6, 5 rows).
//
// Kern provides: kSm, kSn; template <DType DT, int MM> tile(x, ldx, rows[kSn], K, bias[kSn],
//   y, ldy, nv, pf, pf_bytes): y[m * ldy + j] = bias[j] + x[m, 0:K] · rows[j][0:K] for m < mr <= kSm,
//   j < nv (rows[j] for j >= nv point at valid memory and are not stored); prefetches
//   pf[0 : pf_bytes] spread over the K loop when pf is not null.
template <typename Kern, DType DT>
void skinny_task_t(const float* x, int64_t M, int64_t ldx, const WeightView& w,
                   const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  constexpr int SN = Kern::kSn;
  const int64_t K = w.cols, esz = int64_t(dtype_size(DT));
  const auto* base = static_cast<const char*>(w.data);
  const int64_t m_tiles = ceil_div<int64_t>(M, Kern::kSm);
  for (int64_t n = n0; n < n1; n += SN) {
    const int nv = int(std::min<int64_t>(SN, n1 - n));
    const char* rows[SN];
    float b[SN];
    for (int j = 0; j < SN; ++j) {
      const int64_t r = n + std::min(j, nv - 1);  // rows past n1 repeat the last valid one
      rows[j] = base + r * w.ld * esz;
      b[j] = bias ? bias[r] : 0.0f;
    }
    // The next group's rows: [row n + SN, row min(n1, n + 2 SN) - 1 + K elements).
    const int64_t next_rows = std::min<int64_t>(SN, n1 - (n + SN));
    const char* pf = next_rows > 0 ? base + (n + SN) * w.ld * esz : nullptr;
    const int64_t pf_bytes = next_rows > 0 ? ((next_rows - 1) * w.ld + K) * esz : 0;
    // The next group's prefetch is spread over every tile of this group (tile t issues
    // lines [t L / m_tiles, (t + 1) L / m_tiles) of its L lines), so the memory stream keeps
    // going while the later tiles compute from L1. Example: 112 lines (4 rows of 896 bf16),
    // 2 tiles: lines 0-55 during tile 0, 56-111 during tile 1.
    const int64_t pf_lines = (pf_bytes + 63) / 64;
    for (int64_t t = 0; t < m_tiles; ++t) {
      const int64_t ma = split_point(M, m_tiles, t);
      const int mr = int(split_point(M, m_tiles, t + 1) - ma);
      const int64_t l0 = split_point(pf_lines, m_tiles, t), l1 = split_point(pf_lines, m_tiles, t + 1);
      tile_for_rows<Kern, DT>(mr, x + ma * ldx, ldx, static_cast<const char* const*>(rows), K,
                              static_cast<const float*>(b), y + ma * ldy + n, ldy, nv,
                              pf && l1 > l0 ? pf + 64 * l0 : nullptr, 64 * (l1 - l0));
    }
  }
}

template <typename Kern>
void skinny_task(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
                 float* y, int64_t ldy, int64_t n0, int64_t n1) {
  switch (w.dtype) {
    case DType::BF16: return skinny_task_t<Kern, DType::BF16>(x, M, ldx, w, bias, y, ldy, n0, n1);
    case DType::F16: return skinny_task_t<Kern, DType::F16>(x, M, ldx, w, bias, y, ldy, n0, n1);
    default: return skinny_task_t<Kern, DType::F32>(x, M, ldx, w, bias, y, ldy, n0, n1);
  }
}

// ---- GEMM (prefill) ----------------------------------------------------------------------

// Kern provides: kMr, kNr, kKcMax, kNcStrips;
//   pack_w(w, row0, rows_valid, k0, kc, dst): dst[k * kNr + j] = W[row0 + j, k0 + k] for
//     j < rows_valid, 0 for rows_valid <= j < kNr;
//   optionally pack_x(x, ldx, mr, kc, xp): what pack_x_tile does, faster;
//   micro(mr, kc, xp, wp, y, ldy, nv, bias, accumulate): y[i, j] (i < mr, j < nv) =
//     init + sum_k xp[k * mr + i] * wp[k * kNr + j], init = y if accumulate, else bias or 0.
// A Kern with its own formats (the int8-dot GEMM) provides instead of pack_w for Q8_0
// weights pack_w_q8_0(w, row0, rows, k0, kc, dst) (at most kNr * kc floats), and with
// kPackedRows (x rows in its packed form, see gemv_task_t) pack_x_rows(x_row0, ldx, K, mr,
// k0, kc, xp): the tile of rows x_row0 .. + mr over columns [k0, k0 + kc), at most
// kMr * kc floats; micro then reads those formats.
// Q8_0 W panels: rows [row0, row0 + rows) x columns [k0, k0 + kc) (k0, kc whole blocks)
// dequantized into f32 scratch, then packed by the ISA's f32 packer as any f32 weight.
template <typename Kern>
void pack_w_q8_0(const WeightView& w, int64_t row0, int rows, int64_t k0, int64_t kc,
                 float* dst) {
  float* rows_f32 = thread_scratch(2, size_t(Kern::kNr * kc));
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int j = 0; j < rows; ++j)
    dequantize_row_q8_0(base + row_bytes<DType::Q8_0>((row0 + j) * w.ld + k0), kc,
                        rows_f32 + j * kc);
  const WeightView f32{rows_f32, DType::F32, rows, kc, kc};
  Kern::pack_w(f32, 0, rows, 0, kc, dst);
}

// Floats of room past kMr * kc in the x scratch: an ISA's pack_x may store whole vectors
// whose last lanes fall past the tile (linear_avx2.cpp).
inline constexpr int64_t kXPackSlack = 16;

template <typename Kern>
void gemm_task(const float* x, int64_t ldx, const WeightView& w, const float* bias, float* y,
               int64_t ldy, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  constexpr int64_t NR = Kern::kNr;
  const int64_t K = w.cols, g = k_granule(w.dtype);
  // K blocks of whole granules (see gemv_task_t), at most kKcMax each where g allows.
  const int64_t k_blocks = std::min(K / g, ceil_div<int64_t>(K, Kern::kKcMax));
  const int64_t kc_max = g * ceil_div(K / g, k_blocks);
  const int64_t strips = ceil_div(n1 - n0, NR);
  const int64_t n_chunks = ceil_div<int64_t>(strips, Kern::kNcStrips);
  const int64_t chunk_strips_max = ceil_div(strips, n_chunks);
  const int64_t m_tiles = ceil_div<int64_t>(m1 - m0, Kern::kMr);
  float* wpack = thread_scratch(0, size_t(chunk_strips_max * NR * kc_max));
  float* xpack = thread_scratch(1, size_t(Kern::kMr * kc_max + kXPackSlack));

  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t s0 = split_point(strips, n_chunks, c);
    const int64_t s1 = split_point(strips, n_chunks, c + 1);
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const int64_t k0 = g * split_point(K / g, k_blocks, kb);
      const int64_t kc = g * split_point(K / g, k_blocks, kb + 1) - k0;
      for (int64_t s = s0; s < s1; ++s) {
        const int64_t row0 = n0 + s * NR;
        const int rows = int(std::min(NR, n1 - row0));
        if constexpr (requires { Kern::pack_w_q8_0(w, row0, rows, k0, kc, wpack); })
          Kern::pack_w_q8_0(w, row0, rows, k0, kc, wpack + (s - s0) * NR * kc);
        else if (w.dtype == DType::Q8_0)
          pack_w_q8_0<Kern>(w, row0, rows, k0, kc, wpack + (s - s0) * NR * kc);
        else
          Kern::pack_w(w, row0, rows, k0, kc, wpack + (s - s0) * NR * kc);
      }
      for (int64_t t = 0; t < m_tiles; ++t) {
        const int64_t ma = m0 + split_point(m1 - m0, m_tiles, t);
        const int mr = int(m0 + split_point(m1 - m0, m_tiles, t + 1) - ma);
        if constexpr (packed_rows<Kern>())
          Kern::pack_x_rows(x + ma * ldx, ldx, K, mr, k0, kc, xpack);
        else if constexpr (requires { Kern::pack_x(x, ldx, mr, kc, xpack); })
          Kern::pack_x(x + ma * ldx + k0, ldx, mr, kc, xpack);  // the ISA's own transpose
        else
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
