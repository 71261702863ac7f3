// Baseline x86-64 attention kernels: the flash core (attention_flash.inc) over 8-lane
// vectors written as plain loops (the compiler turns them into SSE), multiply + add instead
// of FMA; exp2 as in AVX2. Plus the straightforward kernel (attention_reference.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/attention_impl.h"

namespace cpinfer::attention_impl::generic {

namespace {

constexpr int kAccRegs = 8;

struct G8 {
  static constexpr int64_t W = 8;
  struct R {
    float v[8];
  };
  template <typename F>
  static R map(F f) {
    R r;
    for (int i = 0; i < 8; ++i) r.v[i] = f(i);
    return r;
  }
  static R zero() { return map([](int) { return 0.f; }); }
  static R load(const float* p) { return map([&](int i) { return p[i]; }); }
  static void store(float* p, R x) { std::memcpy(p, x.v, sizeof x.v); }
  static R set1(float x) { return map([&](int) { return x; }); }
  static R fma(R a, R b, R c) { return map([&](int i) { return a.v[i] * b.v[i] + c.v[i]; }); }
  static R mul(R a, R b) { return map([&](int i) { return a.v[i] * b.v[i]; }); }
  static R add(R a, R b) { return map([&](int i) { return a.v[i] + b.v[i]; }); }
  static R sub(R a, R b) { return map([&](int i) { return a.v[i] - b.v[i]; }); }
  static R max(R a, R b) { return map([&](int i) { return a.v[i] > b.v[i] ? a.v[i] : b.v[i]; }); }
  static float exp2_1(float x) {
    x = x > -127.f ? x : -127.f;
    const float n = std::nearbyint(x), f = x - n;
    float p = kExp2Poly[0];
    for (int i = 1; i < 6; ++i) p = p * f + kExp2Poly[i];
    p = p * f + 1.f;
    return p * bits_to_float(uint32_t(int32_t(n) + 127) << 23);
  }
  static R exp2(R x) { return map([&](int i) { return exp2_1(x.v[i]); }); }
  static R mask_gt(R s, R j, R lim) {
    return map([&](int i) { return j.v[i] > lim.v[i] ? -INFINITY : s.v[i]; });
  }
  static R safe(R m) { return map([&](int i) { return m.v[i] == -INFINITY ? 0.f : m.v[i]; }); }
  static float bf16_at(const uint16_t* p, int i) { return bits_to_float(uint32_t(p[i]) << 16); }
  static void bcast_bf16_pair(const uint16_t* p, R& e, R& o) {
    e = set1(bf16_at(p, 0));
    o = set1(bf16_at(p, 1));
  }
  static void load_bf16_evenodd(const uint16_t* p, R& e, R& o) {
    e = map([&](int i) { return bf16_at(p, 2 * i); });
    o = map([&](int i) { return bf16_at(p, 2 * i + 1); });
  }
};

#include "kernels/attention_flash.inc"

}  // namespace

void flash_task(const FlashTask& t) {
  flash::per_head(t, [](const FlashTask& u) { flash::run_task<G8, G8, 0>(u); });
}

void exp2_n(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = G8::exp2_1(x[i]);
}

#include "kernels/attention_reference.inc"

}  // namespace cpinfer::attention_impl::generic
