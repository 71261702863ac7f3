#include "dist/comm_worker.h"

#include "core/error.h"

namespace cpinfer {

CommWorker::~CommWorker() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CommWorker::start(std::function<void()> job) {
  std::unique_lock<std::mutex> lock(mu_);
  CPI_ASSERT(!pending_);
  job_ = std::move(job);
  error_ = nullptr;
  pending_ = true;
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  lock.unlock();
  cv_.notify_all();
}

void CommWorker::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !pending_; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void CommWorker::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || (pending_ && job_); });
    if (stop_) return;
    std::function<void()> job = std::move(job_);
    job_ = nullptr;
    lock.unlock();
    std::exception_ptr err;
    try {
      job();
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    error_ = err;
    pending_ = false;
    cv_.notify_all();
  }
}

}  // namespace cpinfer
