#include "kernels/quantize.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quantize_impl.h"

namespace cpinfer {

void quantize_row_q8_0(const float* x, int64_t n, uint8_t* dst) {
  CPI_CHECK(n % kQ8BlockElems == 0, "Q8_0: a row of {} elements is not whole 32-element "
            "blocks", n);
  for (int64_t b = 0; b < n / kQ8BlockElems; ++b, dst += kQ8BlockBytes) {
    const float* xb = x + b * kQ8BlockElems;
    float amax = 0;
    for (int64_t j = 0; j < kQ8BlockElems; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const f16 dh(d);
    CPI_CHECK(std::isfinite(float(dh)), "Q8_0: block {} has |x| up to {}, beyond what an f16 "
              "scale can express", b, amax);
    std::memcpy(dst, &dh.bits, 2);
    // round(v) with ties away from zero, as roundf: v + 0.5 sign(v) truncated, the sum in
    // double so that it is exact (in float, 0.49999997 + 0.5 would round up to 1).
    // |v| <= 127 plus rounding, so q fits int8.
    for (int64_t j = 0; j < kQ8BlockElems; ++j) {
      const double v = double(xb[j] * id);
      dst[2 + j] = uint8_t(int8_t(int(v + (v < 0 ? -0.5 : 0.5))));
    }
  }
}

void dequantize_row_q8_0(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t b = 0; b < n / kQ8BlockElems; ++b, src += kQ8BlockBytes) {
    uint16_t bits;
    std::memcpy(&bits, src, 2);
    const float d = float(f16::from_bits(bits));
    for (int64_t j = 0; j < kQ8BlockElems; ++j)
      dst[b * kQ8BlockElems + j] = d * float(int8_t(src[2 + j]));
  }
}

namespace {

// The scale of one 32-element activation block and its reciprocal (0 for an all-zero block),
// as in quantize_row_q8_0 but kept in f32. Shared by both forms below, so they agree bit for
// bit on every q.
struct ActBlockScale {
  float d, id;
};
inline ActBlockScale act_block_scale(const float* xb) {
  float amax = 0;
  bool nan = false;
  for (int64_t j = 0; j < kQ8BlockElems; ++j) {
    amax = std::fmax(amax, std::fabs(xb[j]));
    nan = nan || std::isnan(xb[j]);
  }
  // A NaN anywhere makes the block's scale NaN (fmax alone would skip it).
  const float d = nan ? std::numeric_limits<float>::quiet_NaN() : amax / 127.0f;
  return {d, act_inverse_scale(d)};
}
// x * id rounded to the nearest integer, ties to even (the default rounding mode); |x * id|
// <= 127 up to one rounding, so the result is in [-127, 127]. A block with a NaN or an inf
// has d = NaN or inf, and so NaN outputs, as the f32 math would give.
inline float act_q(float x, float id) { return std::nearbyint(x * id); }

void check_act_rows(int64_t K) {
  CPI_CHECK(K % kQ8BlockElems == 0, "int8 activations: a row of {} elements is not whole "
            "32-element blocks", K);
}

}  // namespace

void q8_act_rows(const float* x, int64_t M, int64_t ldx, int64_t K, float* dst) {
  check_act_rows(K);
  if (active_isa() == Isa::Avx512) return quantize_impl::q8_act_rows_avx512(x, M, ldx, K, dst);
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    float* row = dst + m * q8_act_row_floats(K);
    auto* q = reinterpret_cast<int8_t*>(row);
    float* d = row + K / 4;
    for (int64_t b = 0; b < K / kQ8BlockElems; ++b) {
      const float* xb = xr + b * kQ8BlockElems;
      const ActBlockScale s = act_block_scale(xb);
      // A block with NaN or inf: q = 0 and d = NaN, so its products are NaN (the fake
      // form's d * q is NaN there too).
      const bool finite = std::isfinite(s.d);
      d[b] = finite ? s.d : std::numeric_limits<float>::quiet_NaN();
      for (int64_t j = 0; j < kQ8BlockElems; ++j)
        q[b * kQ8BlockElems + j] = finite ? int8_t(int(act_q(xb[j], s.id))) : int8_t(0);
    }
  }
}

void q8_act_fake_rows(const float* x, int64_t M, int64_t ldx, int64_t K, float* dst) {
  check_act_rows(K);
  if (active_isa() == Isa::Avx512)
    return quantize_impl::q8_act_fake_rows_avx512(x, M, ldx, K, dst);
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    float* out = dst + m * K;
    for (int64_t b = 0; b < K / kQ8BlockElems; ++b) {
      const float* xb = xr + b * kQ8BlockElems;
      const ActBlockScale s = act_block_scale(xb);
      for (int64_t j = 0; j < kQ8BlockElems; ++j)
        out[b * kQ8BlockElems + j] = s.d * act_q(xb[j], s.id);
    }
  }
}

}  // namespace cpinfer
