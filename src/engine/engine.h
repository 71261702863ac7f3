// The serving engine on rank 0: requests -> scheduler -> StepPlan broadcast -> forward on
// every rank -> sample -> stream (architecture.md's engine step). HTTP threads call
// submit(); rank 0's main thread calls run(), which owns the executor (and so MPI), the
// scheduler and every request's state; results go back through OutputChannels.
#pragma once
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine_metrics.h"
#include "engine/output_text.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/step_executor.h"
#include "tokenizer/tokenizer.h"

namespace cpinfer {

struct EngineOptions {
  SchedulerConfig scheduler;
  int64_t max_model_len = 0;  // prompt + max_tokens limit (<= what one request can hold);
                              // 0: min(derived_max_model_len, KV capacity)
  PrefixCacheOptions prefix_cache;  // on by default, as vLLM's
};

class Engine {
 public:
  // Throws Error when the options cannot work with this runner (e.g. chunked prefill under
  // context parallelism, or max_model_len over the KV capacity of one request).
  Engine(StepExecutor& exec, const Tokenizer& tok, const EngineOptions& opts, ThreadPool& pool);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineOptions& options() const { return opts_; }
  int64_t vocab_size() const { return vocab_; }  // the model's (logits rows)
  // Longest sequence the KV cache can hold for one request on its own.
  int64_t kv_capacity_tokens() const { return kv_capacity_tokens_; }

  // Thread-safe. Checks and queues a request; its events go to `channel` tagged `index`.
  // Throws Error with a message meant for the client when the request is invalid.
  void submit(RequestParams params, std::shared_ptr<OutputChannel> channel, int32_t index);
  // Rank 0's main thread: serves until stop(), then ends every request with "abort".
  void run();
  void stop();  // thread-safe
  // Thread-safe, for a fatal failure outside the engine thread (a rank died; that thread
  // may be blocked in a collective for good): from now on failure() is `why`, the loop and
  // submit() stop, and every request in flight or queued gets `why` on its channel at once.
  // The caller ends the process; the engine makes no further collective call of its own.
  void fail(const std::string& why);
  std::string failure() const;  // "" while the engine has not failed
  // Channels whose HTTP call is still in progress (not ended, not cancelled).
  size_t num_live_channels() const;
  // Whether the engine takes work: from construction (requests submitted before run()
  // starts wait in the inbox, so a server may listen first) until run() returns.
  bool running() const { return running_.load(); }
  EngineMetrics metrics() const;  // thread-safe copy

 private:
  struct Active {
    SchedSeq seq;
    RequestParams params;
    std::shared_ptr<OutputChannel> channel;
    int32_t index = 0;
    RequestSampler sampler;  // its Rng and the token counts of its penalties
    std::unique_ptr<OutputText> text;
    double arrival = 0, last_token = 0;
    int64_t generated = 0;
  };
  void admit_new();
  void drop_cancelled();
  void run_step(const StepSchedule& s);
  // Samples the token of a request whose prompt (and past output) is all cached and sends
  // it; returns the finish reason, or "" while the request goes on.
  // argmax_id >= 0: the token, from an argmax-only step (logits null; see run_step).
  std::string sample_and_emit(Active& a, float* logits, int32_t argmax_id, double now);
  // Forgets a finished request: scheduler, block manager (its page releases go out with
  // the next plan), metrics.
  void retire(int64_t id, const std::string& reason, double now);
  void finish(const std::vector<int64_t>& ids, const std::string& reason,
              const std::string& error = {});
  void audit();
  void update_gauges();
  // What a step carries, for the CPINFER_LOG=debug line of each step (with its time): decodes,
  // prompt tokens, the step-time allowance it was planned with.
  std::string describe_step(const StepSchedule& s) const;

  StepExecutor& exec_;
  const Tokenizer& tok_;
  EngineOptions opts_;
  ThreadPool& pool_;
  int64_t vocab_ = 0, kv_capacity_tokens_ = 0;
  std::vector<int32_t> eos_ids_;
  BlockManager blocks_;
  Scheduler sched_;

  mutable std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::vector<std::unique_ptr<Active>> inbox_;
  bool stop_ = false;
  std::string failure_;                               // under inbox_mu_
  std::vector<std::weak_ptr<OutputChannel>> live_;    // under inbox_mu_: channels submitted to
  size_t live_prune_at_ = 64;
  std::atomic<int64_t> next_id_{1};
  std::atomic<bool> running_{true};

  std::unordered_map<int64_t, std::unique_ptr<Active>> active_;  // engine thread only
  bool audit_due_ = true;
  StepPlan plan_;

  mutable std::mutex metrics_mu_;
  EngineMetrics metrics_;
};

}  // namespace cpinfer
