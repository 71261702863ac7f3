#include "engine/sampler.h"

#include <fmt/format.h>

namespace cpinfer {

RequestSampler::RequestSampler(const SamplingParams& p, const std::vector<int32_t>& prompt)
    : p_(p), rng_(p.seed) {
  validate_sampling(p_);
  if (p_.needs_counts()) counts_.add_prompt(prompt);
}

int32_t RequestSampler::sample(float* logits, int64_t V, ThreadPool& pool) {
  if (!p_.adjusts_logits()) return sample_token(logits, V, p_, rng_, pool);
  apply_penalties(logits, V, p_, counts_, &saved_);
  int32_t tok = 0;
  try {
    tok = sample_token(logits, V, p_, rng_, pool);
  } catch (...) {
    restore_logits(logits, saved_);
    throw;
  }
  restore_logits(logits, saved_);
  if (p_.needs_counts()) counts_.add_output(tok);
  return tok;
}

SamplingParams openai_sampling_defaults() {
  SamplingParams p;
  p.temperature = 1.f;
  return p;
}

SamplingParams with_generation_defaults(SamplingParams base, const GenerationDefaults& g) {
  if (g.temperature) base.temperature = float(*g.temperature);
  if (g.top_p) base.top_p = float(*g.top_p);
  if (g.top_k) base.top_k = *g.top_k < 1 ? 0 : *g.top_k;
  if (g.repetition_penalty) base.repetition_penalty = float(*g.repetition_penalty);
  if (g.min_p) base.min_p = float(*g.min_p);
  return base;
}

std::string describe_sampling_defaults(const SamplingParams& p) {
  return fmt::format("temperature {}, top_p {}, top_k {}, min_p {}, repetition_penalty {}",
                     p.temperature, p.top_p, p.top_k, p.min_p, p.repetition_penalty);
}

}  // namespace cpinfer
