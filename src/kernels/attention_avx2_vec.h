// AVX2 vector type of the attention kernels (internal; included only by the _avx2.cpp
// attention sources, which are compiled with AVX2 and FMA enabled): Y8 (ymm, 8 f32 lanes) with
// the operations attention_flash.inc expects; exp2 by round + polynomial + exponent bits.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/attention_impl.h"

namespace cpinfer::attention_impl::avx2::vec {

constexpr int kAccRegs = 12;  // of 16 ymm registers

struct Y8 {
  using R = __m256;
  static constexpr int64_t W = 8;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  // 2^x = 2^n * 2^f, n = round(x), f in [-0.5, 0.5]; x clamped at -127, where 2^n is built
  // with a zero exponent field: exactly 0 (so exp2(-inf) = 0).
  static R exp2(R x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-127.f));
    const R n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const R f = _mm256_sub_ps(x, n);
    R p = _mm256_set1_ps(kExp2Poly[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2Poly[i]));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  }
  static R mask_gt(R s, R j, R lim) {
    return _mm256_blendv_ps(s, _mm256_set1_ps(-INFINITY), _mm256_cmp_ps(j, lim, _CMP_GT_OQ));
  }
  static R safe(R m) {
    return _mm256_blendv_ps(m, _mm256_setzero_ps(),
                            _mm256_cmp_ps(m, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
  }
  static void bcast_bf16_pair(const uint16_t* p, R& e, R& o) {
    int32_t w;
    std::memcpy(&w, p, 4);
    const __m256i v = _mm256_set1_epi32(w);
    e = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    o = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
  }
  static void load_bf16_evenodd(const uint16_t* p, R& e, R& o) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    e = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    o = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
  }
};

}  // namespace cpinfer::attention_impl::avx2::vec
