#include "cp/final_rows.h"

#include <algorithm>

#include "core/error.h"

namespace cpinfer {

void FinalRows::select(const RankStep& step, const float* x, const float* h, int64_t H,
                       Comm* comm, float* out) {
  const int64_t T = step.num_tokens(), R = int64_t(step.logit_rows.size());
  // The gather is collective: every PCP rank has the same logit rows (the plan is the same
  // everywhere), so all of them take part or none. It moves only the rows that give logits,
  // each from the one PCP rank that holds it.
  if (!step.hidden_counts.empty()) {
    CPI_ASSERT(comm != nullptr && step.layout.pcp > 1);
    TrafficScope traffic(comm, Traffic::HiddenGather);
    const int64_t G = int64_t(step.hidden_rows.size());
    send_.resize(size_t(G * H));
    for (int64_t i = 0; i < G; ++i) {
      const int64_t row = step.hidden_rows[size_t(i)];
      for (int64_t j = 0; j < H; ++j) send_[size_t(i * H + j)] = x[row * H + j] + h[row * H + j];
    }
    int64_t total = 0;
    counts_.resize(step.hidden_counts.size());
    displs_.resize(step.hidden_counts.size());
    for (size_t k = 0; k < counts_.size(); ++k) {
      counts_[k] = int(step.hidden_counts[k] * H);
      displs_[k] = int(step.hidden_displs[k] * H);
      total += step.hidden_counts[k];
    }
    gathered_.resize(size_t(total * H));
    comm->all_gather_v(send_.data(), size_t(G * H), gathered_.data(), counts_, displs_,
                       DType::F32, Group::Pcp);
  }
  for (int64_t r = 0; r < R; ++r) {
    const int64_t row = step.logit_rows[size_t(r)];
    float* dst = out + r * H;
    if (step.logit_from_gathered[size_t(r)]) {
      std::copy_n(&gathered_[size_t(row * H)], H, dst);
    } else {
      CPI_ASSERT(row >= 0 && row < T);
      for (int64_t i = 0; i < H; ++i) dst[i] = x[row * H + i] + h[row * H + i];
    }
  }
}

}  // namespace cpinfer
