// Where this rank sits in a TP x PCP x DCP layout (context-parallel.md §1-§3):
// world = tp * pcp processes, global rank g = pcp_rank * tp + tp_rank (TP fastest),
// DCP groups are dcp consecutive ranks of a TP group, R = pcp_rank * dcp + dcp_rank.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cpinfer {

struct LayoutSpec {
  int tp = 1, pcp = 1, dcp = 1;
  int interleave = 1;   // --cp-kv-cache-interleave-size
  int page_size = 16;   // --block-size
};

class ParallelLayout {
 public:
  // Validates the spec against the model's head counts (§2, §3) and throws Error with
  // a message naming the values and the rule, e.g.
  // "decode-context-parallel-size 4 exceeds tp/num_kv_heads = 2 for this model".
  ParallelLayout(const LayoutSpec& spec, int64_t num_q_heads, int64_t num_kv_heads,
                 int global_rank);

  const LayoutSpec& spec() const { return spec_; }
  int world_size() const { return spec_.tp * spec_.pcp; }
  int global_rank() const { return g_; }
  int tp_rank() const { return g_ % spec_.tp; }
  int pcp_rank() const { return g_ / spec_.tp; }
  int dcp_rank() const { return tp_rank() % spec_.dcp; }
  int cp_world() const { return spec_.pcp * spec_.dcp; }      // W
  int cp_rank() const { return pcp_rank() * spec_.dcp + dcp_rank(); }  // R
  // "tp 4 x pcp 2 (dcp 2, interleave 8, block-size 16)": for messages and logs.
  std::string describe() const;

  // Global ranks of this rank's groups, in group-rank order.
  std::vector<int> tp_group() const;
  std::vector<int> pcp_group() const;
  std::vector<int> dcp_group() const;

  // Heads this rank computes: q heads [q_head_begin, q_head_begin + num_local_q_heads),
  // KV heads [kv_head_begin, kv_head_begin + num_local_kv_heads) (one replicated head when
  // tp > Hkv: kv head tp_rank / (tp / Hkv)).
  int64_t q_head_begin() const;
  int64_t num_local_q_heads() const;
  int64_t kv_head_begin() const;
  int64_t num_local_kv_heads() const;

 private:
  LayoutSpec spec_;
  int64_t hq_, hkv_;
  int g_;
};

// Checks only the spec's own rules (sizes >= 1, tp % dcp, interleave, page size) and the
// head rules; the constructor calls it. Exposed for CLI validation before launching.
void validate_layout(const LayoutSpec& spec, int64_t num_q_heads, int64_t num_kv_heads);

}  // namespace cpinfer
