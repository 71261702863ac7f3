// This machine's peaks, measured by the running binary so that kernel figures can be
// given as a fraction of them (MFU / MBU): fp32 FMA GFLOP/s and DRAM read GB/s, for one
// thread alone and for N threads at once.
#pragma once
#include <cstdint>

#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace cpinfer {

struct PeakOptions {
  double seconds = 0.3;                  // per measurement (each repeated `repeats` times)
  int repeats = 5;                       // the median is reported
  int64_t read_bytes = int64_t(1) << 30; // DRAM test buffer (>> last-level cache)
};

struct PeakResult {
  Isa isa = Isa::Generic;        // the ISA of the FMA loop (the active one)
  int threads = 1;               // size of the pool used for the "all threads" figures
  double fma_gflops_1t = 0;      // fp32 FMA GFLOP/s of one thread running alone
  double fma_gflops_nt = 0;      // per thread, with `threads` threads running at once
  double read_gbps_1t = 0;       // DRAM read GB/s (1e9 B/s) of one thread alone
  double read_gbps_nt = 0;       // total, `threads` threads reading at once
};

// fp32 FMA throughput of the calling thread for `isa` over about `seconds` seconds of its
// CPU time (so other load on the machine does not lower it): independent FMA chains (more
// than latency x throughput), no memory traffic.
double measure_fma_gflops(Isa isa, double seconds);

// G operations/s of `loop` (runs `iters` rounds, returns the operations done, keeps its
// result alive through *sink) over about `seconds` of the calling thread's CPU time: the
// round count is grown until one run takes >= 1/8 of the budget, then scaled to it.
using PeakLoopFn = double (*)(int64_t iters, float* sink);
double measure_loop_gops(PeakLoopFn loop, double seconds);

// Read bandwidth: every pool thread streams its slice of `bytes` (one 64-byte aligned buffer
// that the caller provides, already touched) `passes` times with vector loads. Returns GB/s
// over all threads.
double measure_read_gbps(const uint8_t* buf, int64_t bytes, int passes, ThreadPool& pool);

// A read-bandwidth test buffer kept between measurements, for figures taken in the same
// time window as the work they are compared with (the machine's bandwidth drifts: two
// threads of this VM read ~32 or ~51 GB/s depending on when they run).
class ReadProbe {
 public:
  // bytes: the buffer (>= 64 MiB, >> last-level cache), touched once here.
  ReadProbe(int64_t bytes, ThreadPool& pool);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;
  // GB/s of all pool threads reading the buffer for about `seconds`.
  double measure(double seconds);

 private:
  uint8_t* buf_;
  int64_t bytes_;
  ThreadPool& pool_;
};

// Both figures for 1 thread and for pool.size() threads (medians of opts.repeats runs).
PeakResult measure_peak(ThreadPool& pool, const PeakOptions& opts);

}  // namespace cpinfer
