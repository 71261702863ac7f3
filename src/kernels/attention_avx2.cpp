// AVX2 attention kernels: decode-shaped tasks go to attention_decode_avx2.cpp, tasks of more
// than 8 lanes with head_dim a multiple of 8 to attention_prefill_avx2.cpp; the rest run the
// flash core (attention_flash.inc) with ymm vectors everywhere
// (16 registers: 12-accumulator tiles); exp2 by round + polynomial + exponent bits. Plus the
// straightforward kernel (attention_reference.inc).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/attention_avx2_vec.h"
#include "kernels/attention_impl.h"

namespace cpinfer::attention_impl::avx2 {

namespace {

using vec::kAccRegs;
using vec::Y8;

#include "kernels/attention_flash.inc"

}  // namespace

void flash_task(const FlashTask& t) {
  if (decode_task(t)) return;   // attention_decode_avx2.cpp
  if (prefill_task(t)) return;  // attention_prefill_avx2.cpp
  // What is left: tasks of <= 8 lanes with head_dim not a multiple of 16, or of more lanes with
  // head_dim not a multiple of 8 (head_dim 64 and 128 never get here).
  flash::per_head(t, [](const FlashTask& u) { flash::run_task<Y8, Y8, 0>(u); });
}

void exp2_n(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) Y8::store(y + i, Y8::exp2(Y8::load(x + i)));
  for (; i < n; ++i) y[i] = _mm256_cvtss_f32(Y8::exp2(Y8::set1(x[i])));
}

#include "kernels/attention_reference.inc"

}  // namespace cpinfer::attention_impl::avx2
