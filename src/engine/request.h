// A generation request as the engine takes it, and the channel its results come back on.
// The HTTP threads submit requests and read their channels; the engine loop (rank 0's main
// thread) writes the channels. One channel may carry several requests (the prompts of one
// /v1/completions call), told apart by RequestEvent::index.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/sampling.h"

namespace cpinfer {

struct RequestParams {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplingParams sampling;
  bool random_seed = true;             // no seed given: draw one per request
  bool ignore_eos = false;
  std::vector<std::string> stop;       // stop strings (not included in the text)
  std::vector<int32_t> stop_token_ids; // extra ids that end the request like EOS
  int64_t top_logprobs = -1;           // -1: no logprobs; n >= 0: chosen + n most likely
  bool skip_special_tokens = true;     // in the returned text
  bool keep_logits = false;            // each event carries the logits row of its token (tests)
};

// Log-probability of one generated token, and the most likely alternatives.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // [top_logprobs], most likely first
};

// One update of a request: tokens sampled since the previous event, and the text that is
// final by now (bytes of a split UTF-8 character or of a possible stop string are held
// back until they are decided).
struct RequestEvent {
  int32_t index = 0;  // which request of the channel
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprob> logprobs;  // one per token in token_ids when asked for
  bool finished = false;
  std::string finish_reason;  // "stop", "length", "abort" or "error" when finished
  std::string error;          // finish_reason "error": why
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt tokens found in the prefix cache
  int64_t completion_tokens = 0;  // total so far
  std::vector<float> logits;      // [vocab] of the token, when RequestParams::keep_logits
};

class OutputChannel {
 public:
  // Engine side.
  void push(RequestEvent ev) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      events_.push_back(std::move(ev));
    }
    cv_.notify_all();
  }
  // Client side: waits up to timeout_s for an event; false on timeout.
  bool pop(RequestEvent* out, double timeout_s) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, std::chrono::duration<double>(timeout_s),
                      [&] { return !events_.empty() || !failure_.empty(); }) ||
        events_.empty())
      return false;
    *out = std::move(events_.front());
    events_.pop_front();
    return true;
  }
  // Client side: the client went away; the engine drops the channel's requests and frees
  // their pages at its next step.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  // Any thread: the job failed (e.g. a rank died) and the engine will send nothing more;
  // pop() returns at once and the client side answers failure() as an error.
  void fail(const std::string& why) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (failure_.empty()) failure_ = why.empty() ? "the server failed" : why;
      failed_.store(true);
    }
    cv_.notify_all();
  }
  std::string failure() {  // "" unless fail() was called (cheap: read on every pump)
    if (!failed_.load()) return {};
    std::lock_guard<std::mutex> lk(mu_);
    return failure_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestEvent> events_;
  std::atomic<bool> cancelled_{false};
  std::string failure_;  // under mu_
  std::atomic<bool> failed_{false};
};

}  // namespace cpinfer
