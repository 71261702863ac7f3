// Which SIMD instruction sets this CPU (and OS) supports, and which kernel variant
// to run. CPINFER_ISA=avx512|avx2|generic forces one (it must be supported).
#pragma once
#include <string_view>
#include <vector>

namespace cpinfer {

enum class Isa { Generic = 0, Avx2 = 1, Avx512 = 2 };

std::string_view isa_name(Isa isa);
bool isa_supported(Isa isa);           // by CPUID + XGETBV
std::vector<Isa> supported_isas();     // every ISA the machine can run, best last
Isa active_isa();                      // the one chosen at start-up (env override honoured)
void set_active_isa(Isa isa);          // for tests that sweep ISAs; throws if unsupported

}  // namespace cpinfer
