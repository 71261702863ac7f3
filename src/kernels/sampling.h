// Token sampling from one row of logits: greedy (temperature 0) or temperature with
// optional min-p, top-k and top-p (nucleus), reproducible for a given seed. The penalties
// and logit_bias that change the logits first are in kernels/penalties.h.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/thread_pool.h"

namespace cpinfer {

// Applied in vLLM's order (kernels/penalties.h, then sample_token): logit_bias, then the
// repetition, frequency and presence penalties on the raw logits; then temperature, min_p,
// top_k, top_p. Greedy (temperature 0) takes the argmax after the penalties and the bias.
struct SamplingParams {
  float temperature = 0.f;  // 0: greedy
  float top_p = 1.f;        // (0, 1]
  int64_t top_k = 0;        // <= 0: off
  uint64_t seed = 0;
  float min_p = 0.f;               // [0, 1]: drop ids with p < min_p * max p (0: off)
  float repetition_penalty = 1.f;  // > 0: ids of the prompt and output, HF / vLLM (1: off)
  float presence_penalty = 0.f;    // [-2, 2]: minus this once per id generated (OpenAI)
  float frequency_penalty = 0.f;   // [-2, 2]: minus this per time an id was generated
  std::vector<std::pair<int32_t, float>> logit_bias;  // (id, bias in [-100, 100]), ids unique

  // Whether the logits change before temperature (a penalty or a bias is set).
  bool adjusts_logits() const {
    return repetition_penalty != 1.f || presence_penalty != 0.f || frequency_penalty != 0.f ||
           !logit_bias.empty();
  }
  // Whether the penalties read the token counts (logit_bias alone does not).
  bool needs_counts() const {
    return repetition_penalty != 1.f || presence_penalty != 0.f || frequency_penalty != 0.f;
  }
};

// A small, portable PRNG (xoshiro256**) so that a seed gives the same tokens everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1)
 private:
  uint64_t s_[4];
};

// Checks the parameters (temperature >= 0, 0 < top_p <= 1, 0 <= min_p <= 1,
// repetition_penalty > 0, presence and frequency penalties in [-2, 2], biases in
// [-100, 100]); throws Error naming the parameter and the value.
void validate_sampling(const SamplingParams& p);

// Index of the largest logit (the lowest index on ties). logits: [V]. Timed as the Sampling
// phase (core/phase_profile.h); argmax_untimed is the same for callers timed as another phase.
int32_t argmax(const float* logits, int64_t V, ThreadPool& pool);
int32_t argmax_untimed(const float* logits, int64_t V, ThreadPool& pool);

// The argmax of R whole rows from the argmax of each part of them (a vocabulary split over
// ranks). parts: one array per part, in vocabulary order; part k's candidate for row r is
// parts[k][2 r] (the bits of its float value) and parts[k][2 r + 1] (its vocabulary id, -1
// for an empty part). A later part wins only with a strictly larger value, so ties keep the
// lowest id, and the result is argmax() over the whole row when no part begins with a NaN
// (argmax merges its threads' chunks the same way). ids: [R].
void merge_argmax_parts(const std::vector<const int32_t*>& parts, int64_t R, int32_t* ids);

// Samples one token from logits[V]. Greedy when temperature == 0. Otherwise softmax of
// logits / temperature, without the ids whose probability is below min_p times the largest
// (if min_p > 0), restricted to the top_k largest (if > 0) and then to the smallest set in
// descending order whose probability reaches top_p of what is left; one rng.uniform() per
// call. The penalties and logit_bias of p are not applied here (kernels/penalties.h).
// Parallel over fixed 8192-id chunks of the vocabulary combined in order, so the token
// for a given Rng state does not depend on the pool's size; only the candidates that can
// be in the nucleus are sorted (none for top_p = 1, top_k = 0).
int32_t sample_token(const float* logits, int64_t V, const SamplingParams& p, Rng& rng,
                     ThreadPool& pool);

}  // namespace cpinfer
