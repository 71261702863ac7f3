#include "model/random_fill.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace cpinfer {

namespace {

// splitmix64's output function: a strong 64-bit mixer.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Four 16-bit uniforms u_k on [0, 65535] summed: mean 131070, variance 4 * 65536^2 / 12
// (up to 1e-10), so (s - 131070) * sqrt(3) / 65536 has mean 0 and variance 1.
inline float z_at(uint64_t key, uint64_t i) {
  const uint64_t r = mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
  const int32_t s = int32_t((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
  constexpr float kScale = 1.7320508075688772f / 65536.0f;
  return float(s - 131070) * kScale;
}

template <typename T>
void fill_as(T* dst, uint64_t key, float mean, float std, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) dst[i] = T(mean + std * z_at(key, uint64_t(i)));
}

}  // namespace

uint64_t tensor_key(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  return mix64(h ^ mix64(seed + 0x632be59bd9b4e019ULL));
}

float random_normal_at(uint64_t key, uint64_t i) { return z_at(key, i); }

void random_values(float* out, DType dtype, uint64_t key, float mean, float std, int64_t begin,
                   int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float v = mean + std * z_at(key, uint64_t(i));
    switch (dtype) {
      case DType::F32: out[i - begin] = v; break;
      case DType::BF16: out[i - begin] = float(bf16(v)); break;
      case DType::F16: out[i - begin] = float(f16(v)); break;
      default: fail("random weights can be F32, BF16 or F16, not {}", dtype_name(dtype));
    }
  }
}

void fill_random(uint8_t* dst, DType dtype, uint64_t key, float mean, float std, int64_t begin,
                 int64_t end) {
  switch (dtype) {
    case DType::F32: {
      // dst may be unaligned only for hand-made layouts; the writer aligns by dtype size.
      fill_as(reinterpret_cast<float*>(dst), key, mean, std, begin, end);
      return;
    }
    case DType::BF16:
      fill_as(reinterpret_cast<bf16*>(dst), key, mean, std, begin, end);
      return;
    case DType::F16:
      fill_as(reinterpret_cast<f16*>(dst), key, mean, std, begin, end);
      return;
    default:
      fail("random weights can be F32, BF16 or F16, not {}", dtype_name(dtype));
  }
}

}  // namespace cpinfer
