#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace cpinfer {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::F64: case DType::I64: return 8;
    case DType::BF16: case DType::F16: return 2;
    case DType::U8: case DType::I8: case DType::BOOL: return 1;
    case DType::Q8_0: fail("dtype Q8_0 is a block format with no per-element size");
  }
  return 0;
}

int64_t dtype_bytes(DType t, int64_t n) {
  if (t != DType::Q8_0) return n * int64_t(dtype_size(t));
  CPI_CHECK(n % kQ8BlockElems == 0, "{} Q8_0 elements are not a whole number of {}-element "
            "blocks", n, kQ8BlockElems);
  return n / kQ8BlockElems * kQ8BlockBytes;
}

static constexpr std::pair<DType, std::string_view> kNames[] = {
    {DType::F32, "F32"}, {DType::BF16, "BF16"}, {DType::F16, "F16"}, {DType::F64, "F64"},
    {DType::I32, "I32"}, {DType::I64, "I64"},   {DType::U8, "U8"},   {DType::I8, "I8"},
    {DType::BOOL, "BOOL"}};

std::string_view dtype_name(DType t) {
  if (t == DType::Q8_0) return "Q8_0";
  for (auto& [d, n] : kNames) if (d == t) return n;
  return "?";
}

bool dtype_from_name(std::string_view name, DType* out) {
  for (auto& [d, n] : kNames) if (n == name) { *out = d; return true; }
  return false;
}

f16::f16(float f) {
  uint32_t x = float_to_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) {  // Inf or NaN
    bits = uint16_t(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (mag >= 0x477ff000u) { bits = uint16_t(sign | 0x7c00u); return; }  // rounds to >= 65520: Inf
  if (mag < 0x38800000u) {  // subnormal half (or zero): value = m * 2^-24
    float a = bits_to_float(mag);
    uint32_t m = uint32_t(std::nearbyint(a * 16777216.0f));  // round-to-nearest-even mode
    bits = uint16_t(sign | m);
    return;
  }
  // normal: rebias exponent 127 -> 15 and round mantissa 23 -> 10 bits, nearest even
  uint32_t r = mag - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  bits = uint16_t(sign | (r >> 13));
}

f16::operator float() const {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t man = bits & 0x3ffu;
  if (exp == 0) {
    float v = float(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_float(sign | 0x7f800000u | (man << 13));
  return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
}

}  // namespace cpinfer
