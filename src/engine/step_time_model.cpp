#include "engine/step_time_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cpinfer {

void StepTimeModel::observe_decode_step(double seconds) {
  // An exponential average over ~5 steps: follows the decodes' cost as streams come and go
  // and their contexts grow, and smooths one slow step.
  decode_s_ = have_decode_ ? 0.8 * decode_s_ + 0.2 * seconds : seconds;
  have_decode_ = true;
}

void StepTimeModel::observe_prompt_step(double seconds, int64_t tokens, double mean_position) {
  if (tokens <= 0) return;
  samples_[size_t(next_)] = {seconds, double(tokens), mean_position};
  next_ = (next_ + 1) % kWindow;
  num_samples_ = std::min(num_samples_ + 1, kWindow);
}

std::optional<int64_t> StepTimeModel::tokens_within(double target_s, double position) const {
  if (num_samples_ == 0) return std::nullopt;
  // Weighted least squares of y = u + v x over the window, weights c^2.
  double sw = 0, sx = 0, sy = 0;
  for (int i = 0; i < num_samples_; ++i) {
    const Sample& s = samples_[size_t(i)];
    const double w = s.tokens * s.tokens, y = (s.seconds - decode_s_) / s.tokens;
    sw += w;
    sx += w * s.mean_position;
    sy += w * y;
  }
  const double mx = sx / sw, my = sy / sw;
  double sxx = 0, sxy = 0;
  for (int i = 0; i < num_samples_; ++i) {
    const Sample& s = samples_[size_t(i)];
    const double w = s.tokens * s.tokens, y = (s.seconds - decode_s_) / s.tokens;
    sxx += w * (s.mean_position - mx) * (s.mean_position - mx);
    sxy += w * (s.mean_position - mx) * (y - my);
  }
  // Positions less than a token apart on average tell nothing about the slope.
  const double v = sxx > sw ? std::max(0.0, sxy / sxx) : 0.0;
  const double u = my - v * mx;
  const double room = target_s - decode_s_;
  if (room <= 0) return 0;
  // c*u + v*(c*P + c*(c-1)/2) = room  <=>  (v/2) c^2 + B c - room = 0, B = u + v (P - 1/2),
  // whose positive root is c = 2 room / (B + sqrt(B^2 + 2 v room)) (this form has no
  // cancellation and is room / B when v = 0). Example: T 90 ms, a 10 ms, u 0.02 ms,
  // v 1e-4 ms, P 2000: B = 0.21995, c = 160 / (0.21995 + sqrt(0.04838 + 0.016)) = 337.8:
  // 337 tokens (cost 6.74 + 0.0001 * (337 * 2000 + 337 * 336 / 2) = 79.8 ms <= 80).
  const double b = u + v * (position - 0.5);
  const double denom = b + std::sqrt(std::max(0.0, b * b + 2 * v * room));
  if (denom <= 0) return std::numeric_limits<int64_t>::max();  // free tokens: no limit
  // (+1e-6: a chunk that fits exactly, 400.0 computed as 399.99999..., still fits.)
  const double c = 2 * room / denom + 1e-6;
  return c >= 9e18 ? std::numeric_limits<int64_t>::max() : int64_t(std::floor(c));
}

}  // namespace cpinfer
