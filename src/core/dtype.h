// Element types and the small bf16 / fp16 structs (g++ 12 has no __bf16 in C++20 mode).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace cpinfer {

// Q8_0 is the block format of ggml/GGUF: each run of 32 consecutive elements of a row is
// one 34-byte block {f16 scale d, int8 q[32]}, element = d * q. It has no per-element
// size: use dtype_bytes. It is not a safetensors dtype (dtype_from_name does not know it).
enum class DType : uint8_t { F32, BF16, F16, F64, I32, I64, U8, I8, BOOL, Q8_0 };

inline constexpr int64_t kQ8BlockElems = 32;   // elements per Q8_0 block
inline constexpr int64_t kQ8BlockBytes = 34;   // 2-byte f16 scale + 32 int8

// Bytes per element; throws Error for Q8_0 (a block format: use dtype_bytes).
size_t dtype_size(DType t);
// Bytes of n consecutive elements of one row. Q8_0: n must be a multiple of 32 (a whole
// number of blocks), else Error. Example: Q8_0, n 896 -> 28 blocks -> 952 bytes.
int64_t dtype_bytes(DType t, int64_t n);
std::string_view dtype_name(DType t);          // safetensors spelling: "F32", "BF16", ...
bool dtype_from_name(std::string_view name, DType* out);

inline float bits_to_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

// bfloat16: the top 16 bits of an IEEE float32. Conversion rounds to nearest even.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  static bf16 from_bits(uint16_t b) { bf16 x; x.bits = b; return x; }
  explicit bf16(float f) {
    uint32_t u = float_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) { bits = uint16_t((u >> 16) | 0x40); return; }  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = uint16_t(u >> 16);
  }
  explicit operator float() const { return bits_to_float(uint32_t(bits) << 16); }
};

// IEEE binary16.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  static f16 from_bits(uint16_t b) { f16 x; x.bits = b; return x; }
  explicit f16(float f);
  explicit operator float() const;
};

inline float to_float(float x) { return x; }
inline float to_float(bf16 x) { return float(x); }
inline float to_float(f16 x) { return float(x); }

}  // namespace cpinfer
