// Portable linear kernels (baseline x86-64, plain C++ the compiler vectorises with SSE2):
// the fallback when the CPU has no AVX2, and the reference-style variant tests sweep.
#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "kernels/linear_driver.h"
#include "kernels/linear_impl.h"

namespace cpinfer::linear_impl {

namespace {

// IEEE half -> float without branches (vectorisable): the 15 low bits shifted into a float
// with exponent bias 15 instead of 127, rescaled by 2^112 (exact, subnormals included);
// exponent 31 (Inf/NaN) is then forced to 255.
inline float half_to_float(uint16_t h) {
  uint32_t em = h & 0x7fffu;
  float f = bits_to_float(em << 13) * 0x1p112f;
  uint32_t bits = float_to_bits(f) | (em >= 0x7c00u ? 0x7f800000u : 0u);
  return bits_to_float(bits | (uint32_t(h & 0x8000u) << 16));
}

// dst[0:n] = src[0:n] as f32.
void widen(const void* src, DType dtype, int64_t n, float* dst) {
  if (dtype == DType::F32) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
  } else if (dtype == DType::BF16) {
    const auto* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bits_to_float(uint32_t(s[i]) << 16);
  } else {
    const auto* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(s[i]);
  }
}

const uint8_t* row_ptr(const WeightView& w, int64_t row, int64_t k0) {
  return static_cast<const uint8_t*>(w.data) + size_t(row * w.ld + k0) * dtype_size(w.dtype);
}

// a[0:K] · b[0:K] with 8 partial sums (vectorised as two SSE registers).
float dot(const float* a, const float* b, int64_t K) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[k + j] * b[k + j];
  for (int j = 0; k < K; ++k, ++j) acc[j] += a[k] * b[k];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// y[m, n] for m < M, n in [n0, n1): each W row is widened once (to L1) and dotted with
// every x row.
void gemv(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
          float* y, int64_t ldy, int64_t n0, int64_t n1) {
  const int64_t K = w.cols;
  float* wrow = w.dtype == DType::F32 ? nullptr : thread_scratch(0, size_t(K));
  for (int64_t n = n0; n < n1; ++n) {
    const float* wr = reinterpret_cast<const float*>(row_ptr(w, n, 0));
    if (wrow) {
      widen(row_ptr(w, n, 0), w.dtype, K, wrow);
      wr = wrow;
    }
    const float b = bias ? bias[n] : 0.0f;
    for (int64_t m = 0; m < M; ++m) y[m * ldy + n] = dot(x + m * ldx, wr, K) + b;
  }
}

struct GenericGemm {
  static constexpr int kMr = 4;
  static constexpr int kNr = 8;
  static constexpr int kKcMax = 256;
  static constexpr int kNcStrips = 32;

  // dst[k * kNr + j] = W[row0 + j, k0 + k], zero rows past rows_valid.
  static void pack_w(const WeightView& w, int64_t row0, int rows_valid, int64_t k0, int64_t kc,
                     float* dst) {
    float tmp[kKcMax];
    for (int j = 0; j < kNr; ++j) {
      if (j < rows_valid) widen(row_ptr(w, row0 + j, k0), w.dtype, kc, tmp);
      else std::fill(tmp, tmp + kc, 0.0f);
      for (int64_t k = 0; k < kc; ++k) dst[k * kNr + j] = tmp[k];
    }
  }

  template <int MR>
  static void micro_t(int64_t kc, const float* xp, const float* wp, float* y, int64_t ldy,
                      int nv, const float* bias, bool accumulate) {
    float c[MR][kNr];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < kNr; ++j)
        c[i][j] = accumulate ? (j < nv ? y[i * ldy + j] : 0.0f) : (bias && j < nv ? bias[j] : 0.0f);
    for (int64_t k = 0; k < kc; ++k) {
      const float* a = xp + k * MR;
      const float* b = wp + k * kNr;
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < kNr; ++j) c[i][j] += a[i] * b[j];
    }
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < nv; ++j) y[i * ldy + j] = c[i][j];
  }

  static void micro(int mr, int64_t kc, const float* xp, const float* wp, float* y, int64_t ldy,
                    int nv, const float* bias, bool accumulate) {
    switch (mr) {
      case 1: return micro_t<1>(kc, xp, wp, y, ldy, nv, bias, accumulate);
      case 2: return micro_t<2>(kc, xp, wp, y, ldy, nv, bias, accumulate);
      case 3: return micro_t<3>(kc, xp, wp, y, ldy, nv, bias, accumulate);
      default: return micro_t<4>(kc, xp, wp, y, ldy, nv, bias, accumulate);
    }
  }
};

void gemm(const float* x, int64_t ldx, const WeightView& w, const float* bias, float* y,
          int64_t ldy, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  gemm_task<GenericGemm>(x, ldx, w, bias, y, ldy, m0, m1, n0, n1);
}

}  // namespace

const Kernels& generic_kernels() {
  static const Kernels k{gemv, gemm, widen, GenericGemm::kMr, GenericGemm::kNr,
                         GenericGemm::kNcStrips};
  return k;
}

}  // namespace cpinfer::linear_impl
