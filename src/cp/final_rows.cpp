#include "cp/final_rows.h"

#include <algorithm>

#include "core/error.h"

namespace cpinfer {

void FinalRows::select(const RankStep& step, const float* x, const float* h, int64_t H,
                       Comm* comm, float* out) {
  const int64_t T = step.num_tokens(), R = int64_t(step.logit_rows.size());
  const bool any_gathered =
      std::find(step.logit_from_gathered.begin(), step.logit_from_gathered.end(), 1) !=
      step.logit_from_gathered.end();
  // The gather is collective: every PCP rank has the same logit rows (the plan is the same
  // everywhere), so all of them take part or none.
  if (any_gathered) {
    CPI_ASSERT(comm != nullptr && step.layout.pcp > 1);
    const int64_t G = int64_t(step.gather_rows.size());
    send_.resize(size_t(G * H));
    for (int64_t i = 0; i < G; ++i) {
      const int64_t row = step.gather_rows[size_t(i)];
      for (int64_t j = 0; j < H; ++j) send_[size_t(i * H + j)] = x[row * H + j] + h[row * H + j];
    }
    gathered_.resize(size_t(step.layout.pcp * G * H));
    comm->all_gather(send_.data(), gathered_.data(), size_t(G * H), DType::F32, Group::Pcp);
  }
  for (int64_t r = 0; r < R; ++r) {
    const int64_t row = step.logit_rows[size_t(r)];
    float* dst = out + r * H;
    if (step.logit_from_gathered[size_t(r)]) {
      std::copy_n(&gathered_[size_t(step.restore[size_t(row)] * H)], H, dst);
    } else {
      CPI_ASSERT(row >= 0 && row < T);
      for (int64_t i = 0; i < H; ++i) dst[i] = x[row * H + i] + h[row * H + i];
    }
  }
}

}  // namespace cpinfer
