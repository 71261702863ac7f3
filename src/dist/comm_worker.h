// One collective at a time on a dedicated thread, so that a rank can compute while its
// blocking MPI call moves data (docs/context-parallel.md §4: the PCP K/V gather overlapped
// with the attention a rank can do on its own rows).
//
// Why a thread and not MPI_Iallgatherv: OpenMPI progresses a nonblocking collective only
// inside MPI calls, and the rank's threads are busy in attention kernels that make none, so
// the transfer would mostly happen in the final MPI_Wait. A thread blocked in the collective
// progresses it for real. MPI is initialised MPI_THREAD_SERIALIZED: the caller must make no
// MPI call between start() and wait() (the worker's call is the only one in flight); when
// the library provides less (Comm::allows_helper_thread() false) use run_inline instead.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace cpinfer {

class CommWorker {
 public:
  CommWorker() = default;
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  // Runs `job` on the worker thread (started on first use). One job at a time: start()
  // while a job is pending is a bug (asserted).
  void start(std::function<void()> job);
  // Blocks until the job has finished; rethrows what it threw.
  void wait();

 private:
  void loop();
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  std::exception_ptr error_;
  bool pending_ = false, stop_ = false;
};

}  // namespace cpinfer
