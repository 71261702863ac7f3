// The attention backend against a float64 reference written here, on every ISA this machine
// has and on 1- and 2-thread pools (context-parallel.md §9: O and LSE within 1e-4 for f32
// inputs of unit scale).
//
// Sweeps (the reference is computed once per case and reused for every ISA x pool):
//   SweepLengths   kv_len {1, 2, 15, 16, 17, 100, 1000, 4097} x q_len {1, 3, 64, 333} x causal
//                  {on, off}: the full product, one sequence, page size 16, group 2, D 64.
//   SweepShapes    page size {1, 8, 16, 64} x group {1, 2, 7, 8, 16} x head_dim {32, 40, 64,
//                  128} x causal {on, off}: the full product (head_dim 40 takes the packed f32
//                  path: not a multiple of the vector width) on one mixed batch (a decode over
//                  1000 tokens, a prefill without context, a chunk with cached context, a
//                  sequence with no query rows, a 70-row chunk over 80 cached tokens), with
//                  padded row strides.
//   Bf16           a covering subset (kv {1, 17, 1000, 4097} x q {1, 64}): within 1e-4 of the
//                  reference on the bf16-rounded K/V, and within the analytic bound of the
//                  storage rounding of the reference on the original f32 K/V (see Bf16 below).
// Plus: split-KV vs whole, determinism of run(), no allocation in run(), ragged K/V, empty
// states, the base-2 LSE guard, exp2 accuracy, argument errors, the KV cache's slot -1 rule.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>

#include "attention/kv_cache.h"
#include "attention/page_pool.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/attention_impl.h"
#include "kernels/merge_state.h"

// Counts heap allocations made through operator new (the "run() allocates nothing" test).
#include "support/counting_new.h"
#include "support/nan_max.h"

namespace cpinfer {
namespace {

constexpr double kTol = 1e-4;

// One problem: sequences with their query rows and cached K/V, and the float64 reference.
struct Data {
  int64_t hq = 0, hkv = 0, d = 0, page_size = 16, ldq = 0, ldo = 0;
  DType dtype = DType::F32;
  bool causal = true;
  std::vector<int64_t> q_lens, kv_lens, q_indptr{0};
  std::vector<std::vector<float>> k, v;          // per sequence [kv_len, hkv, d], as stored
  std::vector<std::vector<float>> k_raw, v_raw;  // before bf16 rounding
  std::vector<float> q;                          // [T, ldq]
  std::vector<int32_t> page_indptr{0}, page_indices;
  std::unique_ptr<KvCache> cache;
  int64_t tokens() const { return q_indptr.back(); }
  float scale() const { return float(1.0 / std::sqrt(double(d))); }
  AttentionBatch batch() const {
    return AttentionBatch{int64_t(q_lens.size()), q_indptr.data(), kv_lens.data(),
                          page_indptr.data(), page_indices.data(), causal};
  }
};

Data make_data(std::vector<int64_t> q_lens, std::vector<int64_t> kv_lens, int64_t hq,
               int64_t hkv, int64_t d, int64_t page_size, bool causal,
               DType dtype = DType::F32, int64_t pad = 0, uint32_t seed = 1234) {
  Data x;
  x.hq = hq;
  x.hkv = hkv;
  x.d = d;
  x.page_size = page_size;
  x.dtype = dtype;
  x.causal = causal;
  x.ldq = hq * d + pad;
  x.ldo = hq * d + pad;
  x.q_lens = std::move(q_lens);
  x.kv_lens = std::move(kv_lens);
  const int64_t S = int64_t(x.q_lens.size());
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  // Pages: each sequence gets its own, handed out in a scrambled order, one spare page so the
  // highest index is not always used.
  int64_t total = 1;
  for (int64_t L : x.kv_lens) total += (L + page_size - 1) / page_size;
  std::vector<int32_t> perm(static_cast<size_t>(total));
  for (int32_t i = 0; i < int32_t(total); ++i) perm[size_t(i)] = i;
  std::shuffle(perm.begin(), perm.end(), g);
  size_t used = 0;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t np = (x.kv_lens[size_t(s)] + page_size - 1) / page_size;
    for (int64_t p = 0; p < np; ++p) x.page_indices.push_back(perm[used++]);
    x.page_indptr.push_back(int32_t(x.page_indices.size()));
    x.q_indptr.push_back(x.q_indptr.back() + x.q_lens[size_t(s)]);
  }
  x.cache = std::make_unique<KvCache>(KvCacheShape{1, total, page_size, hkv, d, dtype});
  for (int64_t s = 0; s < S; ++s) {
    const int64_t L = x.kv_lens[size_t(s)];
    std::vector<float> k(size_t(L * hkv * d)), v(k.size());
    for (auto& e : k) e = nd(g);
    for (auto& e : v) e = nd(g);
    x.k_raw.push_back(k);
    x.v_raw.push_back(v);
    std::vector<int64_t> slots(static_cast<size_t>(L));
    for (int64_t j = 0; j < L; ++j)
      slots[size_t(j)] =
          int64_t(x.page_indices[size_t(x.page_indptr[size_t(s)] + j / page_size)]) * page_size +
          j % page_size;
    x.cache->append(0, k.data(), v.data(), hkv * d, slots.data(), L);
    if (dtype == DType::BF16) {
      for (auto& e : k) e = float(bf16(e));
      for (auto& e : v) e = float(bf16(e));
    }
    x.k.push_back(std::move(k));
    x.v.push_back(std::move(v));
  }
  x.q.assign(size_t(x.tokens() * x.ldq), 7.f);  // padding holds junk the kernel must not read
  for (int64_t t = 0; t < x.tokens(); ++t)
    for (int64_t i = 0; i < hq * d; ++i) x.q[size_t(t * x.ldq + i)] = nd(g);
  return x;
}

struct Ref {
  std::vector<double> o, lse;  // [T, hq, d], [T, hq]; lse base 2, -inf for empty rows
  std::vector<double> bound_o, bound_lse;  // bf16 storage-rounding bounds per (row, head)
};

// How far a bf16 kernel may be from the reference on the original f32 K/V (per row, head).
// Every product q_d k_d moves by at most `rel` of itself, so each score moves by at most
// eps = scale * sum_d |q_d k_d| * rel, the LSE by at most eps (log2 units: eps * log2 e, LSE
// is 1-Lipschitz in the max norm of the scores) and each softmax weight by a factor within
// e^(+-2 eps); the weights and V themselves move by at most `rel_o` relative, so
// |dO| <= (e^(2 eps) - 1 + rel_o) * max|v|.
//   kStorage: only K and V are rounded (<= 2^-9 each; 2^-8 keeps a margin).
//   kBf16Dot: also Q (<= 2^-9) and the weights P (bf16 P over the sum of the rounded P:
//             <= 2^-8): rel = 2^-7 (2^-9 + 2^-9 + products, with margin), rel_o = 2^-7.
enum class Bound { kNone, kStorage, kBf16Dot };

// Natural-exp softmax in double over K/V `ks`/`vs` (per sequence [kv, hkv, d]); the LSE is
// converted to base 2 at the end. Optionally the bound above.
Ref reference(const Data& x, const std::vector<std::vector<float>>& ks,
              const std::vector<std::vector<float>>& vs, Bound bound = Bound::kNone) {
  const double rel = bound == Bound::kBf16Dot ? std::ldexp(1.0, -7) : std::ldexp(1.0, -8);
  const double rel_o = rel;
  Ref r;
  const int64_t T = x.tokens(), hq = x.hq, hkv = x.hkv, D = x.d, G = hq / hkv;
  r.o.assign(size_t(T * hq * D), 0.0);
  r.lse.assign(size_t(T * hq), -INFINITY);
  r.bound_o.assign(size_t(T * hq), 0.0);
  r.bound_lse.assign(size_t(T * hq), 0.0);
  const double scale = x.scale();
  std::vector<double> sc;
  for (size_t s = 0; s < x.q_lens.size(); ++s) {
    const int64_t ql = x.q_lens[s], kl = x.kv_lens[s];
    for (int64_t i = 0; i < ql; ++i)
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t row = x.q_indptr[s] + i, kvh = h / G;
        const int64_t lim = x.causal ? std::clamp<int64_t>(i + kl - ql + 1, 0, kl) : kl;
        if (lim == 0) continue;
        const float* qr = &x.q[size_t(row * x.ldq + h * D)];
        sc.assign(size_t(lim), 0.0);
        double mx = -INFINITY, eps = 0, vmax = 0;
        for (int64_t j = 0; j < lim; ++j) {
          double dot = 0, mag = 0;
          for (int64_t e = 0; e < D; ++e) {
            const double kk = ks[s][size_t((j * hkv + kvh) * D + e)];
            dot += double(qr[e]) * kk;
            mag += std::abs(double(qr[e]) * kk);
            vmax = std::max(vmax, std::abs(double(vs[s][size_t((j * hkv + kvh) * D + e)])));
          }
          sc[size_t(j)] = dot * scale;
          eps = std::max(eps, mag * scale * rel);
          mx = std::max(mx, sc[size_t(j)]);
        }
        double den = 0;
        for (double& e : sc) den += (e = std::exp(e - mx));
        r.lse[size_t(row * hq + h)] = (mx + std::log(den)) / std::log(2.0);
        double* o = &r.o[size_t((row * hq + h) * D)];
        for (int64_t j = 0; j < lim; ++j) {
          const double p = sc[size_t(j)] / den;
          const float* vr = &vs[s][size_t((j * hkv + kvh) * D)];
          for (int64_t e = 0; e < D; ++e) o[e] += p * vr[e];
        }
        if (bound != Bound::kNone) {
          r.bound_lse[size_t(row * hq + h)] = eps / std::log(2.0);
          r.bound_o[size_t(row * hq + h)] = (std::expm1(2 * eps) + rel_o) * vmax;
        }
      }
  }
  return r;
}

struct Out {
  std::vector<float> o, lse;
};

Out alloc_out(const Data& x) {
  return Out{std::vector<float>(size_t(x.tokens() * x.ldo), 99.f),
             std::vector<float>(size_t(x.tokens() * x.hq), 99.f)};
}

// Checks the kernel's O/LSE against the reference: errors within tol (plus the per-row bound
// when given), empty rows exactly (0, -inf), no NaN anywhere, padding untouched.
void expect_close(const Data& x, const Out& out, const Ref& r, double tol, bool use_bound,
                  const std::string& what) {
  const int64_t T = x.tokens(), hq = x.hq, D = x.d;
  double max_o = 0, max_l = 0;
  int64_t bad = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = hq * D; i < x.ldo; ++i)
      if (out.o[size_t(t * x.ldo + i)] != 99.f) ++bad;  // the pad of o is never written
    for (int64_t h = 0; h < hq; ++h) {
      const double want_l = r.lse[size_t(t * hq + h)];
      const float got_l = out.lse[size_t(t * hq + h)];
      const float* got_o = &out.o[size_t(t * x.ldo + h * D)];
      if (std::isinf(want_l)) {
        if (!(std::isinf(got_l) && got_l < 0)) ++bad;
        for (int64_t e = 0; e < D; ++e)
          if (got_o[e] != 0.f) ++bad;
        continue;
      }
      const double bl = use_bound ? r.bound_lse[size_t(t * hq + h)] : 0.0;
      const double bo = use_bound ? r.bound_o[size_t(t * hq + h)] : 0.0;
      if (!std::isfinite(got_l)) ++bad;
      max_l = std::max(max_l, std::abs(double(got_l) - want_l) - bl);
      for (int64_t e = 0; e < D; ++e) {
        if (!std::isfinite(got_o[e])) ++bad;
        max_o = std::max(max_o, std::abs(double(got_o[e]) - r.o[size_t((t * hq + h) * D + e)]) -
                                    bo);
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": empty-state, NaN or padding violations";
  EXPECT_LE(max_o, tol) << what << ": O error";
  EXPECT_LE(max_l, tol) << what << ": LSE error";
}

std::string describe(const Data& x, Isa isa, int threads) {
  std::string s = fmt::format("isa {} threads {} hq {} hkv {} d {} page {} {} causal {} q [",
                              isa_name(isa), threads, x.hq, x.hkv, x.d, x.page_size,
                              dtype_name(x.dtype), x.causal);
  for (int64_t v : x.q_lens) s += fmt::format("{} ", v);
  s += "] kv [";
  for (int64_t v : x.kv_lens) s += fmt::format("{} ", v);
  return s + "]";
}

ThreadPool& pool_of(int threads) {
  static ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

// Restores the active ISA when a test ends.
struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_active_isa(saved); }
};

Out run_paged(const Data& x, int threads, int64_t max_kv_chunk = 0,
              Bf16Math bf16_math = Bf16Math::Auto) {
  AttentionProblem p = paged_problem(x.batch(), x.hq, x.cache->layer(0), threads);
  p.max_kv_chunk = max_kv_chunk;
  p.bf16_math = bf16_math;
  AttentionPlan plan = plan_attention(p);
  AttentionWorkspace ws;
  ws.reserve(plan);
  Out out = alloc_out(x);
  run_attention(plan, x.q.data(), x.ldq, x.cache->layer(0), x.scale(), out.o.data(), x.ldo,
                out.lse.data(), ws, pool_of(threads));
  return out;
}

// Every ISA x {1, 2} threads against one reference. bf16_math: a bf16 cache's decode
// arithmetic (F32 by default here; Dot forces bf16 dot products where the CPU has them).
void check_all(const Data& x, const Ref& r, double tol = kTol, bool use_bound = false,
               Bf16Math bf16_math = Bf16Math::F32) {
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (int threads : {1, 2})
      expect_close(x, run_paged(x, threads, 0, bf16_math), r, tol, use_bound,
                   describe(x, isa, threads) + (bf16_math == Bf16Math::Dot ? " bf16_dot" : ""));
  }
}

// On an AVX512_BF16 CPU, Dot really takes the bf16 path for x's tasks (it differs from F32),
// and Auto is Dot where bf16_dot_preferred() and F32 elsewhere, bit for bit.
void expect_dot_path_taken(const Data& x, const char* what) {
  if (!(isa_supported(Isa::Avx512) && __builtin_cpu_supports("avx512bf16"))) {
    std::printf("[ skipped ] bf16 dot-product %s path: this CPU has no AVX512_BF16\n", what);
    return;
  }
  IsaGuard guard;
  set_active_isa(Isa::Avx512);
  const Out exact = run_paged(x, 1, 0, Bf16Math::F32), dot = run_paged(x, 1, 0, Bf16Math::Dot);
  const Out autom = run_paged(x, 1, 0, Bf16Math::Auto);
  EXPECT_NE(0, std::memcmp(exact.o.data(), dot.o.data(), exact.o.size() * 4)) << what;
  const Out& expected = bf16_dot_preferred() ? dot : exact;
  EXPECT_EQ(0, std::memcmp(expected.o.data(), autom.o.data(), exact.o.size() * 4))
      << what << ": Auto is not " << (bf16_dot_preferred() ? "Dot" : "F32") << " on this CPU";
}

TEST(Attention, SweepLengths) {
  for (bool causal : {true, false})
    for (int64_t kv : {1, 2, 15, 16, 17, 100, 1000, 4097})
      for (int64_t q : {1, 3, 64, 333}) {
        Data x = make_data({q}, {kv}, 4, 2, 64, 16, causal, DType::F32, 0, uint32_t(kv * 7 + q));
        check_all(x, reference(x, x.k, x.v));
      }
}

TEST(Attention, SweepShapes) {
  for (bool causal : {true, false})
    for (int64_t page : {1, 8, 16, 64})
      for (int64_t group : {1, 2, 7, 8, 16})
        for (int64_t d : {32, 40, 64, 128}) {
          // decode over 1000 | prefill, empty context | chunk over cached context |
          // no query rows | long chunk
          Data x = make_data({1, 5, 3, 0, 70}, {1000, 5, 17, 10, 150}, 2 * group, 2, d, page,
                             causal, DType::F32, 16, uint32_t(page * 131 + group * 7 + d));
          check_all(x, reference(x, x.k, x.v));
        }
}

// bf16 storage, f32 arithmetic (Bf16Math::F32): against the reference on the rounded K/V the
// f32 tolerance holds (the kernel widens bf16 exactly); against the reference on the original
// values, the storage rounding's bound (Bound::kStorage) plus the f32 tolerance.
// bf16 dot products (forced here; by default used for decode-shaped tasks on AMD CPUs with
// AVX512_BF16): the bound with Q and P rounded as well (Bound::kBf16Dot), against the
// original values.
TEST(Attention, Bf16) {
  for (int64_t kv : {1, 17, 1000, 4097})
    for (int64_t q : {1, 64}) {
      Data x = make_data({q}, {kv}, 16, 2, 128, 16, true, DType::BF16, 0, uint32_t(kv + q));
      check_all(x, reference(x, x.k, x.v));
      check_all(x, reference(x, x.k_raw, x.v_raw, Bound::kStorage), kTol, true);
      check_all(x, reference(x, x.k_raw, x.v_raw, Bound::kBf16Dot), kTol, true, Bf16Math::Dot);
    }
  expect_dot_path_taken(make_data({1}, {1000}, 16, 2, 128, 16, true, DType::BF16), "decode");
  // Decode batches: group 8 and head_dim 64; group 4 (4 lanes) with an odd tile tail.
  for (auto [hq, d] : {std::pair<int64_t, int64_t>{16, 64}, {8, 128}}) {
    Data x = make_data({1, 1, 1}, {4097, 101, 1}, hq, 2, d, 8, true, DType::BF16);
    check_all(x, reference(x, x.k, x.v));
    check_all(x, reference(x, x.k_raw, x.v_raw, Bound::kBf16Dot), kTol, true, Bf16Math::Dot);
  }
}

// The decode kernels (at most 8 lanes per KV head; head_dim a multiple of 32 on AVX-512, of 16
// on AVX2) for every lane count 1-8 (one row of a group of 1-8 q heads, or 2-4 causal rows of a
// smaller group), f32 and bf16 caches, tile tails (5, 7, 129, 300 tokens; 128 per tile),
// head_dim 16 to 128 (16 and 48: an odd number of AVX2's 16-value chunks, the flash kernel on
// AVX-512).
TEST(Attention, DecodeLanes) {
  const struct { int64_t rows, group; } lanes[] = {{1, 1}, {1, 2}, {3, 1}, {1, 4}, {5, 1},
                                                    {3, 2}, {1, 7}, {1, 8}, {2, 4}, {4, 2}};
  for (const auto& ln : lanes)
    for (int64_t d : {16, 32, 48, 64, 96, 128})
      for (DType dt : {DType::F32, DType::BF16}) {
        Data x = make_data({ln.rows, ln.rows, ln.rows, ln.rows}, {5, 7, 129, 300},
                           2 * ln.group, 2, d, 16, true, dt, 16,
                           uint32_t(ln.rows * 100 + ln.group * 10 + d));
        check_all(x, reference(x, x.k, x.v));
        if (dt == DType::BF16)
          check_all(x, reference(x, x.k_raw, x.v_raw, Bound::kBf16Dot), kTol, true,
                    Bf16Math::Dot);
      }
}

// Prefill tasks (more than 8 lanes per KV head) over a bf16 cache with bf16 dot products
// (attention_prefill_bf16dot_avx512.cpp on AVX512_BF16 CPUs; f32 arithmetic elsewhere and for
// head_dim 40): groups 1-8, head_dim 32 to 128, lane counts that are not multiples of 16, odd
// tile tails, a chunk over cached context, pages of 1 and 16, causal or not, and split KV
// ranges (partial states merged by LSE), against the float64 reference within
// Bound::kBf16Dot.
TEST(Attention, Bf16DotPrefill) {
  for (int64_t group : {1, 2, 7, 8})
    for (int64_t d : {32, 40, 64, 96, 128})
      for (bool causal : {true, false}) {
        const int64_t page = (d == 64 || group == 7) ? 1 : 16;
        // prefill of 9 rows | 33 new rows over 100 cached | 130 rows over 300 cached
        Data x = make_data({9, 33, 130}, {9, 133, 430}, 2 * group, 2, d, page, causal,
                           DType::BF16, 16, uint32_t(group * 1000 + d * 10 + causal));
        check_all(x, reference(x, x.k_raw, x.v_raw, Bound::kBf16Dot), kTol, true,
                  Bf16Math::Dot);
      }
  IsaGuard guard;
  Data x = make_data({70, 200}, {70, 1000}, 16, 2, 128, 16, true, DType::BF16, 0, 9);
  const Ref r = reference(x, x.k_raw, x.v_raw, Bound::kBf16Dot);
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (int64_t chunk : {100, 333})
      expect_close(x, run_paged(x, 2, chunk, Bf16Math::Dot), r, kTol, true,
                   describe(x, isa, 2) + fmt::format(" bf16_dot split-KV chunk {}", chunk));
  }
  expect_dot_path_taken(x, "prefill");
}

// The sweeps' edge shapes at small lengths (page 1, an odd group, head_dim 40, an empty query
// row set, a bf16 cache with both dot-product modes), cheap enough to run under ASan +
// UBSan, where the four sweeps above are left out for time (scripts/sanitizer_test.sh).
TEST(Attention, EdgeShapesSmall) {
  const struct { int64_t page, group, d; } shapes[] = {{1, 7, 40}, {8, 1, 32}, {64, 16, 128},
                                                        {16, 2, 64}};
  for (bool causal : {true, false})
    for (const auto& sh : shapes) {
      Data x = make_data({1, 5, 3, 0, 70}, {200, 5, 17, 10, 150}, 2 * sh.group, 2, sh.d,
                         sh.page, causal, DType::F32, 16,
                         uint32_t(sh.page * 131 + sh.group * 7 + sh.d + causal));
      check_all(x, reference(x, x.k, x.v));
    }
  Data x = make_data({1, 1, 64}, {17, 300, 80}, 16, 2, 128, 16, true, DType::BF16, 16, 5);
  check_all(x, reference(x, x.k, x.v));
  check_all(x, reference(x, x.k_raw, x.v_raw, Bound::kBf16Dot), kTol, true, Bf16Math::Dot);
  // Bf16DotPrefill's odd corner (group 7, head_dim 40, page 1), at its two smaller batches.
  for (bool causal : {true, false}) {
    Data y = make_data({9, 33}, {9, 133}, 14, 2, 40, 1, causal, DType::BF16, 16, 7040 + causal);
    check_all(y, reference(y, y.k_raw, y.v_raw, Bound::kBf16Dot), kTol, true, Bf16Math::Dot);
  }
}

// The straightforward kernel is the benchmark's baseline: it must be right too.
TEST(Attention, ReferenceKernelMatches) {
  IsaGuard guard;
  for (DType dt : {DType::F32, DType::BF16}) {
    Data x = make_data({1, 7, 64}, {100, 17, 200}, 14, 2, 48, 8, true, dt);
    Ref r = reference(x, x.k, x.v);
    for (Isa isa : supported_isas()) {
      set_active_isa(isa);
      Out out = alloc_out(x);
      paged_attention_reference(x.q.data(), x.ldq, x.hq, x.cache->layer(0), x.batch(),
                                x.scale(), out.o.data(), x.ldo, out.lse.data(), pool_of(2));
      expect_close(x, out, r, kTol, false, describe(x, isa, 2) + " reference kernel");
    }
  }
}

// Split-KV (forced chunk sizes, and the automatic split of a 2-thread plan) agrees with the
// whole and with the reference; chunks a row cannot see give empty states that merge away.
TEST(Attention, SplitKvMatchesWhole) {
  IsaGuard guard;
  for (DType dt : {DType::F32, DType::BF16}) {
    // Decodes, and a causal chunk over cached context (rows see different chunk subsets).
    Data x = make_data({1, 1, 1, 64}, {4097, 1000, 17, 1000}, 16, 2, 128, 16, true, dt);
    Ref r = reference(x, x.k, x.v);
    for (Isa isa : supported_isas()) {
      set_active_isa(isa);
      const Out whole = run_paged(x, 1, 0, Bf16Math::F32);
      for (int64_t chunk : {7, 100, 1000}) {
        const Out split = run_paged(x, 2, chunk, Bf16Math::F32);
        expect_close(x, split, r, kTol, false, describe(x, isa, 2) + fmt::format(" chunk {}",
                                                                                 chunk));
        double diff = 0;
        for (size_t i = 0; i < whole.o.size(); ++i)
          testing::keep_max(diff, double(std::abs(whole.o[i] - split.o[i])));
        EXPECT_LE(diff, 1e-5) << "split vs whole, chunk " << chunk;
      }
    }
  }
  // The automatic plan: a lone long decode is one item over both KV heads (contiguous rows),
  // split into 4 chunks per thread on 2 threads, whole on 1 thread; prefill rows are tasks
  // per KV head.
  Data x = make_data({1}, {32768}, 16, 2, 128, 16, true);
  AttentionPlan plan = plan_attention(paged_problem(x.batch(), 16, x.cache->layer(0), 2));
  EXPECT_EQ(plan.tasks.size(), 8u);
  EXPECT_EQ(plan.merges.size(), 1u);
  for (const auto& t : plan.tasks) EXPECT_EQ(t.num_heads, 2);
  AttentionPlan one = plan_attention(paged_problem(x.batch(), 16, x.cache->layer(0), 1));
  EXPECT_EQ(one.tasks.size(), 1u);
  EXPECT_TRUE(one.merges.empty());
  Data y = make_data({20}, {100}, 16, 2, 64, 16, true);
  AttentionPlan pre = plan_attention(paged_problem(y.batch(), 16, y.cache->layer(0), 1));
  EXPECT_EQ(pre.tasks.size(), 4u);  // 2 KV heads x 2 blocks of 16 rows (16 x 8 lanes)
  for (const auto& t : pre.tasks) EXPECT_EQ(t.num_heads, 1);
}

// run() twice with one plan: bitwise identical (the schedule does not change the result),
// and no heap allocation inside run().
TEST(Attention, RunIsDeterministicAndAllocatesNothing) {
  IsaGuard guard;
  Data x = make_data({1, 1, 40}, {3000, 500, 900}, 16, 2, 128, 16, true);
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    AttentionProblem p = paged_problem(x.batch(), x.hq, x.cache->layer(0), 2);
    p.max_kv_chunk = 256;
    AttentionPlan plan = plan_attention(p);
    AttentionWorkspace ws;
    ws.reserve(plan);
    Out a = alloc_out(x), b = alloc_out(x);
    ThreadPool& pool2 = pool_of(2);  // made (allocated) before counting, when run alone
    const int64_t before = g_news.load();
    run_attention(plan, x.q.data(), x.ldq, x.cache->layer(0), x.scale(), a.o.data(), x.ldo,
                  a.lse.data(), ws, pool2);
    run_attention(plan, x.q.data(), x.ldq, x.cache->layer(0), x.scale(), b.o.data(), x.ldo,
                  b.lse.data(), ws, pool2);
    EXPECT_EQ(g_news.load(), before) << "run_attention allocated";
    EXPECT_EQ(0, std::memcmp(a.o.data(), b.o.data(), a.o.size() * 4));
    EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4));
    // A 1-thread pool may run a plan made for 2 threads.
    Out c = alloc_out(x);
    run_attention(plan, x.q.data(), x.ldq, x.cache->layer(0), x.scale(), c.o.data(), x.ldo,
                  c.lse.data(), ws, pool_of(1));
    EXPECT_EQ(0, std::memcmp(a.o.data(), c.o.data(), a.o.size() * 4));
  }
}

// Ragged K/V ([kv_tokens, Hkv, D] rows with a stride, per-sequence kv_indptr), as PCP's
// head/tail attention uses: chunk r of 2P attends to the first (r + 1) * c tokens, causal.
TEST(Attention, RaggedMatchesPaged) {
  IsaGuard guard;
  const int64_t c = 37, hq = 8, hkv = 2, D = 64, ld = hkv * D + 8;
  // Head chunk 0 (rows [0, c), kv c) and tail chunk 3 (rows [3c, 4c), kv 4c), plus a
  // non-causal-looking full sequence of kv 100 with 1 query row.
  Data x = make_data({c, c, 1}, {c, 4 * c, 100}, hq, hkv, D, 16, true);
  std::vector<int64_t> kv_indptr{0};
  for (int64_t L : x.kv_lens) kv_indptr.push_back(kv_indptr.back() + L);
  std::vector<float> kbuf(size_t(kv_indptr.back() * ld), 5.f), vbuf(kbuf.size(), 5.f);
  for (size_t s = 0; s < x.kv_lens.size(); ++s)
    for (int64_t j = 0; j < x.kv_lens[s]; ++j)
      for (int64_t i = 0; i < hkv * D; ++i) {
        kbuf[size_t((kv_indptr[s] + j) * ld + i)] = x.k[s][size_t(j * hkv * D + i)];
        vbuf[size_t((kv_indptr[s] + j) * ld + i)] = x.v[s][size_t(j * hkv * D + i)];
      }
  RaggedKv kv{kbuf.data(), vbuf.data(), ld, ld, hkv, D};
  Ref r = reference(x, x.k, x.v);
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (int threads : {1, 2}) {
      Out out = alloc_out(x);
      ragged_attention(x.q.data(), x.ldq, hq, kv, 3, x.q_indptr.data(), kv_indptr.data(), true,
                       x.scale(), out.o.data(), x.ldo, out.lse.data(), pool_of(threads));
      expect_close(x, out, r, kTol, false, describe(x, isa, threads) + " ragged");
    }
  }
}

// Rows that see nothing (causal with q_len > kv_len, kv_len 0) are the empty state.
TEST(Attention, EmptyStates) {
  for (bool causal : {true, false}) {
    Data x = make_data({4, 3, 2}, {2, 0, 0}, 4, 1, 32, 4, causal);
    check_all(x, reference(x, x.k, x.v));
  }
}

// Split one softmax into two KV shards, merge the states, compare with the whole. A merge
// that mixes the base-2 LSE with natural exp must fail this: the test shows it would.
TEST(Attention, Base2LseGuard) {
  IsaGuard guard;
  const int64_t L = 1000, split = 400, hq = 8, hkv = 2, D = 64;
  Data whole = make_data({3}, {L}, hq, hkv, D, 16, false);
  Ref r = reference(whole, whole.k, whole.v);
  // Shard A: tokens [0, 400) = the first 25 pages; shard B: tokens [400, 1000) = the rest.
  const int64_t pa = split / 16;
  std::vector<int64_t> kv_a{split}, kv_b{L - split};
  std::vector<int32_t> ind_a{0, int32_t(pa)}, ind_b{0, int32_t(whole.page_indices.size() - pa)};
  std::vector<int32_t> pages_b(whole.page_indices.begin() + pa, whole.page_indices.end());
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    AttentionBatch a{1, whole.q_indptr.data(), kv_a.data(), ind_a.data(),
                     whole.page_indices.data(), false};
    AttentionBatch b{1, whole.q_indptr.data(), kv_b.data(), ind_b.data(), pages_b.data(), false};
    Out oa = alloc_out(whole), ob = alloc_out(whole), om = alloc_out(whole);
    paged_attention(whole.q.data(), whole.ldq, hq, whole.cache->layer(0), a, whole.scale(),
                    oa.o.data(), whole.ldo, oa.lse.data(), pool_of(2));
    paged_attention(whole.q.data(), whole.ldq, hq, whole.cache->layer(0), b, whole.scale(),
                    ob.o.data(), whole.ldo, ob.lse.data(), pool_of(2));
    merge_state(3, hq, D, oa.o.data(), whole.ldo, oa.lse.data(), hq, ob.o.data(), whole.ldo,
                ob.lse.data(), hq, om.o.data(), whole.ldo, om.lse.data(), hq);
    expect_close(whole, om, r, kTol, false, describe(whole, isa, 2) + " merged shards");
    // The same merge with natural exp on the base-2 LSEs (the bug): far off.
    double worst_o = 0, worst_l = 0;
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t h = 0; h < hq; ++h) {
        const double sa = oa.lse[size_t(t * hq + h)], sb = ob.lse[size_t(t * hq + h)];
        const double m = std::max(sa, sb), wa = std::exp(sa - m), wb = std::exp(sb - m);
        worst_l = std::max(worst_l, std::abs(m + std::log2(wa + wb) - r.lse[size_t(t * hq + h)]));
        for (int64_t e = 0; e < D; ++e) {
          const size_t i = size_t(t * whole.ldo + h * D + e);
          const double o = (wa * oa.o[i] + wb * ob.o[i]) / (wa + wb);
          worst_o = std::max(worst_o, std::abs(o - r.o[size_t((t * hq + h) * D + e)]));
        }
      }
    EXPECT_GT(worst_l, 1e-2) << "a natural-exp merge went unnoticed (LSE)";
    EXPECT_GT(worst_o, 1e-3) << "a natural-exp merge went unnoticed (O)";
  }
}

// The kernels' exp2: relative error < 2e-7 over the softmax range, exactly 0 at -inf and far
// below, exactly 1 at 0 (so an unchanged running max rescales by exactly 1).
TEST(Attention, Exp2Accuracy) {
  std::vector<float> x, y;
  for (double v = -126; v <= 0; v += 0.0137) x.push_back(float(v));
  x.push_back(0.f);
  x.push_back(-0.f);
  x.push_back(-INFINITY);
  x.push_back(-1000.f);
  y.resize(x.size());
  using Fn = void (*)(const float*, int64_t, float*);
  std::vector<std::pair<Isa, Fn>> fns{{Isa::Generic, attention_impl::generic::exp2_n}};
  if (isa_supported(Isa::Avx2)) fns.push_back({Isa::Avx2, attention_impl::avx2::exp2_n});
  if (isa_supported(Isa::Avx512)) fns.push_back({Isa::Avx512, attention_impl::avx512::exp2_n});
  for (auto [isa, fn] : fns) {
    fn(x.data(), int64_t(x.size()), y.data());
    double worst = 0;
    for (size_t i = 0; i + 4 < x.size(); ++i)
      testing::keep_max(worst, std::abs(double(y[i]) / std::exp2(double(x[i])) - 1.0));
    EXPECT_LT(worst, 2e-7) << isa_name(isa);
    EXPECT_EQ(y[x.size() - 4], 1.f) << isa_name(isa);
    EXPECT_EQ(y[x.size() - 3], 1.f) << isa_name(isa);
    EXPECT_EQ(y[x.size() - 2], 0.f) << isa_name(isa);
    EXPECT_EQ(y[x.size() - 1], 0.f) << isa_name(isa);
  }
}

TEST(Attention, ArgumentErrors) {
  Data x = make_data({2}, {5}, 4, 2, 32, 4, true);
  EXPECT_THROW(plan_attention(paged_problem(x.batch(), 3, x.cache->layer(0), 1)), Error);
  AttentionProblem p = paged_problem(x.batch(), 4, x.cache->layer(0), 1);
  AttentionPlan plan = plan_attention(p);
  AttentionWorkspace small;
  Out out = alloc_out(x);
  EXPECT_THROW(run_attention(plan, x.q.data(), x.ldq, x.cache->layer(0), x.scale(),
                             out.o.data(), x.ldo, out.lse.data(), small, pool_of(1)),
               Error);  // workspace not reserved
  AttentionWorkspace ws;
  ws.reserve(plan);
  EXPECT_THROW(run_attention(plan, x.q.data(), x.ldq, x.cache->layer(0), x.scale(),
                             out.o.data(), x.ldo, out.lse.data(), ws, pool_of(2)),
               Error);  // pool larger than planned
  std::vector<int32_t> short_indptr{0, 1};  // 5 tokens of page size 4 need 2 pages
  AttentionBatch b = x.batch();
  b.page_indptr = short_indptr.data();
  EXPECT_THROW(plan_attention(paged_problem(b, 4, x.cache->layer(0), 1)), Error);
  RaggedKv rk{nullptr, nullptr, 64, 64, 2, 32};
  EXPECT_THROW(run_attention(plan, x.q.data(), x.ldq, rk, x.scale(), out.o.data(), x.ldo,
                             out.lse.data(), ws, pool_of(1)),
               Error);  // a paged plan run on ragged KV
}

// KV cache: slot -1 means "not stored on this rank" (DCP); bf16 storage rounds to nearest.
TEST(KvCacheTest, AppendSkipsSlotMinusOne) {
  KvCache cache(KvCacheShape{2, 3, 4, 2, 8, DType::F32});
  std::vector<float> k(3 * 16), v(3 * 16);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = float(i) + 0.5f;
    v[i] = -float(i);
  }
  const int64_t slots[3] = {5, -1, 11};
  cache.append(1, k.data(), v.data(), 16, slots, 3);
  const float* kk = static_cast<const float*>(cache.layer(1).k);
  const float* vv = static_cast<const float*>(cache.layer(1).v);
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(kk[5 * 16 + i], k[size_t(i)]);
    EXPECT_EQ(vv[11 * 16 + i], v[size_t(32 + i)]);
  }
  for (int64_t s = 0; s < 12; ++s)  // nothing else written, layer 0 untouched
    if (s != 5 && s != 11)
      for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(kk[s * 16 + i], 0.f);
  const float* k0 = static_cast<const float*>(cache.layer(0).k);
  for (int64_t i = 0; i < 12 * 16; ++i) EXPECT_EQ(k0[i], 0.f);
  EXPECT_THROW(KvCache(KvCacheShape{1, 1, 300, 1, 8, DType::F32}), Error);
  EXPECT_THROW(KvCache(KvCacheShape{1, 1, 16, 1, 8, DType::F16}), Error);
}

TEST(PagePoolTest, FreeListAndRefCounts) {
  PagePool pool(4);
  std::vector<int32_t> a = pool.allocate(3);
  EXPECT_EQ(a, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(pool.num_free(), 1);
  pool.add_ref(1);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 3);  // page 1 still referenced
  EXPECT_EQ(pool.ref_count(1), 1);
  pool.release(1);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_THROW(pool.allocate(5), Error);
  EXPECT_THROW(pool.release(1), Error);
}

}  // namespace
}  // namespace cpinfer
