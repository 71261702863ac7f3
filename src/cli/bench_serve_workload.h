// What `bench serve` sends and when: prompts of exact token ids (the random dataset, or
// the prefix-repetition dataset of shared prefixes and fresh suffixes), and the arrival
// times of the requests (all at once, Poisson, or gamma-distributed gaps), all
// reproducible from one seed.
#pragma once
#include <cstdint>
#include <vector>

namespace cpinfer {

// Token ids of the random prompts are drawn uniformly from [kPromptTokenLo, kPromptTokenHi):
// ordinary BPE text tokens in Qwen2 (151643 regular ids) and Llama 3 (128000) vocabularies,
// away from the single-byte tokens at the bottom and the special tokens at the top, so a
// prompt neither decodes into control characters nor trips a chat-template marker. With a
// smaller --vocab-size V the range is [1000, V) for V > 2000 and [0, V) below.
inline constexpr int32_t kPromptTokenLo = 1000;
inline constexpr int32_t kPromptTokenHi = 30000;

// `count` prompts of `len` ids each; vocab_size 0 means "large" (the range above).
std::vector<std::vector<int32_t>> random_prompts(int64_t count, int64_t len, int64_t vocab_size,
                                                 uint64_t seed);

// The prefix-repetition dataset (vLLM's prefix_repetition): num_prefixes random prefixes
// of prefix_len ids, and per prompt a fresh random suffix of suffix_len ids; prompt i is
// prefix[i % num_prefixes] followed by its suffix. The order is round robin, not shuffled,
// so that with one request in flight requests 0 .. num_prefixes - 1 are the first of their
// prefix (the ones that fill a prefix cache) and every later request can find its prefix
// cached. output_len is the generated tokens per request (0: --output-len).
struct PrefixRepetition {
  int64_t num_prefixes = 1;
  int64_t prefix_len = 256;
  int64_t suffix_len = 256;
  int64_t output_len = 0;
};

// `count` prompts of prefix_len + suffix_len ids each, drawn as random_prompts draws them
// (same range for the same vocab_size) but from a stream of their own: the random
// dataset of the same seed shares no prefix with these, so an earlier random run against
// the same server does not warm their cache.
std::vector<std::vector<int32_t>> prefix_repetition_prompts(int64_t count,
                                                            const PrefixRepetition& cfg,
                                                            int64_t vocab_size, uint64_t seed);

// Send times in seconds from the start, one per request, non-decreasing, the first 0.
// rate = +inf: all 0 (every request at once). Otherwise the gaps are gamma-distributed
// with mean 1 / rate and shape `burstiness` (1: exponential gaps, a Poisson process;
// < 1 burstier, > 1 more even), as in `vllm bench serve`.
std::vector<double> arrival_times(int64_t count, double rate, double burstiness, uint64_t seed);

}  // namespace cpinfer
