#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/logprobs.h"
#include "model/model_config.h"

namespace cpinfer {

namespace {
// Largest L such that a lone sequence of L tokens fits in every rank's pool.
int64_t capacity_tokens(const BlockManager& b) {
  int64_t lo = 0, hi = b.pages_per_rank() * b.page_size() * b.world() + 1;  // fits(lo), !fits(hi)
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    (b.fits_alone(mid) ? lo : hi) = mid;
  }
  return lo;
}
}  // namespace

Engine::Engine(StepExecutor& exec, const Tokenizer& tok, const EngineOptions& opts,
               ThreadPool& pool)
    : exec_(exec),
      tok_(tok),
      opts_(opts),
      pool_(pool),
      vocab_(exec.runner().config().vocab_size),
      eos_ids_(exec.runner().config().eos_token_ids),
      blocks_(exec.runner().page_pool().num_pages(), exec.runner().cp_layout(),
              opts.prefix_cache),
      sched_(opts.scheduler, blocks_) {
  CPI_ASSERT(exec.is_driver());
  kv_capacity_tokens_ = capacity_tokens(blocks_);
  if (opts_.max_model_len == 0)  // default: what the model and the KV cache allow
    opts_.max_model_len = derived_max_model_len(exec.runner().config()) > 0
                              ? std::min(derived_max_model_len(exec.runner().config()),
                                         kv_capacity_tokens_)
                              : kv_capacity_tokens_;
  CPI_CHECK(opts_.max_model_len >= 1, "max model length {} must be >= 1", opts_.max_model_len);
  CPI_CHECK(opts_.max_model_len <= kv_capacity_tokens_,
            "max model length {} exceeds what the KV cache holds for one request ({} tokens): "
            "give more KV cache space or a smaller --max-model-len",
            opts_.max_model_len, kv_capacity_tokens_);
  CPI_CHECK(opts_.scheduler.chunked_prefill ||
                opts_.scheduler.max_num_batched_tokens >= opts_.max_model_len,
            "without chunked prefill, --max-num-batched-tokens ({}) must be >= the max model "
            "length ({}) so that every prompt fits in one step",
            opts_.scheduler.max_num_batched_tokens, opts_.max_model_len);
  metrics_.kv_pages_per_rank = blocks_.pages_per_rank();
  metrics_.kv_used_pages.assign(size_t(blocks_.world()), 0);
  metrics_.kv_cached_pages.assign(size_t(blocks_.world()), 0);
  metrics_.kv_audited_free_pages.assign(size_t(blocks_.world()), -1);
}

void Engine::submit(RequestParams params, std::shared_ptr<OutputChannel> channel,
                    int32_t index) {
  const int64_t n = int64_t(params.prompt.size());
  CPI_CHECK(n >= 1, "the prompt is empty: it must have at least one token");
  for (int32_t t : params.prompt)
    CPI_CHECK(t >= 0 && t < vocab_, "prompt token id {} is outside the vocabulary [0, {})", t,
              vocab_);
  for (int32_t t : params.stop_token_ids)
    CPI_CHECK(t >= 0 && t < vocab_, "stop token id {} is outside the vocabulary [0, {})", t,
              vocab_);
  for (const auto& [t, bias] : params.sampling.logit_bias)
    CPI_CHECK(t >= 0 && t < vocab_, "logit_bias token id {} is outside the vocabulary [0, {})",
              t, vocab_);
  CPI_CHECK(params.max_tokens >= 1, "max_tokens must be at least 1, got {}", params.max_tokens);
  CPI_CHECK(n + params.max_tokens <= opts_.max_model_len,
            "This model's maximum context length is {} tokens. However, you requested {} "
            "tokens ({} in the prompt, {} for the completion). Please reduce the length of the "
            "prompt or completion.",
            opts_.max_model_len, n + params.max_tokens, n, params.max_tokens);
  validate_sampling(params.sampling);
  auto a = std::make_unique<Active>();
  a->seq.id = next_id_.fetch_add(1);
  a->seq.tokens = params.prompt;
  if (params.random_seed) params.sampling.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  a->sampler = RequestSampler(params.sampling, params.prompt);
  a->text = std::make_unique<OutputText>(tok_, params.stop, params.skip_special_tokens);
  a->params = std::move(params);
  a->channel = std::move(channel);
  a->index = index;
  a->arrival = steady_seconds();
  {
    std::lock_guard<std::mutex> lk(inbox_mu_);
    CPI_CHECK(failure_.empty(), "{}", failure_);
    CPI_CHECK(!stop_, "the server is shutting down");
    if (live_.size() >= live_prune_at_) {  // forget channels whose HTTP call has ended
      std::erase_if(live_, [](const std::weak_ptr<OutputChannel>& w) { return w.expired(); });
      live_prune_at_ = std::max<size_t>(64, 2 * live_.size());
    }
    live_.push_back(a->channel);
    inbox_.push_back(std::move(a));
  }
  inbox_cv_.notify_one();
}

void Engine::stop() {
  // Notify under the lock: once run() sees stop_ it returns and the engine may be destroyed
  // (cpinfer serve's signal watcher calls this; ThreadSanitizer caught the notify racing
  // ~Engine's condition-variable destruction).
  std::lock_guard<std::mutex> lk(inbox_mu_);
  stop_ = true;
  inbox_cv_.notify_one();
}

void Engine::fail(const std::string& why) {
  std::vector<std::weak_ptr<OutputChannel>> live;
  {
    std::lock_guard<std::mutex> lk(inbox_mu_);
    if (failure_.empty()) failure_ = why.empty() ? "the server failed" : why;
    stop_ = true;
    live = live_;
  }
  inbox_cv_.notify_one();
  for (const auto& w : live)
    if (auto c = w.lock()) c->fail(why);
}

std::string Engine::failure() const {
  std::lock_guard<std::mutex> lk(inbox_mu_);
  return failure_;
}

size_t Engine::num_live_channels() const {
  std::lock_guard<std::mutex> lk(inbox_mu_);
  size_t n = 0;
  for (const auto& w : live_) {
    const auto c = w.lock();  // the engine's own reference keeps it alive: cancelled = over
    n += c && !c->cancelled() ? 1 : 0;
  }
  return n;
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lk(metrics_mu_);
  return metrics_;
}

void Engine::admit_new() {
  std::vector<std::unique_ptr<Active>> fresh;
  {
    std::lock_guard<std::mutex> lk(inbox_mu_);
    fresh.swap(inbox_);
  }
  for (auto& a : fresh) {
    Active* p = a.get();
    active_[p->seq.id] = std::move(a);
    sched_.add(&p->seq);
  }
}

void Engine::drop_cancelled() {
  std::vector<int64_t> gone;
  for (auto& [id, a] : active_)
    if (a->channel->cancelled()) gone.push_back(id);
  if (!gone.empty()) finish(gone, "abort");
}

void Engine::finish(const std::vector<int64_t>& ids, const std::string& reason,
                    const std::string& error) {
  const double now = steady_seconds();
  for (int64_t id : ids) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;
    Active& a = *it->second;
    RequestEvent ev;
    ev.index = a.index;
    ev.finished = true;
    ev.finish_reason = reason;
    ev.error = error;
    if (reason != "abort" && reason != "error") ev.text = a.text->flush();
    ev.prompt_tokens = int64_t(a.params.prompt.size());
    ev.cached_tokens = a.seq.num_cached_tokens;
    ev.completion_tokens = a.generated;
    a.channel->push(std::move(ev));
    retire(id, reason, now);
  }
}

void Engine::retire(int64_t id, const std::string& reason, double now) {
  auto it = active_.find(id);
  CPI_ASSERT(it != active_.end());
  sched_.remove(&it->second->seq);
  {
    std::lock_guard<std::mutex> lk(metrics_mu_);
    metrics_.e2e.observe(now - it->second->arrival);
    ++metrics_.finished[reason];
  }
  active_.erase(it);
  audit_due_ = true;
}

std::string Engine::sample_and_emit(Active& a, float* logits, int32_t argmax_id, double now) {
  const RequestParams& p = a.params;
  CPI_ASSERT(argmax_id >= 0 || logits != nullptr);
  const int32_t tok =  // logits: raw again after sample()
      argmax_id >= 0 ? argmax_id : a.sampler.sample(logits, vocab_, pool_);
  RequestEvent ev;
  ev.index = a.index;
  ev.token_ids.push_back(tok);
  if (p.top_logprobs >= 0) ev.logprobs.push_back(token_logprobs(logits, vocab_, tok, p.top_logprobs));
  a.seq.tokens.push_back(tok);
  ++a.generated;
  {
    std::lock_guard<std::mutex> lk(metrics_mu_);
    (a.generated == 1 ? metrics_.ttft : metrics_.itl)
        .observe(now - (a.generated == 1 ? a.arrival : a.last_token));
    ++metrics_.generation_tokens;
  }
  a.last_token = now;

  const bool is_eos = std::find(eos_ids_.begin(), eos_ids_.end(), tok) != eos_ids_.end();
  const bool is_stop_id =
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), tok) != p.stop_token_ids.end();
  std::string reason;
  if ((is_eos && !p.ignore_eos) || is_stop_id) {
    reason = "stop";  // the stopping token's text is not part of the output
  } else {
    bool stopped = false;
    ev.text = a.text->push(tok, &stopped);
    if (stopped) reason = "stop";
  }
  if (reason.empty() && a.generated >= p.max_tokens) reason = "length";
  if (!reason.empty()) {
    ev.finished = true;
    ev.finish_reason = reason;
    if (reason == "length") ev.text += a.text->flush();
  }
  ev.prompt_tokens = int64_t(p.prompt.size());
  ev.cached_tokens = a.seq.num_cached_tokens;
  ev.completion_tokens = a.generated;
  if (p.keep_logits) ev.logits.assign(logits, logits + vocab_);
  a.channel->push(std::move(ev));
  return reason;
}

void Engine::run_step(const StepSchedule& s) {
  plan_.kind = StepPlan::Kind::Forward;
  plan_.pages_from_ops = 1;
  blocks_.take_ops(&plan_.page_ops);
  plan_.seqs.clear();
  plan_.tokens.clear();
  for (const ScheduledSeq& q : s.seqs) {
    StepPlan::Seq ps;
    ps.id = q.seq->id;
    ps.num_tokens = q.num_tokens;
    ps.begin = q.begin;
    // Nobody reads the row of a prompt chunk that is not the last: it gets no LM-head row.
    // Only the argmax is wanted when the request samples greedily and reads nothing else of
    // the logits; a step of such rows only gathers each row's argmax (Decoder::lm_head).
    const Active& a = *active_.at(q.seq->id);
    const bool chunk = q.begin + q.num_tokens < int64_t(q.seq->tokens.size());
    ps.row_use = chunk ? RowUse::None
                 : a.sampler.takes_argmax() && a.params.top_logprobs < 0 && !a.params.keep_logits
                     ? RowUse::Argmax
                     : RowUse::Logits;
    plan_.seqs.push_back(ps);
    plan_.tokens.insert(plan_.tokens.end(), q.seq->tokens.begin() + q.begin,
                        q.seq->tokens.begin() + q.begin + q.num_tokens);
  }
  std::vector<float>& logits = exec_.run(plan_);
  const std::vector<int32_t>& argmax_ids = exec_.argmax_ids();  // or, for argmax-only steps
  sched_.commit(s);
  const double now = steady_seconds();
  {
    std::lock_guard<std::mutex> lk(metrics_mu_);
    ++metrics_.steps;
    if (s.capped_by_time) ++metrics_.steps_held_by_time_target;
    for (const ScheduledSeq& q : s.seqs) {  // prompt tokens computed for the first time
      const int64_t plen = int64_t(active_.at(q.seq->id)->params.prompt.size());
      if (q.seq->num_preemptions == 0 && q.begin < plen)
        metrics_.prompt_tokens += uint64_t(std::min(q.num_tokens, plen - q.begin));
    }
  }
  // The event of the token that finished a request carries its finish reason. Row i of the
  // step's logits (or ids) belongs to the i-th sequence that is not a prompt chunk (chunks
  // have no row: RowUse::None above).
  for (size_t q = 0, i = 0; q < s.seqs.size(); ++q) {
    const SchedSeq& seq = *s.seqs[q].seq;
    if (plan_.seqs[q].row_use == RowUse::None) continue;  // a prompt chunk
    CPI_ASSERT(seq.num_computed == int64_t(seq.tokens.size()));
    const int64_t id = seq.id;  // retire() destroys seq
    const std::string reason =
        argmax_ids.empty()
            ? sample_and_emit(*active_.at(id), logits.data() + i * size_t(vocab_), -1, now)
            : sample_and_emit(*active_.at(id), nullptr, argmax_ids[i], now);
    ++i;
    if (!reason.empty()) retire(id, reason, now);
  }
  // The releases (and the blocks the step registered) go out with the next plan: the next
  // step's, or the audit's when the engine goes idle. No collective of their own.
}

std::string Engine::describe_step(const StepSchedule& s) const {
  int64_t decodes = 0, prompt_end = 0;
  for (const ScheduledSeq& q : s.seqs) {
    if (!q.prompt) ++decodes;
    else prompt_end = std::max(prompt_end, q.begin + q.num_tokens);
  }
  std::string out = fmt::format("{} decodes, {} prompt tokens (the furthest chunk ends at {})",
                                decodes, s.prompt_tokens, prompt_end);
  if (sched_.config().step_time_target_s > 0)
    out += fmt::format(", allowance {}{}", sched_.prompt_allowance(),
                       s.capped_by_time ? " (capped)" : "");
  return out;
}

void Engine::update_gauges() {
  std::lock_guard<std::mutex> lk(metrics_mu_);
  metrics_.running = int64_t(sched_.num_running());
  metrics_.waiting = int64_t(sched_.num_waiting());
  metrics_.preemptions = uint64_t(sched_.num_preemptions());
  metrics_.step_prompt_allowance =
      sched_.config().step_time_target_s > 0 ? sched_.prompt_allowance() : 0;
  metrics_.prefix_cache_queries = sched_.prefix_queries();
  metrics_.prefix_cache_hits = sched_.prefix_hits();
  for (int64_t r = 0; r < blocks_.world(); ++r) {
    metrics_.kv_used_pages[size_t(r)] = blocks_.used_pages(r);
    metrics_.kv_cached_pages[size_t(r)] = blocks_.cached_pages(r);
  }
}

void Engine::audit() {
  std::vector<PageOp> ops;
  blocks_.take_ops(&ops);
  std::vector<int64_t> got = exec_.audit(ops);
  std::vector<int64_t> free_by_rank(size_t(blocks_.world()), blocks_.pages_per_rank());
  for (size_t i = 0; i + 1 < got.size(); i += 2)
    free_by_rank[size_t(got[i])] = std::min(free_by_rank[size_t(got[i])], got[i + 1]);
  bool mismatch = false;
  for (int64_t r = 0; r < blocks_.world(); ++r)
    mismatch |= free_by_rank[size_t(r)] != blocks_.free_pages(r);
  if (mismatch)
    CPI_LOG_ERROR("KV page audit: a rank's pool disagrees with the scheduler's account");
  std::lock_guard<std::mutex> lk(metrics_mu_);
  metrics_.kv_audited_free_pages = free_by_rank;
  metrics_.kv_audit_mismatches += mismatch ? 1 : 0;
}

void Engine::run() {
  running_.store(true);
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(inbox_mu_);
        if (!stop_ && inbox_.empty() && active_.empty()) {
          if (audit_due_) {
            lk.unlock();
            audit();
            audit_due_ = false;
            continue;
          }
          inbox_cv_.wait(lk, [&] { return stop_ || !inbox_.empty(); });
        }
        if (stop_) {
          if (!failure_.empty()) {  // fail(): the ranks may be gone, no collective call
            running_.store(false);
            return;
          }
          break;
        }
      }
      admit_new();
      drop_cancelled();
      if (sched_.empty()) {
        update_gauges();
        continue;
      }
      StepSchedule s = sched_.schedule();
      if (s.seqs.empty()) {
        // Nothing fits although every request fits alone (checked at submit): only possible
        // if the budget is smaller than a whole prompt without chunked prefill, which the
        // constructor rules out. Fail loudly rather than spin.
        std::vector<int64_t> ids;
        for (auto& [id, a] : active_) ids.push_back(id);
        finish(ids, "error", "the scheduler could not fit any request into a step");
        continue;
      }
      const bool trace = log_level() <= LogLevel::Debug;
      const std::string what = trace ? describe_step(s) : std::string();
      const double t0 = steady_seconds();
      run_step(s);
      const double step_s = steady_seconds() - t0;
      // The start on the steady (CLOCK_MONOTONIC) clock lines the steps up with other tools'
      // traces (perf record -k CLOCK_MONOTONIC).
      if (trace) CPI_LOG_DEBUG("step: {:.2f} ms, {}; began at {:.4f} s", step_s * 1e3, what, t0);
      sched_.observe_step_time(s, step_s);
      update_gauges();
    }
  } catch (...) {
    running_.store(false);
    throw;
  }
  std::vector<int64_t> ids;
  for (auto& [id, a] : active_) ids.push_back(id);
  finish(ids, "abort");
  {
    std::lock_guard<std::mutex> lk(inbox_mu_);
    for (auto& a : inbox_) {
      RequestEvent ev;
      ev.index = a->index;
      ev.finished = true;
      ev.finish_reason = "abort";
      a->channel->push(std::move(ev));
    }
    inbox_.clear();
  }
  update_gauges();
  running_.store(false);
}

}  // namespace cpinfer
