// Predicts the wall time of an engine step from what it carries, so that the scheduler can
// size a prompt chunk beside running decodes to a step-time target (--step-time-target-ms).
//
// Model: a step that carries decodes and c prompt tokens at context positions L_1..L_c takes
//   t = a + sum_j q(L_j),   q(L) = u + v * L
// a: the decodes' own step (LM head, collectives, their attention), measured directly on
// steps that carry decodes and no prompt token (an exponential average). q(L): the cost of
// one prompt token at position L; it grows with L because the token attends to L earlier
// ones. Because q is linear, sum_j q(L_j) = c * q(mean L), so each step with prompt tokens
// gives one sample (x = mean position, y = (t - a) / c), and (u, v) is the weighted least-
// squares line through the last kWindow samples. Weights c^2: y's noise is the step time's
// noise divided by c, so a prompt's 3-token last chunk barely moves the line. v < 0 (noise)
// is taken as 0. The samples keep (t, c) and y is formed with the current a at fit time.
//
// The largest chunk that fits: tokens at positions P, P+1, ..., P+c-1 cost
//   c*u + v*(c*P + c*(c-1)/2)  <=  T - a,
// a quadratic in c (worked example in tokens_within).
//
// Why a model and not a feedback rule on the last step alone: a long prompt's chunks move
// fast through the context (400 tokens a step early on), so a token of the next chunk costs
// noticeably more than one of the last; a rule that scales the last chunk by the last
// step's error lags behind and overshoots the target by 20-35% in the middle of a 16k
// prompt (docs/benchmarks.md, "Sizing chunks by step time").
#pragma once
#include <array>
#include <cstdint>
#include <optional>

namespace cpinfer {

class StepTimeModel {
 public:
  static constexpr int kWindow = 8;  // prompt-step samples the line is fitted to
  // A step with decodes and no prompt token: updates a.
  void observe_decode_step(double seconds);
  // A step with decodes and `tokens` > 0 prompt tokens whose mean position is
  // `mean_position` (0-based; a token at position L attends to L earlier ones).
  void observe_prompt_step(double seconds, int64_t tokens, double mean_position);
  // The most prompt tokens (>= 0) a step with decodes can carry within `target_s` when its
  // chunk starts at `position`; nullopt until a prompt step has been observed.
  std::optional<int64_t> tokens_within(double target_s, double position) const;
  double decode_seconds() const { return decode_s_; }

 private:
  struct Sample {
    double seconds = 0, tokens = 0, mean_position = 0;
  };
  double decode_s_ = 0;  // a; 0 until a decode-only step was seen (the samples then hold it)
  bool have_decode_ = false;
  std::array<Sample, kWindow> samples_{};
  int num_samples_ = 0, next_ = 0;  // ring buffer
};

}  // namespace cpinfer
