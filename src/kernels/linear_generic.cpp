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
  if (dtype == DType::Q8_0) {
    dequantize_row_q8_0(static_cast<const uint8_t*>(src), n, dst);
  } else if (dtype == DType::F32) {
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
  return static_cast<const uint8_t*>(w.data) + dtype_bytes(w.dtype, row * w.ld + k0);
}

template <DType DT>
inline float load_elem(const char* p, int64_t i) {
  if constexpr (DT == DType::F32) {
    return reinterpret_cast<const float*>(p)[i];
  } else {
    const uint16_t h = reinterpret_cast<const uint16_t*>(p)[i];
    if constexpr (DT == DType::BF16) return bits_to_float(uint32_t(h) << 16);
    else return half_to_float(h);
  }
}

struct Gemv {
  // The same sums as row() over Q8_0 blocks: each block's 32 weights dequantized
  // (d * q, exact in f32: an 11-bit scale times an 8-bit integer) into a small buffer, then
  // the same 8 partial sums per x row.
  template <int MM>
  static void row_q8_0(const float* x, int64_t ldx, const char* w, int64_t K, float bias,
                       bool accumulate, float* y, int64_t ldy, const char* /*pf*/) {
    float acc[MM][8] = {};
    float wv[kQ8BlockElems];
    const auto* blocks = reinterpret_cast<const uint8_t*>(w);
    for (int64_t k = 0; k < K; k += kQ8BlockElems, blocks += kQ8BlockBytes) {
      dequantize_row_q8_0(blocks, kQ8BlockElems, wv);
      for (int m = 0; m < MM; ++m)
        for (int j = 0; j < kQ8BlockElems; ++j) acc[m][j % 8] += x[m * ldx + k + j] * wv[j];
    }
    for (int m = 0; m < MM; ++m) {
      const float* a = acc[m];
      const float sum = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
      y[m * ldy] = (accumulate ? y[m * ldy] : bias) + sum;
    }
  }

  // y[m * ldy] = (accumulate ? y[m * ldy] : bias) + x[m, 0:K] · w[0:K] for m < MM, with
  // 8 partial sums per x row (two SSE registers). pf is ignored.
  template <DType DT, int MM>
  static void row(const float* x, int64_t ldx, const char* w, int64_t K, float bias,
                  bool accumulate, float* y, int64_t ldy, const char* /*pf*/) {
    float acc[MM][8] = {};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
      float wv[8];
      for (int j = 0; j < 8; ++j) wv[j] = load_elem<DT>(w, k + j);
      for (int m = 0; m < MM; ++m)
        for (int j = 0; j < 8; ++j) acc[m][j] += x[m * ldx + k + j] * wv[j];
    }
    for (int j = 0; k < K; ++k, ++j) {
      const float wk = load_elem<DT>(w, k);
      for (int m = 0; m < MM; ++m) acc[m][j] += x[m * ldx + k] * wk;
    }
    for (int m = 0; m < MM; ++m) {
      const float* a = acc[m];
      const float sum = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
      y[m * ldy] = (accumulate ? y[m * ldy] : bias) + sum;
    }
  }
};

void gemv(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
          float* y, int64_t ldy, int64_t n0, int64_t n1) {
  gemv_task<Gemv>(x, M, ldx, w, bias, y, ldy, n0, n1);
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
    using Fn = void (*)(int64_t, const float*, const float*, float*, int64_t, int, const float*,
                        bool);
    static constexpr auto table =
        rows_table<kMr, Fn>([](auto r) -> Fn { return &micro_t<r()>; });
    table[size_t(mr - 1)](kc, xp, wp, y, ldy, nv, bias, accumulate);
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
