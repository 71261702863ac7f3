// Token sampling from one row of logits: greedy (temperature 0) or temperature with
// optional top-k and top-p (nucleus), reproducible for a given seed.
#pragma once
#include <cstdint>

#include "core/thread_pool.h"

namespace cpinfer {

struct SamplingParams {
  float temperature = 0.f;  // 0: greedy
  float top_p = 1.f;        // (0, 1]
  int64_t top_k = 0;        // <= 0: off
  uint64_t seed = 0;
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

// Checks the parameters (temperature >= 0, 0 < top_p <= 1); throws Error naming the value.
void validate_sampling(const SamplingParams& p);

// Index of the largest logit (the lowest index on ties). logits: [V].
int32_t argmax(const float* logits, int64_t V, ThreadPool& pool);

// Samples one token from logits[V]. Greedy when temperature == 0. Otherwise softmax of
// logits / temperature, restricted to the top_k largest (if > 0) and then to the smallest
// set in descending order whose probability reaches top_p; one rng.uniform() per call.
// Parallel over fixed 8192-id chunks of the vocabulary combined in order, so the token
// for a given Rng state does not depend on the pool's size; only the candidates that can
// be in the nucleus are sorted (none for top_p = 1, top_k = 0).
int32_t sample_token(const float* logits, int64_t V, const SamplingParams& p, Rng& rng,
                     ThreadPool& pool);

}  // namespace cpinfer
