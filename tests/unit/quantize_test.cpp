// Q8_0 quantization (kernels/quantize.h) against values worked out by hand and the format's
// error bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quantize.h"

namespace cpinfer {
namespace {

uint16_t scale_bits(const uint8_t* block) {
  uint16_t b;
  std::memcpy(&b, block, 2);
  return b;
}

// The header's example: max |x| = 1.27, so d = 0.01 and q = x / 0.01 rounded.
TEST(QuantizeQ8_0, WorkedBlock) {
  std::vector<float> x(32, 0.0f);
  x[0] = 0.5f;
  x[1] = -1.27f;
  x[2] = 0.005f;     // 0.5 exactly in units of d: rounds away from zero to 1
  x[3] = -0.0149f;   // -1.49 d -> -1
  uint8_t block[kQ8BlockBytes];
  quantize_row_q8_0(x.data(), 32, block);
  EXPECT_EQ(scale_bits(block), f16(1.27f / 127.0f).bits);
  const auto* q = reinterpret_cast<const int8_t*>(block + 2);
  EXPECT_EQ(q[0], 50);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[3], -1);
  for (int j = 4; j < 32; ++j) EXPECT_EQ(q[j], 0);
  std::vector<float> back(32);
  dequantize_row_q8_0(block, 32, back.data());
  const float d = float(f16(0.01f));
  EXPECT_EQ(back[0], 50 * d);
  EXPECT_EQ(back[1], -127 * d);
}

TEST(QuantizeQ8_0, ZeroBlockHasZeroScale) {
  std::vector<float> x(64, 0.0f);
  x[40] = 3.0f;  // only the second block is non-zero
  std::vector<uint8_t> blocks(2 * kQ8BlockBytes);
  quantize_row_q8_0(x.data(), 64, blocks.data());
  EXPECT_EQ(scale_bits(blocks.data()), 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(blocks[size_t(2 + j)], 0);
  EXPECT_EQ(int8_t(blocks[size_t(kQ8BlockBytes + 2 + 8)]), 127);
}

// |x - d' q| <= d / 2 + 127 |d - d'| for every element, where d = max|x| / 127 and d' is d
// rounded to f16; the block maximum maps to +-127 exactly.
TEST(QuantizeQ8_0, ErrorWithinHalfAStep) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  const int64_t n = 32 * 200;
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  std::vector<uint8_t> blocks(size_t(dtype_bytes(DType::Q8_0, n)));
  quantize_row_q8_0(x.data(), n, blocks.data());
  std::vector<float> back(static_cast<size_t>(n));
  dequantize_row_q8_0(blocks.data(), n, back.data());
  for (int64_t b = 0; b < n / 32; ++b) {
    double amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(double(x[size_t(b * 32 + j)])));
    const double d = amax / 127, dh = double(float(f16::from_bits(scale_bits(&blocks[size_t(b * 34)]))));
    const double bound = d / 2 + 127 * std::fabs(d - dh) + 1e-12;
    for (int j = 0; j < 32; ++j) {
      const size_t i = size_t(b * 32 + j);
      ASSERT_LE(std::fabs(double(x[i]) - double(back[i])), bound) << "block " << b << " j " << j;
    }
  }
}

TEST(QuantizeQ8_0, RejectsPartialBlocksAndHugeValues) {
  std::vector<float> x(40, 1.0f);
  std::vector<uint8_t> out(2 * kQ8BlockBytes);
  EXPECT_THROW(quantize_row_q8_0(x.data(), 40, out.data()), Error);
  std::vector<float> huge(32, 0.0f);
  huge[5] = 1e10f;  // d = 7.9e7 > 65504: no f16 scale
  EXPECT_THROW(quantize_row_q8_0(huge.data(), 32, out.data()), Error);
  EXPECT_THROW(dtype_bytes(DType::Q8_0, 33), Error);
  EXPECT_EQ(dtype_bytes(DType::Q8_0, 896), 952);
}

}  // namespace
}  // namespace cpinfer
