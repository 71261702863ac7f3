// The monotonic clock in seconds, for timing phases, steps and benchmarks (differences only:
// the origin is arbitrary).
#pragma once
#include <chrono>

namespace cpinfer {

inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace cpinfer
