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

}  // namespace cpinfer
