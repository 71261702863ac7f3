// Paged attention (O and base-2 LSE) against a float64 reference, every ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attention/kv_cache.h"
#include "core/cpu_features.h"
#include "kernels/attention.h"

namespace cpinfer {
namespace {

struct Case {
  std::vector<int64_t> q_lens, kv_lens;
  int64_t hq, hkv, d, page_size;
  bool causal;
  DType kv_dtype;
};

void run_case(const Case& c, Isa isa, ThreadPool& pool) {
  const int64_t S = int64_t(c.q_lens.size()), D = c.d;
  std::mt19937 g(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  // Pages: each sequence gets its own pages, handed out in a scrambled order.
  std::vector<int32_t> page_indptr{0}, page_indices;
  int64_t total_pages = 0;
  for (int64_t s = 0; s < S; ++s) total_pages += (c.kv_lens[size_t(s)] + c.page_size - 1) / c.page_size;
  std::vector<int32_t> perm(static_cast<size_t>(total_pages));
  for (int32_t i = 0; i < int32_t(total_pages); ++i) perm[size_t(i)] = i;
  std::shuffle(perm.begin(), perm.end(), g);
  int64_t used = 0;
  for (int64_t s = 0; s < S; ++s) {
    int64_t np = (c.kv_lens[size_t(s)] + c.page_size - 1) / c.page_size;
    for (int64_t p = 0; p < np; ++p) page_indices.push_back(perm[size_t(used++)]);
    page_indptr.push_back(int32_t(page_indices.size()));
  }
  KvCacheShape shape{1, std::max<int64_t>(total_pages, 1), c.page_size, c.hkv, D, c.kv_dtype};
  KvCache cache(shape);
  // Fill K/V token by token through append(), keeping the (rounded) values for the reference.
  std::vector<std::vector<double>> K(static_cast<size_t>(S)), Vv(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s) {
    int64_t L = c.kv_lens[size_t(s)];
    std::vector<float> k(size_t(L * c.hkv * D)), v(k.size());
    for (auto& x : k) x = nd(g);
    for (auto& x : v) x = nd(g);
    if (c.kv_dtype == DType::BF16) {
      for (auto& x : k) x = float(bf16(x));
      for (auto& x : v) x = float(bf16(x));
    }
    std::vector<int64_t> slots(static_cast<size_t>(L));
    for (int64_t j = 0; j < L; ++j)
      slots[size_t(j)] = int64_t(page_indices[size_t(page_indptr[size_t(s)] + j / c.page_size)]) *
                         c.page_size + j % c.page_size;
    cache.append(0, k.data(), v.data(), c.hkv * D, slots.data(), L);
    K[size_t(s)].assign(k.begin(), k.end());
    Vv[size_t(s)].assign(v.begin(), v.end());
  }
  std::vector<int64_t> q_indptr{0};
  for (int64_t s = 0; s < S; ++s) q_indptr.push_back(q_indptr.back() + c.q_lens[size_t(s)]);
  const int64_t T = q_indptr.back();
  std::vector<float> q(size_t(T * c.hq * D)), o(q.size(), 99.f), lse(size_t(T * c.hq), 99.f);
  for (auto& x : q) x = nd(g);
  AttentionBatch b{S, q_indptr.data(), c.kv_lens.data(), page_indptr.data(), page_indices.data(),
                   c.causal};
  const float scale = float(1.0 / std::sqrt(double(D)));
  set_active_isa(isa);
  paged_attention(q.data(), c.hq * D, c.hq, cache.layer(0), b, scale, o.data(), c.hq * D,
                  lse.data(), pool);
  // Reference: natural-exp softmax in double; LSE converted to base 2 at the end.
  // bf16 KV: the reference sees the same rounded values, so the bound is the f32 one.
  const double tol = 1e-4;
  double max_o = 0, max_l = 0;
  for (int64_t s = 0; s < S; ++s) {
    int64_t ql = c.q_lens[size_t(s)], kl = c.kv_lens[size_t(s)];
    for (int64_t r = 0; r < ql; ++r)
      for (int64_t h = 0; h < c.hq; ++h) {
        int64_t kvh = h / (c.hq / c.hkv), row = q_indptr[size_t(s)] + r;
        int64_t lim = c.causal ? std::min(kl, r + kl - ql + 1) : kl;
        std::vector<double> sc;
        double mx = -INFINITY;
        for (int64_t j = 0; j < lim; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += double(q[size_t((row * c.hq + h) * D + d)]) * K[size_t(s)][size_t((j * c.hkv + kvh) * D + d)];
          sc.push_back(dot * scale);
          mx = std::max(mx, sc.back());
        }
        double den = 0;
        for (double x : sc) den += std::exp(x - mx);
        double want_lse = lim > 0 ? (mx + std::log(den)) / std::log(2.0) : -INFINITY;
        float got_lse = lse[size_t(row * c.hq + h)];
        if (lim == 0) {
          EXPECT_TRUE(std::isinf(got_lse) && got_lse < 0);
        } else {
          max_l = std::max(max_l, std::abs(double(got_lse) - want_lse));
        }
        for (int64_t d = 0; d < D; ++d) {
          double want = 0;
          for (int64_t j = 0; j < lim; ++j)
            want += std::exp(sc[size_t(j)] - mx) / den * Vv[size_t(s)][size_t((j * c.hkv + kvh) * D + d)];
          max_o = std::max(max_o, std::abs(double(o[size_t((row * c.hq + h) * D + d)]) - want));
        }
      }
  }
  EXPECT_LE(max_o, tol) << "O error, isa " << isa_name(isa);
  EXPECT_LE(max_l, tol) << "LSE error, isa " << isa_name(isa);
}

TEST(PagedAttention, MatchesFloat64Reference) {
  Isa saved = active_isa();
  ThreadPool pool(2);
  std::vector<Case> cases = {
      {{1}, {1}, 4, 4, 32, 1, true, DType::F32},
      {{3}, {17}, 8, 1, 64, 8, true, DType::F32},            // GQA group 8, decode-like chunk
      {{64}, {64}, 14, 2, 64, 16, true, DType::F32},         // prefill, group 7
      {{1, 1, 1}, {100, 15, 1000}, 16, 2, 128, 16, true, DType::F32},  // batched decode
      {{5, 33, 1}, {5, 50, 2}, 4, 2, 32, 64, true, DType::F32},  // mixed, cached context
      {{16}, {16}, 2, 1, 48, 8, false, DType::F32},           // non-causal, head_dim 48
      {{7, 2}, {100, 17}, 16, 2, 64, 16, true, DType::BF16},  // bf16 KV
  };
  for (const Case& c : cases)
    for (Isa isa : supported_isas()) run_case(c, isa, pool);
  set_active_isa(saved);
}

TEST(PagedAttention, RowWithNoVisibleKvIsEmptyState) {
  // Causal with q_len > kv_len: the first rows see nothing (bottom-right alignment).
  Case c{{4}, {2}, 2, 1, 32, 4, true, DType::F32};
  ThreadPool pool(1);
  run_case(c, active_isa(), pool);
}

}  // namespace
}  // namespace cpinfer
