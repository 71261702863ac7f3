#include "core/stats.h"
#include "kernels/peak.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "kernels/peak_impl.h"

namespace cpinfer {

namespace {

// CPU time of the calling thread: the FMA loop's rate while it runs, unaffected by other
// processes taking the core away (it is a property of the core, not of the machine's load).
double thread_cpu_s() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

peak_impl::FmaLoopFn fma_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return peak_impl::avx512::fma_loop;
    case Isa::Avx2: return peak_impl::avx2::fma_loop;
    default: return peak_impl::generic::fma_loop;
  }
}

peak_impl::ReadFn read_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return peak_impl::avx512::read_sum;
    case Isa::Avx2: return peak_impl::avx2::read_sum;
    default: return peak_impl::generic::read_sum;
  }
}


struct AlignedBuffer {
  explicit AlignedBuffer(int64_t bytes)
      : p(static_cast<uint8_t*>(std::aligned_alloc(64, size_t(bytes)))) {
    CPI_CHECK(p != nullptr, "cannot allocate {} MiB for the bandwidth test", bytes >> 20);
  }
  ~AlignedBuffer() { std::free(p); }
  uint8_t* p;
};

}  // namespace

double measure_fma_gflops(Isa isa, double seconds) {
  CPI_CHECK(isa_supported(isa), "ISA {} is not supported by this CPU", isa_name(isa));
  return measure_loop_gops(fma_for(isa), seconds);
}

double measure_loop_gops(PeakLoopFn loop, double seconds) {
  CPI_CHECK(seconds > 0, "measurement time {} s must be positive", seconds);
  float sink = 0;
  // Calibrate: grow the round count until one run takes >= 1/8 of the budget.
  int64_t iters = 1 << 12;
  double flops = 0, t = 0;
  for (;;) {
    double t0 = thread_cpu_s();
    flops = loop(iters, &sink);
    t = thread_cpu_s() - t0;
    if (t >= seconds / 8 || iters > (int64_t(1) << 40)) break;
    iters *= 2;
  }
  iters = std::max<int64_t>(1, int64_t(double(iters) * seconds / std::max(t, 1e-9)));
  double t0 = thread_cpu_s();
  flops = loop(iters, &sink);
  t = thread_cpu_s() - t0;
  volatile float keep = sink;
  (void)keep;
  return flops / t * 1e-9;
}

double measure_read_gbps(const uint8_t* buf, int64_t bytes, int passes, ThreadPool& pool) {
  CPI_CHECK(bytes >= 256 * pool.size() && passes >= 1, "read test of {} bytes x {} passes is "
            "too small for {} threads", bytes, passes, pool.size());
  const peak_impl::ReadFn read = read_for(active_isa());
  const int threads = pool.size();
  // Thread t reads [t * slice, (t + 1) * slice), a multiple of 256 bytes.
  const int64_t slice = bytes / threads / 256 * 256;
  std::vector<float> sink(size_t(threads) * 16, 0.f);  // one cache line each
  double t0 = steady_seconds();
  pool.run(threads, [&](int64_t task, int) {
    float s = 0;
    for (int p = 0; p < passes; ++p) s += read(buf + task * slice, slice);
    sink[size_t(task) * 16] = s;
  });
  double t = steady_seconds() - t0;
  volatile float keep = sink[0];
  (void)keep;
  return double(slice) * threads * passes / t * 1e-9;
}

ReadProbe::ReadProbe(int64_t bytes, ThreadPool& pool) : bytes_(bytes / 4096 * 4096), pool_(pool) {
  CPI_CHECK(bytes_ >= (int64_t(64) << 20), "read probe: the buffer ({} MiB) must be at least "
            "64 MiB to miss the caches", bytes >> 20);
  buf_ = static_cast<uint8_t*>(std::aligned_alloc(64, size_t(bytes_)));
  CPI_CHECK(buf_ != nullptr, "cannot allocate {} MiB for the bandwidth test", bytes_ >> 20);
  pool_.parallel_for(bytes_ / 4096, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memset(buf_ + i * 4096, int(i & 0x7f), 4096);
  });
}

ReadProbe::~ReadProbe() { std::free(buf_); }

double ReadProbe::measure(double seconds) {
  const int passes = std::max(1, int(seconds * 20e9 / double(bytes_)));
  return measure_read_gbps(buf_, bytes_, passes, pool_);
}

PeakResult measure_peak(ThreadPool& pool, const PeakOptions& opts) {
  CPI_CHECK(opts.repeats >= 1 && opts.seconds > 0, "peak: repeats {} and seconds {} must be "
            "positive", opts.repeats, opts.seconds);
  CPI_CHECK(opts.read_bytes >= (int64_t(64) << 20), "peak: the read buffer ({} MiB) must be at "
            "least 64 MiB to miss the caches", opts.read_bytes >> 20);
  PeakResult r;
  r.isa = active_isa();
  r.threads = pool.size();
  std::vector<double> f1, fn, b1, bn;
  for (int i = 0; i < opts.repeats; ++i) f1.push_back(measure_fma_gflops(r.isa, opts.seconds));
  for (int i = 0; i < opts.repeats; ++i) {
    std::vector<double> per(size_t(r.threads));
    pool.run(r.threads, [&](int64_t t, int) {
      per[size_t(t)] = measure_fma_gflops(r.isa, opts.seconds);
    });
    double sum = 0;
    for (double x : per) sum += x;
    fn.push_back(sum / r.threads);
  }
  // The buffer is touched first (page faults are not bandwidth); a pass takes about
  // bytes / (20 GB/s), so passes are sized to the time budget.
  const int64_t bytes = opts.read_bytes / 4096 * 4096;
  AlignedBuffer buf(bytes);
  pool.parallel_for(bytes / 4096, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memset(buf.p + i * 4096, int(i & 0x7f), 4096);
  });
  const int passes = std::max(1, int(opts.seconds * 20e9 / double(bytes)));
  ThreadPool one(1);
  for (int i = 0; i < opts.repeats; ++i)
    b1.push_back(measure_read_gbps(buf.p, bytes, passes, one));
  for (int i = 0; i < opts.repeats; ++i)
    bn.push_back(measure_read_gbps(buf.p, bytes, passes, pool));
  r.fma_gflops_1t = median(f1);
  r.fma_gflops_nt = median(fn);
  r.read_gbps_1t = median(b1);
  r.read_gbps_nt = median(bn);
  return r;
}

}  // namespace cpinfer
