// Q8_0 quantization (kernels/quantize.h) against values worked out by hand and the format's
// error bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"
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

// ---- activations for int8 dot products (q8_act_rows, q8_act_fake_rows) ----------------

// One packed row: q[K] int8, then d[K / 32] f32 (kernels/quantize.h).
struct ActRow {
  std::vector<int8_t> q;
  std::vector<float> d;
};
ActRow act_row(const std::vector<float>& x) {
  const int64_t K = int64_t(x.size());
  std::vector<float> packed(size_t(q8_act_row_floats(K)));
  q8_act_rows(x.data(), 1, K, K, packed.data());
  ActRow r{std::vector<int8_t>(size_t(K)), std::vector<float>(size_t(K / 32))};
  std::memcpy(r.q.data(), packed.data(), size_t(K));
  std::memcpy(r.d.data(), packed.data() + K / 4, size_t(K / 32) * 4);
  return r;
}

// The header's example (block 0), and ties to even in a block whose maximum is 127 (d = 1
// exactly, so q = x rounded): 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 0.49 -> 0.
TEST(QuantizeActivations, WorkedBlocks) {
  std::vector<float> x(64, 0.0f);
  x[0] = 0.5f;
  x[1] = -1.27f;
  x[32] = 127.0f;
  x[33] = 2.5f;
  x[34] = 3.5f;
  x[35] = -2.5f;
  x[36] = 0.49f;
  const ActRow r = act_row(x);
  EXPECT_EQ(r.d[0], 1.27f / 127.0f);
  EXPECT_EQ(r.q[0], 50);
  EXPECT_EQ(r.q[1], -127);
  for (int j = 2; j < 32; ++j) EXPECT_EQ(r.q[size_t(j)], 0);
  EXPECT_EQ(r.d[1], 1.0f);
  EXPECT_EQ(r.q[32], 127);
  EXPECT_EQ(r.q[33], 2);
  EXPECT_EQ(r.q[34], 4);
  EXPECT_EQ(r.q[35], -2);
  EXPECT_EQ(r.q[36], 0);
  // The f32 form is d * q of the same q.
  std::vector<float> fake(64);
  q8_act_fake_rows(x.data(), 1, 64, 64, fake.data());
  for (int j = 0; j < 64; ++j)
    EXPECT_EQ(fake[size_t(j)], r.d[size_t(j / 32)] * float(r.q[size_t(j)])) << j;
}

// Random rows of several scales, two rows with a padded stride: the packed and the f32 form
// agree element for element, |x - d q| <= d / 2 (plus the f32 rounding of x * (1 / d)), and
// each block's largest |x| maps to +-127.
TEST(QuantizeActivations, BothFormsAgreeWithinHalfAStep) {
  std::mt19937 rng(5);
  const int64_t K = 96, ldx = 101, M = 2;
  std::vector<float> x(size_t(M * ldx), -1e30f);
  for (int64_t m = 0; m < M; ++m) {
    std::normal_distribution<float> dist(0.0f, m == 0 ? 0.01f : 40.0f);
    for (int64_t k = 0; k < K; ++k) x[size_t(m * ldx + k)] = dist(rng);
  }
  x[5] = 0.0f;
  std::vector<float> packed(size_t(M * q8_act_row_floats(K))), fake(size_t(M * K));
  q8_act_rows(x.data(), M, ldx, K, packed.data());
  q8_act_fake_rows(x.data(), M, ldx, K, fake.data());
  for (int64_t m = 0; m < M; ++m) {
    const auto* q = reinterpret_cast<const int8_t*>(packed.data() + m * q8_act_row_floats(K));
    const float* d = packed.data() + m * q8_act_row_floats(K) + K / 4;
    for (int64_t b = 0; b < K / 32; ++b) {
      int top = 0;
      for (int64_t j = 0; j < 32; ++j) {
        const int64_t k = b * 32 + j;
        const float xv = x[size_t(m * ldx + k)];
        ASSERT_EQ(fake[size_t(m * K + k)], d[b] * float(q[k])) << m << " " << k;
        EXPECT_LE(std::fabs(double(xv) - double(d[b]) * q[k]), 0.5 * d[b] * (1 + 1e-6)) << k;
        top = std::max(top, std::abs(int(q[k])));
      }
      EXPECT_EQ(top, 127) << "block " << b;
    }
  }
}

// A zero block has d = 0 and q = 0; a block with a NaN or an inf has d = NaN and q = 0
// (so its products are NaN), its f32 form NaN; the other blocks are untouched by it.
TEST(QuantizeActivations, ZeroAndNonFiniteBlocks) {
  std::vector<float> x(96, 0.0f);
  x[40] = std::numeric_limits<float>::quiet_NaN();
  x[70] = std::numeric_limits<float>::infinity();
  x[71] = 1.0f;
  const ActRow r = act_row(x);
  EXPECT_EQ(r.d[0], 0.0f);
  EXPECT_TRUE(std::isnan(r.d[1]));
  EXPECT_TRUE(std::isnan(r.d[2]));
  for (int j = 0; j < 96; ++j) EXPECT_EQ(r.q[size_t(j)], 0) << j;
  std::vector<float> fake(96);
  q8_act_fake_rows(x.data(), 1, 96, 96, fake.data());
  for (int j = 0; j < 32; ++j) EXPECT_EQ(fake[size_t(j)], 0.0f);
  for (int j = 32; j < 96; ++j) EXPECT_TRUE(std::isnan(fake[size_t(j)])) << j;
  // K not in whole blocks is refused.
  std::vector<float> packed(64);
  EXPECT_THROW(q8_act_rows(x.data(), 1, 96, 40, packed.data()), Error);
}

// Every ISA's quantizer (the AVX-512 form where the CPU has it, the scalar one elsewhere)
// gives the same bits: random rows of several magnitudes, values exactly halfway between
// two steps (d = 1 blocks, so ties to even decide), zero, NaN and inf blocks, a padded
// stride.
TEST(QuantizeActivations, EveryIsaGivesTheSameBits) {
  const int64_t K = 256, M = 5, ldx = 260;
  std::mt19937 rng(31);
  std::vector<float> x(size_t(M * ldx), 0.0f);
  for (int64_t m = 0; m < M; ++m) {
    std::normal_distribution<float> dist(0.0f, m == 0 ? 1e-3f : m == 1 ? 1.0f : 3e3f);
    for (int64_t k = 0; k < K; ++k) x[size_t(m * ldx + k)] = dist(rng);
  }
  for (int64_t k = 0; k < 32; ++k) x[size_t(3 * ldx + k)] = k == 0 ? 127.0f : float(k % 9) - 4.5f;
  for (int64_t k = 32; k < 64; ++k) x[size_t(3 * ldx + k)] = 0.0f;
  x[size_t(3 * ldx + 70)] = std::numeric_limits<float>::quiet_NaN();
  x[size_t(3 * ldx + 100)] = -std::numeric_limits<float>::infinity();
  x[size_t(4 * ldx + 5)] = -0.0f;
  // A block so small that 1 / d overflows: its q are 0 on every ISA.
  for (int64_t k = 224; k < 256; ++k) x[size_t(4 * ldx + k)] = k % 2 ? 1e-38f : -3e-39f;
  std::vector<std::vector<float>> packed, fake;
  std::vector<Isa> isas = supported_isas();
  const Isa saved = active_isa();
  for (Isa isa : isas) {
    set_active_isa(isa);
    packed.emplace_back(size_t(M * q8_act_row_floats(K)));
    fake.emplace_back(size_t(M * K));
    q8_act_rows(x.data(), M, ldx, K, packed.back().data());
    q8_act_fake_rows(x.data(), M, ldx, K, fake.back().data());
  }
  set_active_isa(saved);
  const auto bits = [](const std::vector<float>& v) {
    std::vector<uint32_t> b(v.size());
    std::memcpy(b.data(), v.data(), v.size() * 4);
    return b;
  };
  for (size_t i = 1; i < isas.size(); ++i) {
    EXPECT_EQ(bits(packed[i]), bits(packed[0])) << isa_name(isas[i]) << " packed";
    EXPECT_EQ(bits(fake[i]), bits(fake[0])) << isa_name(isas[i]) << " f32";
  }
  if (isas.size() == 1) std::printf("only the generic ISA runs here: nothing to compare\n");
  // The ties went to even (row 3, block 0 has d = 1): -4.5 -> -4, -3.5 -> -4, 0.5 -> 0.
  const auto* q = reinterpret_cast<const int8_t*>(packed[0].data() + 3 * q8_act_row_floats(K));
  EXPECT_EQ(q[1], -4);  // 1 % 9 - 4.5 = -3.5
  EXPECT_EQ(q[9], -4);  // 0 - 4.5
  EXPECT_EQ(q[5], 0);   // 5 - 4.5 = 0.5
  const auto* q4 = reinterpret_cast<const int8_t*>(packed[0].data() + 4 * q8_act_row_floats(K));
  for (int64_t k = 224; k < 256; ++k) EXPECT_EQ(q4[k], 0) << k;
}

}  // namespace
}  // namespace cpinfer
