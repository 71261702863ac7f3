// Internal: the AVX-512 forms of the activation quantizers behind q8_act_rows and
// q8_act_fake_rows (kernels/quantize.h), which call them when the active ISA is AVX-512.
// Same contracts, bit for bit the same results as the scalar forms.
#pragma once
#include <cstdint>

#include <cmath>

namespace cpinfer {

// 1 / d for an activation block's scale d, or 0 where that is not finite: an all-zero block
// (d = 0), and a block so small that 1 / d overflows (max |x| below about 3.7e-37: its values
// become 0). Shared by the scalar and AVX-512 forms.
inline float act_inverse_scale(float d) {
  const float id = d != 0 ? 1.0f / d : 0.0f;
  return std::isinf(id) ? 0.0f : id;
}

}  // namespace cpinfer

namespace cpinfer::quantize_impl {

void q8_act_rows_avx512(const float* x, int64_t M, int64_t ldx, int64_t K, float* dst);
void q8_act_fake_rows_avx512(const float* x, int64_t M, int64_t ldx, int64_t K, float* dst);

}  // namespace cpinfer::quantize_impl
