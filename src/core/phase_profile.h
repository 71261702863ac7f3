// Opt-in profile of one rank's forward passes: wall time per phase (embedding, norms, the
// linear layers, attention, collectives, LM head, sampling) and how many of the pool's
// threads were working during it (busy thread-seconds / wall seconds: 2.0 = both threads
// of a 2-thread pool busy the whole phase). `cpinfer bench latency --profile` reports it;
// off by default (a disabled PhaseScope is one relaxed atomic load).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>

#include "core/thread_pool.h"

namespace cpinfer {

enum class Phase : int {
  Embedding,
  Norm,         // rms_norm / add_rms_norm (residual add fused)
  QkvRope,      // q|k|v projection with RoPE in its epilogue
  Attention,    // KV append + attention (under CP: its collectives and combines too)
  OProj,
  TpAllReduce,  // tensor-parallel all-reduces after o_proj and down_proj
  GateUpSilu,
  Down,
  LmHead,       // final norm of the wanted rows, LM head, vocab all-gather under TP
  Sampling,
  kCount
};
inline constexpr int kNumPhases = int(Phase::kCount);
const char* phase_name(Phase p);

struct PhaseStats {
  double wall_s = 0;       // summed over calls
  double busy_thread_s = 0;  // pool threads' time inside tasks, summed
  int64_t calls = 0;
};
using PhaseTable = std::array<PhaseStats, kNumPhases>;

void set_phase_profiling(bool on);  // also turns on the pool's busy-time accounting
bool phase_profiling();
// The totals since the last take, then zeroed.
PhaseTable take_phase_profile();

// Times its scope as phase `p`, with the busy time of `pool` during it.
class PhaseScope {
 public:
  PhaseScope(Phase p, const ThreadPool& pool);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase phase_;
  const ThreadPool* pool_ = nullptr;  // null when profiling is off
  int64_t t0_ns_ = 0, busy0_ns_ = 0;
};

}  // namespace cpinfer
