#include "kernels/merge_state.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace cpinfer {

namespace {
constexpr int64_t kMaxStates = kMaxMergeStates;
}

float merge_weights(int64_t n, const float* lse, int64_t stride, float* weights) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, lse[i * stride]);
  if (m == -INFINITY) {  // all empty (or n == 0): the empty state
    for (int64_t i = 0; i < n; ++i) weights[i] = 0.f;
    return -INFINITY;
  }
  // w_i = 2^(s_i - m) in double (exactly 1 for the max, 0 for empty states), c_i = w_i / sum.
  double w[kMaxStates];
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float s = lse[i * stride];
    w[i] = s == -INFINITY ? 0.0 : std::exp2(double(s) - double(m));
    sum += w[i];
  }
  for (int64_t i = 0; i < n; ++i) weights[i] = float(w[i] / sum);
  return float(double(m) + std::log2(sum));
}

void merge_states_row(int64_t n, int64_t D, const float* const* o_parts,
                      const float* lse_parts, float* o, float* lse) {
  float c[kMaxStates];
  *lse = merge_weights(n, lse_parts, 1, c);
  for (int64_t d = 0; d < D; ++d) {
    float acc = 0.f;
    for (int64_t i = 0; i < n; ++i)
      if (c[i] != 0.f) acc += c[i] * o_parts[i][d];  // skip empties: their O may be garbage
    o[d] = acc;
  }
}

void merge_states(int64_t n, int64_t tokens, int64_t heads, int64_t D, const float* o_parts,
                  int64_t part_o, int64_t ld_op, const float* lse_parts, int64_t part_l,
                  int64_t ld_lp, float* o, int64_t ld_o, float* lse, int64_t ld_l,
                  ThreadPool* pool) {
  CPI_CHECK(n >= 0 && n <= kMaxStates, "merge_states: {} states per row is outside [0, {}]", n,
            kMaxStates);
  CPI_CHECK(tokens >= 0 && heads >= 0 && D >= 1, "merge_states: shape [{}, {}, {}] is invalid",
            tokens, heads, D);
  CPI_CHECK(ld_o >= heads * D && ld_l >= heads && (n == 0 || (ld_op >= heads * D &&
            ld_lp >= heads)), "merge_states: a row stride is smaller than the row");
  if (tokens == 0 || heads == 0) return;
  CPI_CHECK(o != nullptr && lse != nullptr && (n == 0 || (o_parts && lse_parts)),
            "merge_states: null pointer");
  auto rows = [&](int64_t t0, int64_t t1) {
    const float* op[kMaxStates];
    float lp[kMaxStates];
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < n; ++i) {
          op[i] = o_parts + i * part_o + t * ld_op + h * D;
          lp[i] = lse_parts[i * part_l + t * ld_lp + h];
        }
        merge_states_row(n, D, op, lp, o + t * ld_o + h * D, lse + t * ld_l + h);
      }
  };
  if (pool) pool->parallel_for(tokens, std::max<int64_t>(1, 4096 / (heads * D)), rows);
  else rows(0, tokens);
}

void merge_state(int64_t tokens, int64_t heads, int64_t D, const float* o_a, int64_t ld_oa,
                 const float* lse_a, int64_t ld_la, const float* o_b, int64_t ld_ob,
                 const float* lse_b, int64_t ld_lb, float* o, int64_t ld_o, float* lse,
                 int64_t ld_l, ThreadPool* pool) {
  CPI_CHECK(tokens >= 0 && heads >= 0 && D >= 1, "merge_state: shape [{}, {}, {}] is invalid",
            tokens, heads, D);
  CPI_CHECK(ld_oa >= heads * D && ld_ob >= heads * D && ld_o >= heads * D && ld_la >= heads &&
                ld_lb >= heads && ld_l >= heads,
            "merge_state: a row stride is smaller than the row");
  if (tokens == 0 || heads == 0) return;
  auto rows = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        const float* op[2] = {o_a + t * ld_oa + h * D, o_b + t * ld_ob + h * D};
        const float lp[2] = {lse_a[t * ld_la + h], lse_b[t * ld_lb + h]};
        merge_states_row(2, D, op, lp, o + t * ld_o + h * D, lse + t * ld_l + h);
      }
  };
  if (pool) pool->parallel_for(tokens, std::max<int64_t>(1, 4096 / (heads * D)), rows);
  else rows(0, tokens);
}

}  // namespace cpinfer
