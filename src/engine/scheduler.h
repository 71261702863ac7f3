// Continuous-batching scheduler (rank 0 only), in the style of vLLM v1: every step gets a
// token budget; running requests go first (decodes, and prompt chunks of requests already
// admitted), then waiting requests are admitted in arrival order while the budget, the
// sequence limit and every rank's KV pages allow. When a running request's next tokens
// need a page that some rank does not have, the newest running request is preempted: its pages are returned and it goes back to the front of the queue, to be
// recomputed from its prompt plus what it has generated.
//
// With prefix caching on, a request admitted from the queue first looks up the cached
// prefix of its tokens (engine/block_manager.h): those tokens count as computed, and only
// the rest is scheduled (the last token always is: its logits are sampled).
//
// Example, budget 8, chunked prefill on, running A (decoding), waiting B (prompt 10):
// step 1 schedules A:1, B:7 (chunk of B's first 7 tokens); step 2 A:1, B:3 (B's last
// chunk: its logits give B's first token); step 3 A:1, B:1.
//
// Step-time target (--step-time-target-ms, off by default): a token budget is the wrong
// unit for a running stream's latency, since a prompt token late in a long prompt costs
// more (it attends to everything before it) and a step has fixed costs (the LM head of the
// decodes, collectives). With a target T, a step that carries decodes gets at most
// `allowance` prompt tokens. Every measured step feeds a model of the step time (the
// decodes' own cost plus a per-prompt-token cost that grows linearly with the token's
// position: engine/step_time_model.h), and after each step with prompt tokens the allowance
// becomes the largest chunk the model says fits in T from where the prompt now stands,
// within half and twice the previous allowance (one odd step cannot swing it further).
// Example, T 90 ms, decodes 10 ms, a prompt token costing 0.02 ms + 1e-4 ms per position:
// at position 2000 the allowance is 337 tokens, at 8000 it is 96, at 16000 it is 49; each
// step lands at about T although the chunks shrink 7x. Steps without decodes (nobody
// waiting on them) use the token budget alone.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/block_manager.h"
#include "engine/step_time_model.h"

namespace cpinfer {

struct SchedulerConfig {
  int64_t max_num_seqs = 256;            // --max-num-seqs
  int64_t max_num_batched_tokens = 2048; // --max-num-batched-tokens
  bool chunked_prefill = true;           // a prompt may span steps (under every layout)
  double step_time_target_s = 0;         // --step-time-target-ms / 1000; 0: off
};

// The scheduler's view of one request.
struct SchedSeq {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // the prompt, then every generated token
  int64_t num_computed = 0;     // leading tokens whose K/V are cached on the ranks
  int64_t num_preemptions = 0;
  int64_t num_cached_tokens = 0;  // prompt tokens found in the prefix cache when first admitted
};

struct ScheduledSeq {
  SchedSeq* seq = nullptr;
  int64_t begin = 0;       // first new token: seq->tokens[begin, begin + num_tokens)
  int64_t num_tokens = 0;
  bool prompt = false;     // a prompt chunk (counted in StepSchedule::prompt_tokens), not a decode
};

struct StepSchedule {
  std::vector<ScheduledSeq> seqs;   // running first, then newly admitted
  std::vector<int64_t> preempted;   // their pages must be released on every rank first
  int64_t num_tokens = 0;
  int64_t prompt_tokens = 0;        // of them, prompt chunks (not single decode tokens)
  bool has_decodes = false;         // at least one running sequence decodes in this step
  bool capped_by_time = false;      // the step-time allowance held prompt tokens back
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& cfg, BlockManager& blocks);
  const SchedulerConfig& config() const { return cfg_; }

  void add(SchedSeq* seq);  // joins the back of the waiting queue
  // Drops a request (finished, cancelled or failed) and returns its pages to the block
  // manager. True if it held pages: the ranks must release it too.
  bool remove(SchedSeq* seq);
  // Plans the next step and reserves its pages in the block manager.
  StepSchedule schedule();
  // After the step ran: advances num_computed of the scheduled sequences and registers
  // their newly completed blocks in the prefix cache.
  void commit(const StepSchedule& s);
  // With a step-time target: the measured wall time of step `s` feeds the step-time model
  // and resizes the allowance of prompt tokens in steps with decodes (see the header
  // comment). No-op otherwise.
  void observe_step_time(const StepSchedule& s, double seconds);
  // Prompt tokens a step with decodes may carry under the step-time target.
  int64_t prompt_allowance() const { return prompt_allowance_; }
  // The allowance's bounds: at least this many prompt tokens a step (progress), at
  // first this many (a cautious start; the updates grow it within a few steps).
  static constexpr int64_t kMinPromptAllowance = 16;
  static constexpr int64_t kInitialPromptAllowance = 64;

  size_t num_running() const { return running_.size(); }
  size_t num_waiting() const { return waiting_.size(); }
  bool empty() const { return running_.empty() && waiting_.empty(); }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Prefix cache, in tokens, over first admissions (as vLLM's counters): prompt tokens
  // looked up, and those found.
  uint64_t prefix_queries() const { return prefix_queries_; }
  uint64_t prefix_hits() const { return prefix_hits_; }

 private:
  void preempt_newest(StepSchedule* out);
  SchedulerConfig cfg_;
  BlockManager& blocks_;
  std::vector<SchedSeq*> running_;  // in admission order (the back is the newest)
  std::deque<SchedSeq*> waiting_;
  int64_t num_preemptions_ = 0;
  int64_t prompt_allowance_ = 0;
  StepTimeModel step_time_;
  uint64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace cpinfer
