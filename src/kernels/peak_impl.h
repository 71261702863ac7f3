// Internal: the per-ISA loops behind peak.h (peak_generic.cpp, peak_avx2.cpp,
// peak_avx512.cpp), each compiled for its ISA.
#pragma once
#include <cstdint>

namespace cpinfer::peak_impl {

// Runs `iters` rounds of independent FMA chains; returns the fp32 FLOPs done (2 per lane
// per FMA). The result is kept alive through *sink.
using FmaLoopFn = double (*)(int64_t iters, float* sink);
// Sums n bytes at p (64-byte aligned, n a multiple of 256) with vector loads; returns a
// value that depends on every byte, so the loads cannot be dropped.
using ReadFn = float (*)(const uint8_t* p, int64_t n);

#define CPI_DECLARE_PEAK(ns)                    \
  namespace ns {                                \
  double fma_loop(int64_t iters, float* sink);  \
  float read_sum(const uint8_t* p, int64_t n);  \
  }
CPI_DECLARE_PEAK(generic)
CPI_DECLARE_PEAK(avx2)
CPI_DECLARE_PEAK(avx512)
#undef CPI_DECLARE_PEAK

}  // namespace cpinfer::peak_impl
