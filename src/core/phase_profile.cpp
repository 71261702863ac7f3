#include "core/phase_profile.h"

#include <chrono>
#include <mutex>

namespace cpinfer {

namespace {

std::atomic<bool> g_on{false};
std::mutex g_profile_mutex;
PhaseTable g_table;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Embedding: return "embedding";
    case Phase::Norm: return "norm";
    case Phase::QkvRope: return "qkv_rope";
    case Phase::Attention: return "attention";
    case Phase::OProj: return "o_proj";
    case Phase::TpAllReduce: return "tp_all_reduce";
    case Phase::GateUpSilu: return "gate_up_silu";
    case Phase::Down: return "down_proj";
    case Phase::LmHead: return "lm_head";
    case Phase::Sampling: return "sampling";
    default: return "?";
  }
}

void set_phase_profiling(bool on) {
  ThreadPool::set_busy_accounting(on);
  g_on.store(on, std::memory_order_relaxed);
}

bool phase_profiling() { return g_on.load(std::memory_order_relaxed); }

PhaseTable take_phase_profile() {
  std::lock_guard<std::mutex> lock(g_profile_mutex);
  PhaseTable t = g_table;
  g_table = PhaseTable{};
  return t;
}

PhaseScope::PhaseScope(Phase p, const ThreadPool& pool) : phase_(p) {
  if (!g_on.load(std::memory_order_relaxed)) return;
  pool_ = &pool;
  busy0_ns_ = pool.busy_ns();
  t0_ns_ = now_ns();
}

PhaseScope::~PhaseScope() {
  if (!pool_) return;
  const int64_t wall = now_ns() - t0_ns_, busy = pool_->busy_ns() - busy0_ns_;
  std::lock_guard<std::mutex> lock(g_profile_mutex);
  PhaseStats& s = g_table[size_t(phase_)];
  s.wall_s += 1e-9 * double(wall);
  s.busy_thread_s += 1e-9 * double(busy);
  s.calls += 1;
}

}  // namespace cpinfer
