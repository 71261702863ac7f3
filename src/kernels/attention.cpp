#include "kernels/attention.h"

#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/attention_impl.h"

namespace cpinfer {

namespace {
attention_impl::TileFn tile_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return attention_impl::avx512::attention_tile;
    case Isa::Avx2: return attention_impl::avx2::attention_tile;
    default: return attention_impl::generic::attention_tile;
  }
}
constexpr int64_t kRowsPerTask = 16;
}  // namespace

void paged_attention(const float* q, int64_t ldq, int64_t num_q_heads, const PagedKv& kv,
                     const AttentionBatch& batch, float sm_scale, float* o, int64_t ldo,
                     float* lse, ThreadPool& pool) {
  CPI_CHECK(kv.num_kv_heads > 0 && num_q_heads % kv.num_kv_heads == 0,
            "num_q_heads {} is not a multiple of num_kv_heads {}", num_q_heads, kv.num_kv_heads);
  CPI_CHECK(kv.head_dim > 0 && kv.head_dim <= 512, "head_dim {} is outside [1, 512]", kv.head_dim);
  // Tasks: (sequence, KV head, block of kRowsPerTask query rows), listed up front.
  struct Task { int64_t seq, kv_head, r0, r1; };
  std::vector<Task> tasks;
  for (int64_t s = 0; s < batch.num_seqs; ++s) {
    int64_t q_len = batch.q_indptr[s + 1] - batch.q_indptr[s];
    for (int64_t g = 0; g < kv.num_kv_heads; ++g)
      for (int64_t r = 0; r < q_len; r += kRowsPerTask)
        tasks.push_back({s, g, r, std::min(q_len, r + kRowsPerTask)});
  }
  attention_impl::TileFn tile = tile_for(active_isa());
  pool.run(int64_t(tasks.size()), [&](int64_t t, int) {
    const Task& w = tasks[size_t(t)];
    tile(q, ldq, num_q_heads, kv, batch, sm_scale, o, ldo, lse, w.seq, w.kv_head, w.r0, w.r1);
  });
}

}  // namespace cpinfer
