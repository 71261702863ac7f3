// The final hidden rows that give logits (docs/context-parallel.md §4 step 6): a local row is
// read as it is; under PCP a prefill or chunk request's rows are spread over the PCP ranks
// and a decode runs on one of them, so the rows that give logits (a request's last token, or
// all of its tokens when all logits are asked for) are all-gathered over PCP from the rank
// that holds each. The hidden state of a row is x + h (the residual stream plus
// the last MLP output, not yet added).
#pragma once
#include <cstdint>
#include <vector>

#include "cp/step_planner.h"
#include "dist/comm.h"

namespace cpinfer {

class FinalRows {
 public:
  // x, h: [T, H] (T = step.num_tokens()). out: [step.logit_rows.size(), H].
  void select(const RankStep& step, const float* x, const float* h, int64_t H, Comm* comm,
              float* out);

 private:
  std::vector<float> send_, gathered_;
  std::vector<int> counts_, displs_;
};

}  // namespace cpinfer
