// AVX-512 vector types of the attention kernels (internal; included only by the _avx512.cpp
// attention sources, which are compiled with AVX-512 enabled): Z16 (zmm, 16 f32 lanes) and
// Y8 (ymm with AVX-512VL, 8 lanes), each with the operations attention_flash.inc expects.
// GCC 12's AVX-512 intrinsics (the _mm512_undefined_* idiom) trip -W(maybe-)uninitialized
// once inlined; the warnings point into the system header and are false positives.
#pragma once
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/attention_impl.h"

namespace cpinfer::attention_impl::avx512::vec {

constexpr int kAccRegs = 24;  // of 32 zmm/ymm registers

struct Z16 {
  using R = __m512;
  static constexpr int64_t W = 16;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  // 2^x = 2^n * 2^f, n = round(x), f in [-0.5, 0.5]; x clamped at -200 so that -inf gives
  // 2^-200 * p, which underflows to exactly 0.
  static R exp2(R x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-200.f));
    const R n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const R f = _mm512_sub_ps(x, n);
    R p = _mm512_set1_ps(kExp2Poly[0]);
    for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2Poly[i]));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
    return _mm512_scalef_ps(p, n);
  }
  static R mask_gt(R s, R j, R lim) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(j, lim, _CMP_GT_OQ), s,
                                _mm512_set1_ps(-INFINITY));
  }
  static R safe(R m) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), m,
                                _mm512_setzero_ps());
  }
  static void bcast_bf16_pair(const uint16_t* p, R& e, R& o) {
    int32_t w;
    std::memcpy(&w, p, 4);
    const __m512i v = _mm512_set1_epi32(w);
    e = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    o = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
  }
  static void load_bf16_evenodd(const uint16_t* p, R& e, R& o) {
    const __m512i v = _mm512_loadu_si512(p);
    e = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    o = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
  }
};

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
  static R exp2(R x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-200.f));
    const R n = _mm256_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const R f = _mm256_sub_ps(x, n);
    R p = _mm256_set1_ps(kExp2Poly[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2Poly[i]));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
    return _mm256_scalef_ps(p, n);
  }
  static R mask_gt(R s, R j, R lim) {
    return _mm256_mask_blend_ps(_mm256_cmp_ps_mask(j, lim, _CMP_GT_OQ), s,
                                _mm256_set1_ps(-INFINITY));
  }
  static R safe(R m) {
    return _mm256_mask_blend_ps(_mm256_cmp_ps_mask(m, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ), m,
                                _mm256_setzero_ps());
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

}  // namespace cpinfer::attention_impl::avx512::vec
