// Internal: the AVX-512 forms of the activation quantizers behind q8_act_rows and
// q8_act_fake_rows (kernels/quantize.h), which call them when the active ISA is AVX-512.
// Same contracts, bit for bit the same results as the scalar forms.
#pragma once
#include <cstdint>

namespace cpinfer::quantize_impl {

void q8_act_rows_avx512(const float* x, int64_t M, int64_t ldx, int64_t K, float* dst);
void q8_act_fake_rows_avx512(const float* x, int64_t M, int64_t ldx, int64_t K, float* dst);

}  // namespace cpinfer::quantize_impl
