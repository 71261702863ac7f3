#include "kernels/quantize.h"

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"

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

}  // namespace cpinfer
