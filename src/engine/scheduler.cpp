#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace cpinfer {

Scheduler::Scheduler(const SchedulerConfig& cfg, BlockManager& blocks)
    : cfg_(cfg), blocks_(blocks) {
  CPI_CHECK(cfg.max_num_seqs >= 1, "--max-num-seqs {} must be >= 1", cfg.max_num_seqs);
  CPI_CHECK(cfg.max_num_batched_tokens >= 1, "--max-num-batched-tokens {} must be >= 1",
            cfg.max_num_batched_tokens);
  CPI_CHECK(cfg.step_time_target_s >= 0 && std::isfinite(cfg.step_time_target_s),
            "--step-time-target-ms must be >= 0");
  CPI_CHECK(cfg.step_time_target_s == 0 || cfg.chunked_prefill,
            "--step-time-target-ms needs chunked prefill (drop --no-enable-chunked-prefill)");
  prompt_allowance_ = std::min(kInitialPromptAllowance, cfg.max_num_batched_tokens);
}

void Scheduler::add(SchedSeq* seq) {
  CPI_CHECK(!seq->tokens.empty(), "request {} has no tokens", seq->id);
  seq->num_computed = 0;
  waiting_.push_back(seq);
}

bool Scheduler::remove(SchedSeq* seq) {
  auto r = std::find(running_.begin(), running_.end(), seq);
  if (r != running_.end()) running_.erase(r);
  auto w = std::find(waiting_.begin(), waiting_.end(), seq);
  if (w != waiting_.end()) waiting_.erase(w);
  return blocks_.release(seq->id);
}

void Scheduler::preempt_newest(StepSchedule* out) {
  SchedSeq* victim = running_.back();
  running_.pop_back();
  blocks_.release(victim->id);
  victim->num_computed = 0;  // recompute: prompt + generated tokens form its next prefill
  ++victim->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(victim);  // older victims are pushed later, so they end up first
  out->preempted.push_back(victim->id);
}

StepSchedule Scheduler::schedule() {
  StepSchedule out;
  int64_t budget = cfg_.max_num_batched_tokens;
  for (const SchedSeq* s : running_)
    if (int64_t(s->tokens.size()) - s->num_computed == 1) out.has_decodes = true;
  // Prompt tokens this step may still take: the step-time allowance when decodes wait on
  // the step, else no limit beyond the budget.
  int64_t prompt_left = cfg_.step_time_target_s > 0 && out.has_decodes
                            ? prompt_allowance_
                            : std::numeric_limits<int64_t>::max();
  // 1. Running requests, oldest first: one decode token each, or the next prompt chunk.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    SchedSeq* s = running_[i];
    const int64_t remaining = int64_t(s->tokens.size()) - s->num_computed;
    CPI_ASSERT(remaining >= 1);
    int64_t n = std::min(remaining, budget);
    if (n < remaining && !cfg_.chunked_prefill) {
      ++i;  // a whole prompt must wait for a step with room for it
      continue;
    }
    if (remaining > 1) {  // a prompt chunk
      if (prompt_left < n) out.capped_by_time = true;
      n = std::min(n, prompt_left);
      if (n == 0) {
        ++i;  // decodes after it still run
        continue;
      }
    }
    bool self_preempted = false;
    while (!blocks_.can_grow(s->id, s->num_computed + n)) {
      self_preempted = running_.back() == s;
      preempt_newest(&out);
      if (self_preempted) break;
    }
    if (self_preempted) break;  // everything after s was preempted too
    blocks_.grow(s->id, s->num_computed + n);
    out.seqs.push_back({s, s->num_computed, n, remaining > 1});
    out.num_tokens += n;
    budget -= n;
    if (remaining > 1) {
      out.prompt_tokens += n;
      prompt_left -= n;
    }
    ++i;
  }
  // 2. Waiting requests in order, unless this step had to preempt (pages are short).
  while (out.preempted.empty() && !waiting_.empty() && budget > 0 &&
         int64_t(running_.size()) < cfg_.max_num_seqs) {
    SchedSeq* s = waiting_.front();
    const PrefixHit hit = blocks_.lookup(s->tokens);
    const int64_t remaining = int64_t(s->tokens.size()) - hit.tokens;
    int64_t n = std::min(remaining, budget);
    if (n < remaining && !cfg_.chunked_prefill) break;
    if (prompt_left < n) out.capped_by_time = true;
    n = std::min(n, prompt_left);
    if (n == 0) break;
    if (!blocks_.can_admit(hit, hit.tokens + n)) break;
    blocks_.admit(s->id, hit, hit.tokens + n);
    s->num_computed = hit.tokens;
    if (s->num_preemptions == 0) {
      s->num_cached_tokens = hit.tokens;
      if (blocks_.caching()) {
        prefix_queries_ += uint64_t(s->tokens.size());
        prefix_hits_ += uint64_t(hit.tokens);
      }
    }
    waiting_.pop_front();
    running_.push_back(s);
    out.seqs.push_back({s, hit.tokens, n, true});
    out.num_tokens += n;
    out.prompt_tokens += n;
    budget -= n;
    prompt_left -= n;
  }
  return out;
}

void Scheduler::observe_step_time(const StepSchedule& s, double seconds) {
  const double target = cfg_.step_time_target_s;
  if (target <= 0 || !s.has_decodes) return;
  if (s.prompt_tokens == 0) {
    step_time_.observe_decode_step(seconds);
    return;
  }
  // The prompt tokens' mean position (a chunk [begin, begin + n) has mean begin + (n-1)/2)
  // and where the next chunks start (begin + n), both weighted by the chunks' tokens.
  double position_sum = 0, next_sum = 0, tokens = 0;
  for (const ScheduledSeq& q : s.seqs) {
    if (!q.prompt) continue;
    const double n = double(q.num_tokens);
    position_sum += n * (double(q.begin) + (n - 1) / 2);
    next_sum += n * double(q.begin + q.num_tokens);
    tokens += n;
  }
  if (tokens == 0) return;
  step_time_.observe_prompt_step(seconds, int64_t(tokens), position_sum / tokens);
  const int64_t fits = step_time_.tokens_within(target, next_sum / tokens).value();
  const int64_t lo = std::max<int64_t>(prompt_allowance_ / 2, kMinPromptAllowance);
  const int64_t hi = std::max(prompt_allowance_ * 2, lo);
  prompt_allowance_ = std::min(std::clamp(fits, lo, hi), cfg_.max_num_batched_tokens);
}

void Scheduler::commit(const StepSchedule& s) {
  for (const ScheduledSeq& q : s.seqs) {
    q.seq->num_computed += q.num_tokens;
    blocks_.commit(q.seq->id, q.seq->tokens, q.seq->num_computed);
  }
}

}  // namespace cpinfer
