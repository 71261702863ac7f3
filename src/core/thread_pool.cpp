#include "core/thread_pool.h"

#include <immintrin.h>

#include <chrono>
#include <memory>
#include <mutex>

#include "core/error.h"

namespace cpinfer {

namespace {
// Spin this many rounds (each a pause, with a yield every 64) before sleeping on the
// futex: phases of one forward pass follow each other within microseconds, and a
// futex wake costs tens of them. The yield keeps oversubscribed MPI ranks fair.
constexpr int kSpinRounds = 1 << 14;
}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int t = 1; t < num_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

int64_t ThreadPool::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void ThreadPool::work(int thread) {
  const bool acc = accounting_.load(std::memory_order_relaxed);
  const int64_t t0 = acc ? now_ns() : 0;
  for (;;) {
    int64_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= num_tasks_) break;
    call_(ctx_, t, thread);
  }
  if (acc) busy_ns_.fetch_add(now_ns() - t0, std::memory_order_relaxed);
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < kSpinRounds; ++i) {
      _mm_pause();
      if ((i & 63) == 63) std::this_thread::yield();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = g;
    if (stop_.load()) return;
    work(thread);
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::dispatch(int64_t num_tasks, void* ctx, Trampoline call) {
  num_tasks_ = num_tasks;
  ctx_ = ctx;
  call_ = call;
  next_task_.store(0, std::memory_order_relaxed);
  busy_workers_.store(num_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  work(0);
  for (int i = 0; busy_workers_.load(std::memory_order_acquire) != 0; ++i) {
    _mm_pause();
    if ((i & 63) == 63) std::this_thread::yield();
  }
}

int default_num_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

namespace {
std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;
}  // namespace

ThreadPool& global_pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(default_num_threads());
  return *g_pool;
}

void set_num_threads(int n) {
  CPI_CHECK(n >= 1 && n <= 1024, "thread count {} is out of range [1, 1024]", n);
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (g_pool && g_pool->size() == n) return;
  g_pool.reset();
  g_pool = std::make_unique<ThreadPool>(n);
}

}  // namespace cpinfer
