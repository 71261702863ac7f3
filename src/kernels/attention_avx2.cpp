// The attention tile compiled for avx2 (see attention_kernel.inc).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/attention_impl.h"

namespace cpinfer::attention_impl::avx2 {
#include "kernels/attention_kernel.inc"
}  // namespace cpinfer::attention_impl::avx2
