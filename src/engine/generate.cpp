#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace cpinfer {

GenerateResult generate(StepExecutor& exec, const GenerateRequest& req, ThreadPool& pool,
                        const std::function<void(int32_t)>& on_token) {
  using clock = std::chrono::steady_clock;
  ModelRunner& runner = exec.runner();
  const ModelConfig& c = runner.config();
  CPI_CHECK(!req.prompt.empty(), "the prompt is empty: give at least one token");
  CPI_CHECK(req.max_tokens >= 1, "max tokens {} must be >= 1", req.max_tokens);
  CPI_CHECK(req.prefill_chunk >= 1, "prefill chunk {} must be >= 1", req.prefill_chunk);
  validate_sampling(req.sampling);
  for (const auto& [t, bias] : req.sampling.logit_bias)
    CPI_CHECK(t >= 0 && t < c.vocab_size,
              "logit_bias token id {} is outside the vocabulary [0, {})", t, c.vocab_size);
  const int64_t total = int64_t(req.prompt.size()) + req.max_tokens;
  CPI_CHECK(total <= runner.options().max_cache_tokens,
            "prompt ({} tokens) + max tokens ({}) = {} exceeds the KV cache capacity of {} tokens",
            req.prompt.size(), req.max_tokens, total, runner.options().max_cache_tokens);

  GenerateResult res;
  RequestSampler sampler(req.sampling, req.prompt);
  constexpr int64_t kSeq = 0;  // the one sequence of this request
  StepPlan plan;
  plan.seqs.resize(1);
  plan.seqs[0].id = kSeq;
  int64_t cached = 0;  // tokens of the sequence in the KV cache
  // row_use None: a prompt chunk that is not the last (its row has no use: no LM head).
  auto forward = [&](const int32_t* tokens, int64_t n, bool all_logits = false,
                     RowUse row_use = RowUse::Logits) -> std::vector<float>& {
    plan.kind = StepPlan::Kind::Forward;
    plan.seqs[0].num_tokens = n;
    plan.seqs[0].all_logits = all_logits;
    plan.seqs[0].row_use = row_use;
    plan.seqs[0].begin = cached;
    plan.tokens.assign(tokens, tokens + n);
    std::vector<float>& out = exec.run(plan);
    cached += n;
    return out;
  };
  auto release = [&] {
    StepPlan rel;
    rel.kind = StepPlan::Kind::Pages;
    rel.page_ops.push_back({PageOp::ReleaseSeq, -1, kSeq, -1, -1, 0, 0});
    exec.run(rel);
  };
  const auto t0 = clock::now();
  auto t_first = t0;
  try {
    // Prefill in chunks; only the last chunk's last row gives logits that matter.
    std::vector<float>* logits = nullptr;
    const int64_t n = int64_t(req.prompt.size());
    for (int64_t b = 0; b < n; b += req.prefill_chunk) {
      const int64_t len = std::min(req.prefill_chunk, n - b);
      const bool last = b + len == n;
      logits = &forward(req.prompt.data() + b, len, req.keep_prompt_logits,
                        last ? RowUse::Logits : RowUse::None);
      if (req.keep_prompt_logits)
        res.prompt_logits.insert(res.prompt_logits.end(), logits->begin(), logits->end());
    }
    // With every row kept, the step's logits are [len, vocab]: the last row picks the token.
    std::vector<float> last_row;
    if (req.keep_prompt_logits) {
      last_row.assign(res.prompt_logits.end() - c.vocab_size, res.prompt_logits.end());
      logits = &last_row;
    }
    int32_t tok = 0;
    for (int64_t i = 0; i < req.max_tokens; ++i) {
      if (i > 0) logits = &forward(&tok, 1);
      tok = sampler.sample(logits->data(), c.vocab_size, pool);  // the row stays raw
      if (req.keep_logits) res.logits.insert(res.logits.end(), logits->begin(), logits->end());
      res.tokens.push_back(tok);
      if (i == 0) t_first = clock::now();
      if (on_token) on_token(tok);
      bool eos = std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), tok) !=
                 c.eos_token_ids.end();
      if (eos && !req.ignore_eos) {
        res.finish_reason = "stop";
        break;
      }
    }
    if (res.finish_reason.empty()) res.finish_reason = "length";
  } catch (const Error&) {
    release();  // an error every rank saw alike (e.g. the cache is full): free the pages
    throw;
  }
  release();
  const auto t_end = clock::now();
  res.ttft_s = std::chrono::duration<double>(t_first - t0).count();
  res.decode_s = std::chrono::duration<double>(t_end - t_first).count();
  return res;
}

}  // namespace cpinfer
