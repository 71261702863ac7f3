// One persistent pool of worker threads for every parallel phase (GEMM, attention,
// LM head, sampling). The calling thread takes part, so a pool of size N runs N-1
// workers. Tasks are handed out dynamically through an atomic counter.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace cpinfer {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // Busy-time accounting for profiles (core/phase_profile.h), process-wide, off by default:
  // when on, busy_ns() grows by the time each thread spends running tasks.
  static void set_busy_accounting(bool on) { accounting_.store(on, std::memory_order_relaxed); }
  int64_t busy_ns() const { return busy_ns_.load(std::memory_order_relaxed); }

  // Calls fn(task, thread) for every task in [0, num_tasks); thread in [0, size()).
  // Blocks until all tasks are done. Not reentrant: fn must not call run().
  template <typename F>
  void run(int64_t num_tasks, F&& fn) {
    if (num_tasks <= 0) return;
    if (num_threads_ == 1 || num_tasks == 1) {
      const bool acc = accounting_.load(std::memory_order_relaxed);
      const int64_t t0 = acc ? now_ns() : 0;
      for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
      if (acc) busy_ns_.fetch_add(now_ns() - t0, std::memory_order_relaxed);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    dispatch(num_tasks, &fn, [](void* ctx, int64_t task, int thread) {
      (*static_cast<Fn*>(ctx))(task, thread);
    });
  }

  // Splits [0, n) into contiguous chunks of at least `grain` items (about one chunk
  // per thread, more when n is large) and calls fn(begin, end) on each.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(grain, 1);
    int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, int64_t(num_threads_));
    int64_t step = (n + chunks - 1) / chunks;
    run(chunks, [&](int64_t c, int) {
      int64_t b = c * step, e = std::min(n, b + step);
      if (b < e) fn(b, e);
    });
  }

 private:
  using Trampoline = void (*)(void*, int64_t, int);
  void dispatch(int64_t num_tasks, void* ctx, Trampoline call);
  void worker_loop(int thread);
  void work(int thread);
  static int64_t now_ns();

  int num_threads_;
  std::vector<std::thread> workers_;
  // The current job. generation_ changes when a job is posted; workers wait on it.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> busy_workers_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> busy_ns_{0};
  static inline std::atomic<bool> accounting_{false};
  int64_t num_tasks_ = 0;
  void* ctx_ = nullptr;
  Trampoline call_ = nullptr;
};

// The process-wide pool. Its size is set once by set_num_threads (default: the
// number of hardware threads); later calls with another size rebuild it.
ThreadPool& global_pool();
void set_num_threads(int n);
int default_num_threads();

}  // namespace cpinfer
