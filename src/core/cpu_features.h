// Which SIMD instruction sets this CPU (and OS) supports, and which kernel variant
// to run. CPINFER_ISA=avx512|avx2|generic forces one (it must be supported).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace cpinfer {

enum class Isa { Generic = 0, Avx2 = 1, Avx512 = 2 };

std::string_view isa_name(Isa isa);
bool isa_supported(Isa isa);           // by CPUID + XGETBV
std::vector<Isa> supported_isas();     // every ISA the machine can run, best last
Isa active_isa();                      // the one chosen at start-up (env override honoured)
void set_active_isa(Isa isa);          // for tests that sweep ISAs; throws if unsupported

// How bf16 data meets bf16 data in the kernels that can choose (the attention over a
// bf16 cache, the GEMM over bf16 weights). Dot: bf16 dot products (vdpbf16ps, AVX512_BF16),
// the f32 operand rounded to bf16 (activations, queries, probabilities) and f32 sums. F32:
// the bf16 values widened and f32 FMAs, exact on the stored values. Auto: Dot where
// bf16_dot_preferred(), F32 elsewhere.
enum class Bf16Math : uint8_t { Auto, Dot, F32 };

// The CPU's display family from CPUID leaf 1 (AMD: 0x19 = Zen 3 / Zen 4, 0x1A = Zen 5).
int cpu_family();
// Whether this CPU has AVX512_BF16 (and the OS keeps zmm state).
bool bf16_dot_supported();
// Whether this CPU's bf16 dot unit outruns its f32 FMAs, so that Bf16Math::Auto picks Dot:
// AVX512_BF16 on an AMD CPU (vdpbf16ps at about twice the f32 FMA rate: Zen 4 2x, Zen 5
// 1.85x in `bench peak`). Intel
// cores run it at about half their f32 FMA rate (two 512-bit FMA ports, vdpbf16ps on one;
// `cpinfer bench peak` measures both), where the f32 kernels are the faster ones. A fixed
// rule, not a timing, so every rank of a job computes the same numbers.
bool bf16_dot_preferred();
// The process-wide choice the kernels' Auto follows (`--bf16-math` on the command line):
// Dot or F32 force it, Auto (the default) leaves it to bf16_dot_preferred().
void set_bf16_math(Bf16Math m);
Bf16Math bf16_math();
// Whether Auto resolves to Dot now: bf16_math() is Dot, or Auto and bf16_dot_preferred().
// (A kernel still runs its f32 path where the CPU lacks AVX512_BF16.)
bool bf16_dot_chosen();

// How activations meet int8 (Q8_0) weights in the linear layers. Dot: each activation row is
// quantized per 32-element block to int8 with an f32 scale (kernels/quantize.h) and the
// products are int8 dot products with int32 sums (vpdpbusd, AVX512_VNNI), one f32 scale
// multiply per block; the other kernels compute the same values in f32, so results do not
// depend on the kernel. F32: the weights dequantized and f32 FMAs against the f32
// activations, exact on the stored weights. Auto: Dot where int8_dot_supported(), F32
// elsewhere.
enum class Int8Math : uint8_t { Auto, Dot, F32 };
// Whether this CPU has AVX512_VNNI (and the OS keeps zmm state).
bool int8_dot_supported();
// The process-wide choice (`--int8-math` on the command line).
void set_int8_math(Int8Math m);
Int8Math int8_math();
// Whether activations meeting Q8_0 weights are quantized now: int8_math() is Dot, or Auto and
// int8_dot_supported(). (The VNNI GEMV runs only with the AVX-512 kernels active; the
// other kernels compute the same numbers in f32.)
bool int8_dot_chosen();

}  // namespace cpinfer
