// A running maximum of errors that a NaN cannot hide: std::max(m, NaN) returns m (NaN
// compares false), and `if (!(d <= m)) m = d` loses a NaN at the next finite d. Here a NaN,
// once seen, stays, so `m <= tolerance` fails.
#pragma once
#include <cmath>

namespace cpinfer::testing {

inline void keep_max(double& m, double d) {
  if (!(d <= m) && !std::isnan(m)) m = d;
}

}  // namespace cpinfer::testing
