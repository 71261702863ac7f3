// AVX-512 attention kernels: decode-shaped tasks go to attention_decode_avx512.cpp, tasks
// over a bf16 cache with bf16 dot products allowed to attention_prefill_bf16dot_avx512.cpp; the rest
// run the flash core (attention_flash.inc) with zmm lanes for QK and the softmax when a task
// has more than 8 lanes, ymm (AVX-512VL, 32 registers) for groups of <= 8 heads whose
// head_dim is not a multiple of 32, and zmm head_dim vectors for P.V; exp2 by roundscale +
// polynomial + scalef (attention_avx512_vec.h). Plus the straightforward kernel
// (attention_reference.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/attention_avx512_vec.h"

namespace cpinfer::attention_impl::avx512 {

namespace {

using vec::kAccRegs;
using vec::Y8;
using vec::Z16;

#include "kernels/attention_flash.inc"

template <class VQ>
void dispatch_dim(const FlashTask& t) {
  switch (t.head_dim) {
    case 64: flash::run_task<VQ, Z16, 64>(t); break;
    case 128: flash::run_task<VQ, Z16, 128>(t); break;
    default: flash::run_task<VQ, Z16, 0>(t); break;
  }
}

}  // namespace

void flash_task(const FlashTask& t) {
  const int64_t M = t.rows * t.group;
  if (decode_task(t)) return;           // attention_decode_avx512.cpp
  if (prefill_bf16dot_task(t)) return;  // attention_prefill_bf16dot_avx512.cpp
  flash::per_head(t, [M](const FlashTask& u) {
    if (M <= 8) dispatch_dim<Y8>(u);
    else dispatch_dim<Z16>(u);
  });
}

void exp2_n(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) Z16::store(y + i, Z16::exp2(Z16::load(x + i)));
  for (; i < n; ++i) y[i] = _mm_cvtss_f32(_mm512_castps512_ps128(Z16::exp2(Z16::set1(x[i]))));
}

#include "kernels/attention_reference.inc"

}  // namespace cpinfer::attention_impl::avx512
