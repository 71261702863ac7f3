#include "engine/engine_metrics.h"

#include <algorithm>

namespace cpinfer {

void Histogram::observe(double v) {
  // counts are per bucket here; the renderer accumulates.
  auto it = std::lower_bound(bounds.begin(), bounds.end(), v);
  if (it != bounds.end()) ++counts[size_t(it - bounds.begin())];
  sum += v;
  ++count;
}

}  // namespace cpinfer
