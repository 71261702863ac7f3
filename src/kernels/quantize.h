// Q8_0 weight quantization (core/dtype.h): blocks of 32 consecutive elements of a row, one
// f16 scale each, as ggml/GGUF store them, so a GGUF Q8_0 tensor and ours are the same bytes.
#pragma once
#include <cstdint>

namespace cpinfer {

// dst: n / 32 blocks; x: [n] f32, n a multiple of 32. Per block (ggml's rounding):
// d = max|x| / 127, q = round(x / d) (ties away from zero), d stored as f16; an all-zero
// block has d = 0. Throws Error when d overflows f16 (|x| > 65504 * 127).
// Example: x = {0.5, -1.27, 0, ...zeros} -> d = 0.01, q = {50, -127, 0, ...}.
void quantize_row_q8_0(const float* x, int64_t n, uint8_t* dst);

// dst[0:n] = d * q of the n / 32 blocks at src (n a multiple of 32).
void dequantize_row_q8_0(const uint8_t* src, int64_t n, float* dst);

// Activations for int8 dot products (kernels/linear.h, Int8Math::Dot): a row of x cut into
// blocks of 32 like a Q8_0 weight row, each block with an f32 scale d = max|x| / 127 and
// q = x * (1 / d) rounded to the nearest integer, ties to even (an all-zero block has d = 0,
// q = 0; so has, in effect, a block whose max |x| is below ~3.7e-37, where 1 / d overflows:
// its q are 0). Every path that multiplies Q8_0 weights under that math sees exactly these q and
// d: the VNNI GEMV as int8 (q8_act_rows), the other kernels as f32 values d * q
// (q8_act_fake_rows), so a row's result does not depend on which kernel ran it.
// Example: a block {0.5, -1.27, 0, ...zeros} -> d = 0.01, q = {50, -127, 0, ...}.
//
// Packed rows: row m starts at dst + m * q8_act_row_floats(K) floats and holds int8 q[K],
// then float d[K / 32]. Example, K 896: 896 bytes of q, 28 scales, 252 floats per row.
constexpr int64_t q8_act_row_floats(int64_t K) { return K / 4 + K / 32; }
// x: [M, K] (row stride ldx), K a multiple of 32; dst: [M, q8_act_row_floats(K)].
void q8_act_rows(const float* x, int64_t M, int64_t ldx, int64_t K, float* dst);
// dst[m * K + k] = d * q of x[m, k] as above, in f32 (d * q rounded once); dst: [M, K].
void q8_act_fake_rows(const float* x, int64_t M, int64_t ldx, int64_t K, float* dst);

}  // namespace cpinfer
