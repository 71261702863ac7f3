// Each loop runs independent accumulator chains (more than latency x throughput of any
// core seen here) on values that stay in registers, compiled for its unit with a target
// attribute and called only when the CPU reports the unit.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/peak_units.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "core/cpu_features.h"
#include "core/stats.h"
#include "kernels/peak.h"

namespace cpinfer {

namespace {

constexpr int kChains = 12;

// vdpbf16ps: 16 lanes x 2 bf16 products, 64 operations per instruction.
__attribute__((target("avx512f,avx512bf16"))) double bf16_dot_loop(int64_t iters, float* sink) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_setzero_ps();
  // 1.0 and 2^-20 as bf16 pairs: the sums grow slowly and stay finite.
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x35803580);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  *sink += _mm512_reduce_add_ps(s);
  return double(iters) * kChains * 64;
}

// vfmadd231ph: 32 fp16 lanes, 64 operations per instruction.
__attribute__((target("avx512f,avx512fp16"))) double fp16_fma_loop(int64_t iters, float* sink) {
  __m512h acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ph(_Float16(1.0f));
  // acc = acc * 0.5 + 0.25 converges to 0.5: no overflow, no subnormals.
  const __m512h a = _mm512_set1_ph(_Float16(0.5f)), b = _mm512_set1_ph(_Float16(0.25f));
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ph(acc[i], a, b);
  }
  __m512h s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ph(s, acc[i]);
  *sink += float(_mm512_reduce_add_ph(s));
  return double(iters) * kChains * 64;
}

// vpdpbusd zmm: 16 lanes x 4 u8*s8 products, 128 operations per instruction.
__attribute__((target("avx512f,avx512vnni"))) double vnni512_loop(int64_t iters, float* sink) {
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_setzero_si512();
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, acc[i]);
  *sink += float(_mm512_reduce_add_epi32(s));
  return double(iters) * kChains * 128;
}

// vpdpbusd ymm (AVX-VNNI, VEX encoded): 64 operations per instruction.
__attribute__((target("avx2,avxvnni"))) double avx_vnni_loop(int64_t iters, float* sink) {
  __m256i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_setzero_si256();
  const __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(1);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
  }
  __m256i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_epi32(s, acc[i]);
  alignas(32) int32_t t[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), s);
  *sink += float(t[0]);
  return double(iters) * kChains * 64;
}

double median_of(int repeats, const auto& f) {
  std::vector<double> v;
  for (int r = 0; r < repeats; ++r) v.push_back(f());
  return median(v);
}

}  // namespace

std::vector<UnitPeak> measure_unit_peaks(double seconds, int repeats) {
  const bool zmm = isa_supported(Isa::Avx512), ymm = isa_supported(Isa::Avx2);
  std::vector<UnitPeak> out;
  {
    UnitPeak u{"fp32_fma", "", true, true, 0, ""};
    const Isa isa = zmm ? Isa::Avx512 : ymm ? Isa::Avx2 : Isa::Generic;
    u.instruction = zmm ? "vfmadd231ps zmm" : ymm ? "vfmadd231ps ymm" : "mulps + addps xmm";
    u.gops_1t = median_of(repeats, [&] { return measure_fma_gflops(isa, seconds); });
    out.push_back(u);
  }
  struct Loop {
    const char* name;
    const char* instruction;
    bool present;
    PeakLoopFn loop;
    const char* absent;
  };
  const Loop loops[] = {
      {"bf16_dot", "vdpbf16ps zmm", zmm && __builtin_cpu_supports("avx512bf16"), bf16_dot_loop,
       "the CPU does not report AVX512_BF16"},
      {"fp16_fma", "vfmadd231ph zmm", zmm && __builtin_cpu_supports("avx512fp16"), fp16_fma_loop,
       "the CPU does not report AVX512_FP16"},
      {"int8_vnni512", "vpdpbusd zmm", zmm && __builtin_cpu_supports("avx512vnni"), vnni512_loop,
       "the CPU does not report AVX512_VNNI"},
      {"int8_avx_vnni", "vpdpbusd ymm (VEX)", ymm && __builtin_cpu_supports("avxvnni"),
       avx_vnni_loop, "the CPU does not report AVX_VNNI"},
  };
  for (const Loop& l : loops) {
    UnitPeak u{l.name, l.instruction, l.present, false, 0, ""};
    if (l.present) {
      u.gops_1t = median_of(repeats, [&] { return measure_loop_gops(l.loop, seconds); });
      u.measured = true;
    } else {
      u.note = l.absent;
    }
    out.push_back(u);
  }
  // AMX: reported, not measured. Using the tiles needs the kernel's permission
  // (arch_prctl ARCH_REQ_XCOMP_PERM) and tile code, which this build does not have.
  for (const auto& [name, present] :
       {std::pair<const char*, bool>{"amx_bf16", __builtin_cpu_supports("amx-bf16")},
        std::pair<const char*, bool>{"amx_int8", __builtin_cpu_supports("amx-int8")}}) {
    UnitPeak u{name, name == std::string("amx_bf16") ? "tdpbf16ps" : "tdpbssd", present, false,
               0, ""};
    u.note = present ? "present, not measured: this build has no AMX tile code (no kernel uses it)"
                     : "the CPU does not report AMX";
    out.push_back(u);
  }
  return out;
}

}  // namespace cpinfer
