// One request's sampling state: its parameters, its Rng and the token counts its penalties
// read. The engine and `cpinfer generate` both sample through it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/penalties.h"
#include "kernels/sampling.h"
#include "model/model_config.h"

namespace cpinfer {

class RequestSampler {
 public:
  RequestSampler() : rng_(0) {}
  // Throws Error (validate_sampling) for parameters out of range.
  RequestSampler(const SamplingParams& p, const std::vector<int32_t>& prompt);

  // The next token from the model's row logits[V], and records it for the penalties. The
  // penalised and biased ids of the row are changed during the call and restored before it
  // returns (also when it throws), so the row is the model's again afterwards.
  int32_t sample(float* logits, int64_t V, ThreadPool& pool);
  // Whether sample() is the argmax of the model's logits and nothing else (greedy or top_k
  // 1, no penalty, no bias): then the argmax alone decides the token and nothing is recorded.
  bool takes_argmax() const {
    return (p_.temperature == 0.f || p_.top_k == 1) && !p_.adjusts_logits();
  }

 private:
  SamplingParams p_;
  Rng rng_;
  TokenCounts counts_;  // filled only when a penalty is set
  SavedLogits saved_;   // reused between steps
};

// What a request that omits a sampling field gets, as the OpenAI API defines it:
// temperature 1, no top_p / top_k / min_p, no penalty.
SamplingParams openai_sampling_defaults();

// `--generation-config auto` (vLLM's default): `base` with the model's generation_config.json
// values (temperature, top_p, top_k, repetition_penalty, min_p: those present) over it.
SamplingParams with_generation_defaults(SamplingParams base, const GenerationDefaults& g);

// "temperature 0.7, top_p 0.8, top_k 20, min_p 0, repetition_penalty 1.1" (start-up logs).
std::string describe_sampling_defaults(const SamplingParams& p);

}  // namespace cpinfer
