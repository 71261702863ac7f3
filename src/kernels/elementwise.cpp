// rms_norm, add_rms_norm, silu_mul, rope_tables, rope_apply: argument checks, the split
// of rows across the pool, and the choice of per-ISA row kernels (elementwise_impl.h).
#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>

#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/elementwise_impl.h"

namespace cpinfer {

const elementwise_impl::Kernels& elementwise_impl::active_kernels() {
  switch (active_isa()) {
    case Isa::Avx512: return avx512_kernels();
    case Isa::Avx2: return avx2_kernels();
    default: return generic_kernels();
  }
}

namespace {

const elementwise_impl::Kernels& kernels() { return elementwise_impl::active_kernels(); }

// Rows per pool chunk so that a chunk holds at least this many elements: below that the
// hand-off to another thread costs more than the work (decode rows run inline).
constexpr int64_t kMinElemsPerChunk = 16384;

int64_t grain_rows(int64_t row_elems) {
  return std::max<int64_t>(1, kMinElemsPerChunk / std::max<int64_t>(1, row_elems));
}

void check_norm_args(const char* op, const void* w, DType w_dtype, int64_t n, int64_t d,
                     double eps) {
  CPI_CHECK(w_dtype == DType::F32 || w_dtype == DType::BF16 || w_dtype == DType::F16,
            "{}: weight dtype {} is not F32, BF16 or F16", op, dtype_name(w_dtype));
  CPI_CHECK(n >= 0 && d >= 1, "{}: shape [{}, {}] is invalid (need n >= 0, d >= 1)", op, n, d);
  CPI_CHECK(eps >= 0 && std::isfinite(eps), "{}: eps {} must be finite and >= 0", op, eps);
  CPI_CHECK(w != nullptr, "{}: weight is null", op);
}

}  // namespace

void rms_norm(const float* x, const void* w, DType w_dtype, int64_t n, int64_t d, double eps,
              float* y, ThreadPool& pool) {
  check_norm_args("rms_norm", w, w_dtype, n, d, eps);
  if (n == 0) return;
  CPI_CHECK(x != nullptr && y != nullptr, "rms_norm: x or y is null for [{}, {}]", n, d);
  const auto& k = kernels();
  pool.parallel_for(n, grain_rows(d), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float s = elementwise_impl::inv_rms(k.sum_squares(x + i * d, d), d, eps);
      k.scale_mul(x + i * d, s, w, w_dtype, d, y + i * d);
    }
  });
}

void add_rms_norm(float* r, const float* x, const void* w, DType w_dtype, int64_t n, int64_t d,
                  double eps, float* y, ThreadPool& pool) {
  check_norm_args("add_rms_norm", w, w_dtype, n, d, eps);
  if (n == 0) return;
  CPI_CHECK(r != nullptr && x != nullptr && y != nullptr,
            "add_rms_norm: r, x or y is null for [{}, {}]", n, d);
  const auto& k = kernels();
  pool.parallel_for(n, grain_rows(d), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      // r is fully updated before y (which may alias x) is written.
      const float s =
          elementwise_impl::inv_rms(k.add_sum_squares(r + i * d, x + i * d, d), d, eps);
      k.scale_mul(r + i * d, s, w, w_dtype, d, y + i * d);
    }
  });
}

void silu_mul(const float* gu, int64_t n, int64_t F, float* out, ThreadPool& pool) {
  CPI_CHECK(n >= 0 && F >= 1, "silu_mul: shape [{}, 2 * {}] is invalid (need n >= 0, F >= 1)",
            n, F);
  if (n == 0) return;
  CPI_CHECK(gu != nullptr && out != nullptr, "silu_mul: gu or out is null for [{}, {}]", n, F);
  const auto& k = kernels();
  pool.parallel_for(n, grain_rows(F), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) k.silu_mul(gu + i * 2 * F, gu + i * 2 * F + F, F, out + i * F);
  });
}

void rope_tables(const int32_t* pos, int64_t n, const double* inv_freq, int64_t half,
                 float* cos_out, float* sin_out, double scale) {
  CPI_CHECK(n >= 0 && half >= 1, "rope_tables: shape [{}, {}] is invalid (need n >= 0, half >= 1)",
            n, half);
  if (n == 0) return;
  CPI_CHECK(pos && inv_freq && cos_out && sin_out, "rope_tables: a pointer is null for n = {}", n);
  for (int64_t i = 0; i < n; ++i) {
    const double p = double(pos[i]);
    for (int64_t j = 0; j < half; ++j) {
      const double a = p * inv_freq[j];
      cos_out[i * half + j] = float(std::cos(a) * scale);
      sin_out[i * half + j] = float(std::sin(a) * scale);
    }
  }
}

void rope_apply(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t ld,
                const float* cos, const float* sin, ThreadPool& pool) {
  CPI_CHECK(n >= 0 && heads >= 1, "rope_apply: n = {} or heads = {} is invalid", n, heads);
  CPI_CHECK(head_dim >= 2 && head_dim % 2 == 0, "rope_apply: head_dim {} must be even and >= 2",
            head_dim);
  CPI_CHECK(ld >= heads * head_dim, "rope_apply: row stride {} is less than heads * head_dim = {}",
            ld, heads * head_dim);
  if (n == 0) return;
  CPI_CHECK(x && cos && sin, "rope_apply: x, cos or sin is null for n = {}", n);
  const auto& k = kernels();
  const int64_t half = head_dim / 2;
  pool.parallel_for(n, grain_rows(heads * head_dim), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      k.rope(x + i * ld, heads, head_dim, cos + i * half, sin + i * half);
  });
}

}  // namespace cpinfer
