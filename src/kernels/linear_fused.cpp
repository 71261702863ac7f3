#include "kernels/linear_fused.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "kernels/elementwise_impl.h"
#include "kernels/linear_impl.h"

namespace cpinfer {

namespace {

// Work units are blocks of B output rows of one part: whole GEMM strips, or 16 rows for
// the GEMV and skinny paths (no two tasks share a 64-byte line of y). Units are numbered part after part.
// Example, B 32, parts q [896], k [128], v [128]: units 0-27 are q's, 28-31 k's, 32-35 v's;
// tasks take contiguous runs of them.
int64_t unit_rows(bool gemv, const linear_impl::Kernels& k) { return gemv ? 16 : k.nr; }

// Tasks over `units` units: about four per thread for the GEMV (an oversubscribed rank
// still balances), about one packed panel each for the GEMM, never below kMinMacsPerTask.
int64_t task_count(bool gemv, const linear_impl::Kernels& k, int64_t units, int64_t macs,
                   int64_t threads) {
  int64_t t = gemv ? threads * 4 : (units + k.nc_strips - 1) / k.nc_strips;
  if (!gemv) t = (t + threads - 1) / threads * threads;
  t = std::min({t, units, std::max<int64_t>(1, macs / linear_impl::kMinMacsPerTask)});
  return std::max<int64_t>(t, 1);
}

// Runs units [u0, u1) for x rows [m0, m1) on one thread: one kernel call per part it touches
// (so the GEMM packs its panels as linear() does), then RoPE over the rows [n0, n1) of parts
// marked for it (B is then a multiple of head_dim, so [n0, n1) is whole heads). Only the
// GEMM takes a part of M; the GEMV and skinny paths run all of it (m0 = 0, m1 = M).
void run_units(const linear_impl::Kernels& k, linear_impl::Path path, const float* x, int64_t M,
               int64_t ldx, std::span<const LinearPart> parts, int64_t B, int64_t u0, int64_t u1,
               int64_t m0, int64_t m1, const RotaryEpilogue* rope) {
  int64_t first = 0;  // first unit of part p
  for (const LinearPart& p : parts) {
    const int64_t count = (p.w.rows + B - 1) / B;
    const int64_t a = std::max(u0, first) - first, b = std::min(u1, first + count) - first;
    if (a < b) {
      const int64_t n0 = a * B, n1 = std::min(p.w.rows, b * B);
      if (linear_impl::is_gemm(path)) k.gemm(x, ldx, p.w, p.bias, p.y, p.ldy, m0, m1, n0, n1);
      else linear_impl::rows_kernel(k, path)(x, M, ldx, p.w, p.bias, p.y, p.ldy, n0, n1);
      if (rope && p.rope) {
        const elementwise_impl::Kernels& ek = elementwise_impl::active_kernels();
        const int64_t D = rope->head_dim, half = D / 2;
        for (int64_t m = m0; m < m1; ++m) {
          float* row = p.y + m * p.ldy + n0;
          if (p.head_norm) {  // the same arithmetic as rms_norm() over [heads, D] rows
            for (float* h = row; h < row + (n1 - n0); h += D) {
              const float s = elementwise_impl::inv_rms(ek.sum_squares(h, D), D, rope->norm_eps);
              ek.scale_mul(h, s, p.head_norm, DType::F32, D, h);
            }
          }
          ek.rope(row, (n1 - n0) / D, D, rope->cos + m * half, rope->sin + m * half);
        }
      }
    }
    first += count;
  }
}

// The dtype that decides the path of parts run together: Q8_0 if any part is (it has no
// skinny kernel), else the first part's.
DType path_dtype(std::span<const LinearPart> parts) {
  for (const LinearPart& p : parts)
    if (p.w.dtype == DType::Q8_0) return DType::Q8_0;
  return parts[0].w.dtype;
}

// choose_path for the parts' path_dtype; the int8-dot GEMV and GEMM read only Q8_0
// weights, so parts of mixed dtypes take the f32 GEMV or GEMM instead (on the same
// quantized x).
linear_impl::Path fused_path(int64_t M, std::span<const LinearPart> parts) {
  using linear_impl::Path;
  const Path p = linear_impl::choose_path(linear_impl::active_kernels(), M, parts[0].w.cols,
                                          path_dtype(parts));
  if (!linear_impl::reads_int8_rows(p)) return p;
  for (const LinearPart& part : parts)
    if (part.w.dtype != DType::Q8_0) return p == Path::GemvInt8Dot ? Path::Gemv : Path::Gemm;
  return p;
}

void check_parts(const float* x, int64_t M, int64_t ldx, std::span<const LinearPart> parts) {
  CPI_CHECK(!parts.empty(), "linear_fused: no parts");
  for (const LinearPart& p : parts) {
    linear_impl::check_args(x, M, ldx, p.w, p.y, p.ldy);
    CPI_CHECK(p.w.cols == parts[0].w.cols, "linear_fused: parts have K = {} and K = {}",
              parts[0].w.cols, p.w.cols);
  }
}

}  // namespace

void linear_fused(const float* x, int64_t M, int64_t ldx, std::span<const LinearPart> parts,
                  ThreadPool& pool, const RotaryEpilogue* rope) {
  check_parts(x, M, ldx, parts);
  for (const LinearPart& p : parts)
    CPI_CHECK(!p.head_norm || (rope && p.rope), "linear_fused: a part has a head_norm but no "
              "RoPE epilogue (the norm runs in it, over whole heads)");
  if (rope) {
    CPI_CHECK(rope->norm_eps > 0, "linear_fused: head-norm epsilon must be positive, found {}",
              rope->norm_eps);
    const int64_t D = rope->head_dim;
    CPI_CHECK(D >= 2 && D % 2 == 0, "linear_fused: RoPE head_dim {} must be even and >= 2", D);
    for (const LinearPart& p : parts)
      CPI_CHECK(!p.rope || p.w.rows % D == 0,
                "linear_fused: a RoPE part has {} rows, not whole heads of {}", p.w.rows, D);
    CPI_CHECK(M == 0 || (rope->cos && rope->sin), "linear_fused: RoPE tables are null");
  }
  if (M == 0) return;
  const linear_impl::Path path = fused_path(M, parts);
  const linear_impl::Kernels& k =
      linear_impl::kernels_for_path(linear_impl::active_kernels(), path);
  const bool gemv = !linear_impl::is_gemm(path);
  x = linear_impl::rows_for_path(x, M, ldx, parts[0].w.cols, path_dtype(parts), path, pool);
  // With RoPE, units are whole heads: the smallest multiple of the kernel's unit and of
  // head_dim (e.g. 32-row GEMM strips, head_dim 64: units of 64 rows = 2 strips).
  const int64_t B = rope ? std::lcm(unit_rows(gemv, k), rope->head_dim) : unit_rows(gemv, k);
  int64_t units = 0, macs = 0;
  for (const LinearPart& p : parts) {
    units += (p.w.rows + B - 1) / B;
    macs += M * p.w.rows * p.w.cols;
  }
  // Counted in the kernel's own units (strips / 16-row blocks), at most one task per unit.
  const int64_t tasks =
      std::min(units, task_count(gemv, k, units * (B / unit_rows(gemv, k)), macs, pool.size()));
  // GEMM: when the units do not split evenly over the tasks, M is split as well, into about
  // four tasks per thread, so that the pool's dynamic hand-out evens out the threads'
  // shares. Example, Qwen2.5-0.5B's q | k | v at M = 2048 (18 units of 64 rows, 4 tasks of
  // 4, 5, 4 and 5 units): alone, one thread would get 10 units and the other 8; with M in 2
  // pieces there are 8 tasks of 2 or 2.5 units, and the shares come out 9 and 9.
  int64_t m_tasks = 1;
  const int64_t T = pool.size();
  if (!gemv && T > 1 && units % tasks != 0) {
    const int64_t m_tiles = (M + k.mr - 1) / k.mr;
    m_tasks = std::min({(4 * T + tasks - 1) / tasks, m_tiles,
                        std::max<int64_t>(1, macs / linear_impl::kMinMacsPerTask / tasks)});
    m_tasks = std::max<int64_t>(m_tasks, 1);
  }
  pool.run(tasks * m_tasks, [&](int64_t t, int) {
    const int64_t tn = t / m_tasks, tm = t % m_tasks;
    // M pieces in whole microkernel tiles (the last one takes the remainder).
    const int64_t m_tiles = (M + k.mr - 1) / k.mr;
    const int64_t m0 = gemv ? 0 : std::min(M, m_tiles * tm / m_tasks * k.mr);
    const int64_t m1 = gemv ? M : std::min(M, m_tiles * (tm + 1) / m_tasks * k.mr);
    if (m0 < m1)
      run_units(k, path, x, M, ldx, parts, B, units * tn / tasks, units * (tn + 1) / tasks, m0,
                m1, rope);
  });
}

void linear_gate_up_silu(const float* x, int64_t M, int64_t ldx, const WeightView& gate,
                         const WeightView& up, float* gu, float* act, ThreadPool& pool) {
  const int64_t F = gate.rows;
  const LinearPart parts[2] = {{gate, nullptr, gu, 2 * F}, {up, nullptr, gu + F, 2 * F}};
  check_parts(x, M, ldx, parts);
  CPI_CHECK(up.rows == F, "linear_gate_up_silu: gate has {} rows, up {}", F, up.rows);
  CPI_CHECK(act != nullptr || M == 0, "linear_gate_up_silu: act is null");
  if (M == 0) return;
  const elementwise_impl::Kernels& ek = elementwise_impl::active_kernels();
  const linear_impl::Path path = fused_path(M, parts);
  const linear_impl::Kernels& k =
      linear_impl::kernels_for_path(linear_impl::active_kernels(), path);
  const bool gemv = !linear_impl::is_gemm(path);
  x = linear_impl::rows_for_path(x, M, ldx, gate.cols, path_dtype(parts), path, pool);
  const int64_t B = unit_rows(gemv, k);
  // A task owns a block of columns [c0, c1) of F: it computes gate and up rows c0..c1
  // (gu[:, c0:c1] and gu[:, F + c0 : F + c1]), then act[:, c0:c1] = silu(gate) * up.
  const int64_t blocks = (F + B - 1) / B;
  const int64_t tasks = std::min(
      blocks, std::max<int64_t>(1, task_count(gemv, k, 2 * blocks, 2 * M * F * gate.cols,
                                               pool.size()) / 2));
  pool.run(tasks, [&](int64_t t, int) {
    const int64_t c0 = std::min(F, blocks * t / tasks * B);
    const int64_t c1 = std::min(F, blocks * (t + 1) / tasks * B);
    if (c0 >= c1) return;
    if (gemv) {
      const linear_impl::GemvFn rows = linear_impl::rows_kernel(k, path);
      rows(x, M, ldx, gate, nullptr, gu, 2 * F, c0, c1);
      rows(x, M, ldx, up, nullptr, gu + F, 2 * F, c0, c1);
      for (int64_t m = 0; m < M; ++m)
        ek.silu_mul(gu + m * 2 * F + c0, gu + m * 2 * F + F + c0, c1 - c0, act + m * F + c0);
    } else if (k.gate_up_silu) {
      k.gate_up_silu(x, ldx, gate, up, gu, act, M, c0, c1);
    } else {
      linear_impl::gate_up_silu_unfused(k, x, ldx, gate, up, gu, act, M, c0, c1);
    }
  });
}

void linear_impl::gate_up_silu_unfused(const Kernels& k, const float* x, int64_t ldx,
                                       const WeightView& gate, const WeightView& up, float* gu,
                                       float* act, int64_t M, int64_t c0, int64_t c1) {
  const int64_t F = gate.rows;
  k.gemm(x, ldx, gate, nullptr, gu, 2 * F, 0, M, c0, c1);
  k.gemm(x, ldx, up, nullptr, gu + F, 2 * F, 0, M, c0, c1);
  const elementwise_impl::Kernels& ek = elementwise_impl::active_kernels();
  for (int64_t m = 0; m < M; ++m)
    ek.silu_mul(gu + m * 2 * F + c0, gu + m * 2 * F + F + c0, c1 - c0, act + m * F + c0);
}

}  // namespace cpinfer
