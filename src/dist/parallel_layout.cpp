// ParallelLayout: ranks, groups and head ownership (context-parallel.md §1-§3).
#include "dist/parallel_layout.h"

#include "core/error.h"

namespace cpinfer {

void validate_layout(const LayoutSpec& spec, int64_t hq, int64_t hkv) {
  const int tp = spec.tp, pcp = spec.pcp, dcp = spec.dcp;
  CPI_CHECK(tp >= 1, "tensor-parallel-size {} must be >= 1", tp);
  CPI_CHECK(pcp >= 1, "prefill-context-parallel-size {} must be >= 1", pcp);
  CPI_CHECK(dcp >= 1, "decode-context-parallel-size {} must be >= 1", dcp);
  CPI_CHECK(spec.interleave >= 1, "cp-kv-cache-interleave-size {} must be >= 1", spec.interleave);
  CPI_CHECK(spec.page_size >= 1, "block-size {} must be >= 1", spec.page_size);
  CPI_CHECK(spec.page_size % spec.interleave == 0,
            "block-size {} is not a multiple of cp-kv-cache-interleave-size {}", spec.page_size,
            spec.interleave);
  CPI_CHECK(hq >= 1 && hkv >= 1 && hq % hkv == 0,
            "num_attention_heads {} is not a positive multiple of num_key_value_heads {}", hq,
            hkv);

  // §2: q heads split evenly; KV heads split (tp <= Hkv) or replicated (tp > Hkv).
  CPI_CHECK(hq % tp == 0, "tensor-parallel-size {} does not divide num_attention_heads {}", tp,
            hq);
  if (tp <= hkv) {
    CPI_CHECK(hkv % tp == 0, "tensor-parallel-size {} does not divide num_key_value_heads {}",
              tp, hkv);
  } else {
    CPI_CHECK(tp % hkv == 0,
              "tensor-parallel-size {} is not a multiple of num_key_value_heads {} (KV heads are "
              "replicated when tp > num_key_value_heads)",
              tp, hkv);
  }

  // §3: DCP re-uses TP ranks and only removes KV replication.
  CPI_CHECK(tp % dcp == 0,
            "tp {} is not a multiple of dcp {} (tensor-parallel-size must be divisible by "
            "decode-context-parallel-size)",
            tp, dcp);
  if (dcp > 1) {
    CPI_CHECK(tp > hkv,
              "decode-context-parallel-size {} needs tensor-parallel-size {} > num_kv_heads {} "
              "(DCP shards replicated KV heads; with tp <= num_kv_heads there are none)",
              dcp, tp, hkv);
    const int64_t replicas = tp / hkv;
    CPI_CHECK(dcp <= replicas, "decode-context-parallel-size {} exceeds tp/num_kv_heads = {} for "
              "this model", dcp, replicas);
    CPI_CHECK((hq / hkv) % dcp == 0,
              "decode-context-parallel-size {} does not divide num_attention_heads/num_kv_heads "
              "= {}/{} = {} (every DCP rank needs the same number of q heads per KV head)",
              dcp, hq, hkv, hq / hkv);
    // Not spelled out as a formula in §3 but its stated intent ("a DCP group must hold
    // replicas of the same KV head"): tp 6, 2 KV heads, dcp 2 passes the rules above, yet
    // the DCP group {2, 3} would hold KV heads 0 and 1.
    CPI_CHECK(replicas % dcp == 0,
              "decode-context-parallel-size {} does not divide the {} replicas of each KV head "
              "(tp/num_kv_heads = {}/{}): a DCP group must hold replicas of one KV head",
              dcp, replicas, tp, hkv);
  }
}

ParallelLayout::ParallelLayout(const LayoutSpec& spec, int64_t num_q_heads, int64_t num_kv_heads,
                               int global_rank)
    : spec_(spec), hq_(num_q_heads), hkv_(num_kv_heads), g_(global_rank) {
  validate_layout(spec, num_q_heads, num_kv_heads);
  CPI_CHECK(global_rank >= 0 && global_rank < world_size(),
            "global rank {} is outside the world of {} ranks (tp {} x pcp {})", global_rank,
            world_size(), spec.tp, spec.pcp);
}

// TP group: the tp consecutive ranks of this PCP slice.
std::vector<int> ParallelLayout::tp_group() const {
  std::vector<int> out(spec_.tp);
  for (int i = 0; i < spec_.tp; ++i) out[i] = pcp_rank() * spec_.tp + i;
  return out;
}

// PCP group: same tp_rank in every slice, stride tp.
std::vector<int> ParallelLayout::pcp_group() const {
  std::vector<int> out(spec_.pcp);
  for (int i = 0; i < spec_.pcp; ++i) out[i] = i * spec_.tp + tp_rank();
  return out;
}

// DCP group: dcp consecutive ranks inside the TP group, e.g. tp 4, dcp 2, g 6 -> [6, 7].
std::vector<int> ParallelLayout::dcp_group() const {
  std::vector<int> out(spec_.dcp);
  const int first = g_ - dcp_rank();
  for (int i = 0; i < spec_.dcp; ++i) out[i] = first + i;
  return out;
}

std::string ParallelLayout::describe() const {
  return fmt::format("tp {} x pcp {} (dcp {}, interleave {}, block-size {})", spec_.tp, spec_.pcp,
                     spec_.dcp, spec_.interleave, spec_.page_size);
}

int64_t ParallelLayout::num_local_q_heads() const { return hq_ / spec_.tp; }
int64_t ParallelLayout::q_head_begin() const { return tp_rank() * num_local_q_heads(); }

int64_t ParallelLayout::num_local_kv_heads() const {
  return spec_.tp <= hkv_ ? hkv_ / spec_.tp : 1;
}

int64_t ParallelLayout::kv_head_begin() const {
  if (spec_.tp <= hkv_) return tp_rank() * num_local_kv_heads();
  return tp_rank() / (spec_.tp / hkv_);  // replicas = tp / Hkv consecutive ranks per head
}

}  // namespace cpinfer
