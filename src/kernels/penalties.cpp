#include "kernels/penalties.h"

#include "core/error.h"

namespace cpinfer {

TokenCounts::Entry& TokenCounts::entry(int32_t id) {
  auto [it, fresh] = index_.try_emplace(id, uint32_t(entries_.size()));
  if (fresh) entries_.push_back({id, false, 0});
  return entries_[it->second];
}

void TokenCounts::add_prompt(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) entry(id).in_prompt = true;
}

void TokenCounts::add_output(int32_t id) { ++entry(id).output; }

void apply_penalties(float* logits, int64_t V, const SamplingParams& p, const TokenCounts& c,
                     SavedLogits* saved) {
  saved->clear();
  for (const auto& [id, bias] : p.logit_bias) {
    CPI_ASSERT(id >= 0 && id < V);
    saved->emplace_back(id, logits[id]);
    logits[id] += bias;
  }
  if (!p.needs_counts()) return;
  const float r = p.repetition_penalty, f = p.frequency_penalty, pr = p.presence_penalty;
  for (const TokenCounts::Entry& e : c.entries()) {
    CPI_ASSERT(e.id >= 0 && e.id < V);
    float l = logits[e.id];
    saved->emplace_back(e.id, l);
    if (r != 1.f) l = l > 0 ? l / r : l * r;  // every entry is in the prompt or the output
    if (e.output > 0) {  // two subtractions, as vLLM's tensors do them
      l -= f * float(e.output);
      l -= pr;
    }
    logits[e.id] = l;
  }
}

void restore_logits(float* logits, const SavedLogits& saved) {
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) logits[it->first] = it->second;
}

}  // namespace cpinfer
