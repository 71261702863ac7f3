// Throughput of every arithmetic unit this CPU has (bench peak --json "units"): fp32 FMA,
// bf16 dot products (vdpbf16ps), fp16 FMA, int8 dot products (VNNI vpdpbusd), and the AMX
// tiles, measured per thread by register-resident loops (no memory traffic), so that a
// kernel's speed can be given as a fraction of the unit it actually runs on.
#pragma once
#include <string>
#include <vector>

namespace cpinfer {

struct UnitPeak {
  std::string name;         // "fp32_fma", "bf16_dot", "fp16_fma", "int8_vnni512", ...
  std::string instruction;  // what the loop issues, e.g. "vdpbf16ps zmm"
  bool present = false;     // the CPU (and OS) can run it
  bool measured = false;    // a figure was taken (present units without a loop: false)
  double gops_1t = 0;       // G operations/s of one thread (a multiply-add is 2 operations)
  std::string note;         // why not measured, or what the figure means
};

// Every unit, in a fixed order; each present unit with a loop in this build measured for
// about `seconds` of thread CPU time, median of `repeats`.
std::vector<UnitPeak> measure_unit_peaks(double seconds, int repeats);

}  // namespace cpinfer
