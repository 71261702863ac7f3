#include "core/cpu_features.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace cpinfer {

namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

struct Features {
  bool avx2 = false, fma = false, f16c = false, avx512 = false, avx512_bf16 = false,
       avx512_vnni = false;
  Features() {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = c & bit_OSXSAVE;
    fma = c & bit_FMA;
    f16c = c & bit_F16C;
    bool avx = c & bit_AVX;
    if (!osxsave || !avx) return;
    uint64_t xcr0 = xgetbv0();
    bool ymm_os = (xcr0 & 0x6) == 0x6;
    bool zmm_os = (xcr0 & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    avx2 = ymm_os && (b & bit_AVX2) && fma && f16c;
    bool f = b & bit_AVX512F, bw = b & bit_AVX512BW, vl = b & bit_AVX512VL, dq = b & bit_AVX512DQ;
    avx512 = avx2 && zmm_os && f && bw && vl && dq;
    // AVX512_VNNI: leaf 7, sub-leaf 0, ECX bit 11.
    avx512_vnni = avx512 && (c & (1u << 11));
    // AVX512_BF16: leaf 7, sub-leaf 1, EAX bit 5.
    if (avx512 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) avx512_bf16 = a & (1u << 5);
  }
};

const Features& features() {
  static Features f;
  return f;
}

Isa best_isa() {
  if (features().avx512) return Isa::Avx512;
  if (features().avx2) return Isa::Avx2;
  return Isa::Generic;
}

Isa initial_isa() {
  const char* env = std::getenv("CPINFER_ISA");
  if (!env || !*env) return best_isa();
  std::string v(env);
  Isa want;
  if (v == "avx512") want = Isa::Avx512;
  else if (v == "avx2") want = Isa::Avx2;
  else if (v == "generic") want = Isa::Generic;
  else fail("CPINFER_ISA='{}' is not one of avx512, avx2, generic", v);
  CPI_CHECK(isa_supported(want), "CPINFER_ISA={} is not supported by this CPU", v);
  return want;
}

std::atomic<int>& active() {
  static std::atomic<int> a{int(initial_isa())};
  return a;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    default: return "generic";
  }
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return features().avx512;
    case Isa::Avx2: return features().avx2;
    default: return true;
  }
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> v{Isa::Generic};
  if (isa_supported(Isa::Avx2)) v.push_back(Isa::Avx2);
  if (isa_supported(Isa::Avx512)) v.push_back(Isa::Avx512);
  return v;
}

Isa active_isa() { return Isa(active().load(std::memory_order_relaxed)); }

void set_active_isa(Isa isa) {
  CPI_CHECK(isa_supported(isa), "ISA {} is not supported by this CPU", isa_name(isa));
  active().store(int(isa));
}

bool bf16_dot_supported() { return features().avx512_bf16; }

int cpu_family() {
  static const int family = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    // Display family: the base family (EAX bits 8-11), plus the extended family (bits
    // 20-27) when the base is 0xF. Example: AMD Zen 4, base 0xF + extended 0xA = 0x19.
    const int base = int((a >> 8) & 0xF);
    return base == 0xF ? base + int((a >> 20) & 0xFF) : base;
  }();
  return family;
}

namespace {
std::atomic<int> g_bf16_math{int(Bf16Math::Auto)};
}  // namespace

void set_bf16_math(Bf16Math m) { g_bf16_math.store(int(m)); }
Bf16Math bf16_math() { return Bf16Math(g_bf16_math.load(std::memory_order_relaxed)); }
bool bf16_dot_chosen() {
  const Bf16Math m = bf16_math();
  return m == Bf16Math::Dot || (m == Bf16Math::Auto && bf16_dot_preferred());
}

namespace {
std::atomic<int> g_int8_math{int(Int8Math::Auto)};
}  // namespace

bool int8_dot_supported() { return features().avx512_vnni; }
void set_int8_math(Int8Math m) { g_int8_math.store(int(m)); }
Int8Math int8_math() { return Int8Math(g_int8_math.load(std::memory_order_relaxed)); }
bool int8_dot_chosen() {
  const Int8Math m = int8_math();
  return m == Int8Math::Dot || (m == Int8Math::Auto && int8_dot_supported());
}

bool bf16_dot_preferred() {
  static const bool preferred = bf16_dot_supported() && __builtin_cpu_is("amd");
  return preferred;
}

}  // namespace cpinfer
