// Counter-based random numbers for synthetic weights. Element i of a tensor is a pure
// function of (tensor key, i), so any split of the work across threads or chunks
// produces the same bytes.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace cpinfer {

// The per-tensor key: a hash of the user seed and the tensor name.
uint64_t tensor_key(uint64_t seed, std::string_view name);

// Writes elements [begin, end) of a tensor whose element 0 is at `dst`, in `dtype`
// (F32, BF16 or F16): mean + std * z with z approximately N(0, 1) (the sum of four
// 16-bit uniforms, Irwin-Hall; |z| <= 2*sqrt(3)).
void fill_random(uint8_t* dst, DType dtype, uint64_t key, float mean, float std, int64_t begin,
                 int64_t end);

// Elements [begin, end) as fill_random writes them in `dtype`, widened to f32, at
// out[0, end - begin) (for writers that convert them further, e.g. to Q8_0).
void random_values(float* out, DType dtype, uint64_t key, float mean, float std, int64_t begin,
                   int64_t end);
// The z value of element i (the same numbers fill_random uses), for tests.
float random_normal_at(uint64_t key, uint64_t i);

}  // namespace cpinfer
