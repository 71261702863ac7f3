// The attention tile compiled for generic (see attention_kernel.inc).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/attention_impl.h"

namespace cpinfer::attention_impl::generic {
#include "kernels/attention_kernel.inc"
}  // namespace cpinfer::attention_impl::generic
