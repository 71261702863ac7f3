// linear_fused and linear_gate_up_silu give exactly what linear() per part (and silu_mul)
// give — same kernels, same arithmetic per element — for every ISA, every path (GEMV,
// skinny tiles, packed GEMM, the bf16-dot GEMM and skinny tiles where the CPU has them),
// pools of 1 and 2 threads, odd sizes, bf16 and f32 weights and bias. (linear() and
// silu_mul() are checked against float64 references in linear_test / elementwise_test.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/linear_fused.h"
#include "kernels/linear_impl.h"
#include "kernels/quantize.h"

namespace cpinfer {
namespace {

struct Weight {
  std::vector<uint16_t> bf;
  std::vector<float> f;
  std::vector<uint8_t> q8;
  WeightView view;
};

Weight make_weight(DType dt, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  Weight w;
  const size_t n = size_t(rows * cols);
  if (dt == DType::Q8_0) {  // cols a multiple of 32; the Q8_0 rows' bytes in w.q8
    std::vector<float> row(static_cast<size_t>(cols));
    w.q8.resize(size_t(rows * dtype_bytes(DType::Q8_0, cols)));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = nd(rng);
      quantize_row_q8_0(row.data(), cols, w.q8.data() + r * dtype_bytes(DType::Q8_0, cols));
    }
    w.view = WeightView{w.q8.data(), DType::Q8_0, rows, cols, cols};
    return w;
  }
  if (dt == DType::BF16) {
    w.bf.resize(n);
    for (auto& b : w.bf) b = bf16(nd(rng)).bits;
  } else {
    w.f.resize(n);
    for (auto& v : w.f) v = nd(rng);
  }
  w.view.data = dt == DType::BF16 ? static_cast<const void*>(w.bf.data()) : w.f.data();
  w.view.dtype = dt;
  w.view.rows = rows;
  w.view.cols = cols;
  w.view.ld = cols;
  return w;
}

std::vector<Isa> isas() { return supported_isas(); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(LinearFused, EqualsLinearPerPart) {
  std::mt19937 rng(5);
  static ThreadPool one(1), two(2);
  const Isa saved = active_isa();
  for (Isa isa : isas())
    for (auto path : {linear_impl::Path::Gemv, linear_impl::Path::Gemm, linear_impl::Path::Skinny,
                      linear_impl::Path::GemmBf16Dot, linear_impl::Path::SkinnyBf16Dot})
      for (DType dt : {DType::BF16, DType::F32})
        for (int64_t M : {1, 3, 9, 40, 77})
          for (int64_t K : {64, 67}) {
            set_active_isa(isa);
            linear_impl::force_path(path);
            // q / k / v shaped parts (odd sizes too), one with a bias.
            const std::vector<int64_t> rows = {96, 17, 33};
            std::vector<Weight> ws;
            for (int64_t r : rows) ws.push_back(make_weight(dt, r, K, rng));
            std::vector<float> bias(17);
            for (auto& b : bias) b = float(rng() % 100) / 50.f;
            std::vector<float> x(size_t(M * K));
            for (auto& v : x) v = float(int(rng() % 200) - 100) / 64.f;
            const int64_t ldy = 96 + 17 + 33 + 5;
            for (ThreadPool* pool : {&one, &two}) {
              std::vector<float> fused(size_t(M * ldy), -1.f), ref(size_t(M * ldy), -1.f);
              std::vector<LinearPart> parts;
              int64_t off = 0;
              for (size_t p = 0; p < rows.size(); ++p) {
                parts.push_back({ws[p].view, p == 1 ? bias.data() : nullptr, fused.data() + off, ldy});
                linear(x.data(), M, K, ws[p].view, p == 1 ? bias.data() : nullptr, ref.data() + off,
                       ldy, *pool);
                off += rows[p];
              }
              linear_fused(x.data(), M, K, parts, *pool);
              ASSERT_TRUE(same_bits(fused, ref))
                  << isa_name(isa) << " path " << int(path) << " dtype " << dtype_name(dt) << " M "
                  << M << " K " << K << " threads " << pool->size();
            }
          }
  linear_impl::force_path(linear_impl::Path::Auto);
  set_active_isa(saved);
}

// RoPE in the epilogue: each task rotates the q / k heads it computed (after a per-head
// RMSNorm when the part has a head_norm, as Qwen3's q_norm / k_norm). Bitwise equal to
// linear_fused then rms_norm per head and rope_apply over the same heads, for every ISA,
// path and pool, with head sizes that do and do not divide the kernels' 16- and 32-row units.
TEST(LinearFused, RopeEpilogueEqualsRopeAfterwards) {
  std::mt19937 rng(11);
  static ThreadPool one(1), two(2);
  const Isa saved = active_isa();
  for (Isa isa : isas())
    for (auto path : {linear_impl::Path::Gemv, linear_impl::Path::Gemm, linear_impl::Path::Skinny,
                      linear_impl::Path::GemmBf16Dot, linear_impl::Path::SkinnyBf16Dot})
      for (int64_t D : {6, 64})
        for (int64_t M : {1, 5, 40})
          for (bool norm : {false, true}) {
          set_active_isa(isa);
          linear_impl::force_path(path);
          const int64_t K = 67, Hq = 7, Hkv = 2;
          const std::vector<int64_t> rows = {Hq * D, Hkv * D, Hkv * D};
          std::vector<Weight> ws;
          for (int64_t r : rows) ws.push_back(make_weight(DType::BF16, r, K, rng));
          std::vector<float> x(size_t(M * K)), cos(size_t(M * D / 2)), sin(size_t(M * D / 2));
          for (auto& v : x) v = float(int(rng() % 200) - 100) / 64.f;
          std::vector<int32_t> pos(static_cast<size_t>(M));
          for (int64_t i = 0; i < M; ++i) pos[size_t(i)] = int32_t(3 * i + 1);
          std::vector<double> inv_freq(size_t(D / 2));
          for (int64_t j = 0; j < D / 2; ++j) inv_freq[size_t(j)] = std::pow(10000.0, -2.0 * j / D);
          rope_tables(pos.data(), M, inv_freq.data(), D / 2, cos.data(), sin.data());
          const int64_t ldy = (Hq + 2 * Hkv) * D + 3;
          std::vector<float> qn(static_cast<size_t>(D)), kn(static_cast<size_t>(D));
          for (auto& v : qn) v = 1.f + float(int(rng() % 100) - 50) / 512.f;
          for (auto& v : kn) v = 1.f + float(int(rng() % 100) - 50) / 512.f;
          const float* norms[2] = {norm ? qn.data() : nullptr, norm ? kn.data() : nullptr};
          const double eps = 1e-6;
          for (ThreadPool* pool : {&one, &two}) {
            std::vector<float> fused(size_t(M * ldy), -1.f), ref(size_t(M * ldy), -1.f);
            std::vector<LinearPart> pf, pr;
            int64_t off = 0;
            for (size_t p = 0; p < rows.size(); ++p) {
              pf.push_back({ws[p].view, nullptr, fused.data() + off, ldy, p < 2,
                            p < 2 ? norms[p] : nullptr});
              pr.push_back({ws[p].view, nullptr, ref.data() + off, ldy, false});
              off += rows[p];
            }
            const RotaryEpilogue rope{cos.data(), sin.data(), D, eps};
            linear_fused(x.data(), M, K, pf, *pool, &rope);
            linear_fused(x.data(), M, K, pr, *pool);
            if (norm)
              for (int64_t m = 0; m < M; ++m) {
                float* q = ref.data() + m * ldy;
                rms_norm(q, qn.data(), DType::F32, Hq, D, eps, q, *pool);
                rms_norm(q + Hq * D, kn.data(), DType::F32, Hkv, D, eps, q + Hq * D, *pool);
              }
            rope_apply(ref.data(), M, Hq + Hkv, D, ldy, cos.data(), sin.data(), *pool);
            ASSERT_TRUE(same_bits(fused, ref)) << isa_name(isa) << " path " << int(path) << " D "
                                               << D << " M " << M << " norm " << norm
                                               << " threads " << pool->size();
          }
        }
  linear_impl::force_path(linear_impl::Path::Auto);
  set_active_isa(saved);
  // A RoPE part that is not whole heads is refused.
  Weight w = make_weight(DType::F32, 10, 8, rng);
  std::vector<float> x(8, 1.f), y(10), c(3, 1.f), s(3, 0.f);
  const LinearPart bad[1] = {{w.view, nullptr, y.data(), 10, true}};
  const RotaryEpilogue rope{c.data(), s.data(), 6};
  EXPECT_THROW(linear_fused(x.data(), 1, 8, bad, one, &rope), Error);
  // A head norm needs the RoPE epilogue (it runs there, over whole heads).
  const LinearPart norm_only[1] = {{w.view, nullptr, y.data(), 10, false, c.data()}};
  EXPECT_THROW(linear_fused(x.data(), 1, 8, norm_only, one), Error);
}

TEST(LinearFused, GateUpSiluEqualsLinearThenSiluMul) {
  std::mt19937 rng(9);
  static ThreadPool one(1), two(2);
  const Isa saved = active_isa();
  for (Isa isa : isas())
    for (auto path : {linear_impl::Path::Gemv, linear_impl::Path::Gemm, linear_impl::Path::Skinny,
                      linear_impl::Path::GemmBf16Dot, linear_impl::Path::SkinnyBf16Dot})
      for (int64_t M : {1, 8, 33})
        for (int64_t F : {40, 129})
        for (int64_t K : {72, 1601}) {  // 1601: the GEMMs' K blocks (odd lengths included)
          set_active_isa(isa);
          linear_impl::force_path(path);
          Weight g = make_weight(DType::BF16, F, K, rng), u = make_weight(DType::BF16, F, K, rng);
          std::vector<float> x(size_t(M * K));
          for (auto& v : x) v = float(int(rng() % 200) - 100) / 128.f;
          for (ThreadPool* pool : {&one, &two}) {
            std::vector<float> gu(size_t(M * 2 * F)), act(size_t(M * F));
            std::vector<float> gu_ref(size_t(M * 2 * F)), act_ref(size_t(M * F));
            linear(x.data(), M, K, g.view, nullptr, gu_ref.data(), 2 * F, *pool);
            linear(x.data(), M, K, u.view, nullptr, gu_ref.data() + F, 2 * F, *pool);
            silu_mul(gu_ref.data(), M, F, act_ref.data(), *pool);
            linear_gate_up_silu(x.data(), M, K, g.view, u.view, gu.data(), act.data(), *pool);
            ASSERT_TRUE(same_bits(act, act_ref))
                << isa_name(isa) << " path " << int(path) << " M " << M << " F " << F << " K " << K;
          }
        }
  linear_impl::force_path(linear_impl::Path::Auto);
  set_active_isa(saved);
}

// The bf16-dot skinny tiles get x packed as bf16 rows; a part whose weights are not bf16
// (parts of mixed dtypes) runs on those rows widened back, through the f32 skinny tiles:
// bit for bit linear() with the f32 tiles on x rounded to bf16 beforehand.
TEST(LinearFused, DotSkinnyRunsOtherDtypesOnTheRoundedRows) {
  if (!isa_supported(Isa::Avx512) || !bf16_dot_supported()) {
    std::printf("skipped: this CPU lacks AVX-512 with AVX512_BF16 (no bf16-dot skinny tiles)\n");
    GTEST_SKIP();
  }
  std::mt19937 rng(21);
  static ThreadPool two(2);
  const Isa saved = active_isa();
  set_active_isa(Isa::Avx512);
  for (int64_t M : {1, 7, 30})
    for (int64_t K : {64, 333}) {
      const Weight a = make_weight(DType::BF16, 40, K, rng), b = make_weight(DType::F32, 24, K, rng);
      std::vector<float> x(size_t(M * K)), xr(size_t(M * K));
      for (auto& v : x) v = float(int(rng() % 2000) - 1000) / 377.f;  // most not bf16 values
      for (size_t i = 0; i < x.size(); ++i) xr[i] = float(bf16(x[i]));
      const int64_t ldy = 64;
      std::vector<float> fused(size_t(M * ldy), -1.f), ref(size_t(M * ldy), -1.f);
      const LinearPart parts[2] = {{a.view, nullptr, fused.data(), ldy},
                                   {b.view, nullptr, fused.data() + 40, ldy}};
      linear_impl::force_path(linear_impl::Path::SkinnyBf16Dot);
      linear_fused(x.data(), M, K, parts, two);
      linear(x.data(), M, K, a.view, nullptr, ref.data(), ldy, two);  // the dot tiles
      linear_impl::force_path(linear_impl::Path::Skinny);
      linear(xr.data(), M, K, b.view, nullptr, ref.data() + 40, ldy, two);
      linear_impl::force_path(linear_impl::Path::Auto);
      EXPECT_TRUE(same_bits(fused, ref)) << "M " << M << " K " << K;
    }
  set_active_isa(saved);
}

// Q8_0 weights under int8 dot math (--int8-math dot): linear_fused and linear_gate_up_silu
// quantize x once and run every part on it, bit for bit linear() per part (each of which
// quantizes the same x the same way), on every ISA (the int8-dot GEMV and GEMM where the CPU
// has AVX512_VNNI, the f32 kernels on the quantized values elsewhere), decode- and
// prefill-sized M; and parts of mixed dtypes (an f32 part beside Q8_0 ones) take the f32
// kernels on the quantized x, bit for bit linear() of the f32 part on that x.
TEST(LinearFused, Int8DotEqualsLinearPerPart) {
  std::mt19937 rng(27);
  static ThreadPool one(1), two(2);
  const Isa saved = active_isa();
  set_int8_math(Int8Math::Dot);
  for (Isa isa : isas())
    for (int64_t M : {1, 5, 64, 65, 100})
      for (int64_t K : {64, 96}) {
        set_active_isa(isa);
        const std::vector<int64_t> rows = {96, 17, 33};
        std::vector<Weight> ws;
        for (int64_t r : rows) ws.push_back(make_weight(DType::Q8_0, r, K, rng));
        std::vector<float> x(size_t(M * K));
        for (auto& v : x) v = float(int(rng() % 200) - 100) / 64.f;
        const int64_t ldy = 96 + 17 + 33 + 5;
        const std::string what = std::string(isa_name(isa)) + " M " + std::to_string(M) +
                                 " K " + std::to_string(K);
        for (ThreadPool* pool : {&one, &two}) {
          std::vector<float> fused(size_t(M * ldy), -1.f), ref(size_t(M * ldy), -1.f);
          std::vector<LinearPart> parts;
          int64_t off = 0;
          for (size_t p = 0; p < rows.size(); ++p) {
            parts.push_back({ws[p].view, nullptr, fused.data() + off, ldy});
            linear(x.data(), M, K, ws[p].view, nullptr, ref.data() + off, ldy, *pool);
            off += rows[p];
          }
          linear_fused(x.data(), M, K, parts, *pool);
          ASSERT_TRUE(same_bits(fused, ref)) << what << " threads " << pool->size();
          // gate / up
          const int64_t F = 96;
          std::vector<float> gu(size_t(M * 2 * F)), act(size_t(M * F)), act_ref(size_t(M * F));
          std::vector<float> gu_ref(size_t(M * 2 * F));
          const Weight g = make_weight(DType::Q8_0, F, K, rng), u = make_weight(DType::Q8_0, F, K, rng);
          linear(x.data(), M, K, g.view, nullptr, gu_ref.data(), 2 * F, *pool);
          linear(x.data(), M, K, u.view, nullptr, gu_ref.data() + F, 2 * F, *pool);
          silu_mul(gu_ref.data(), M, F, act_ref.data(), *pool);
          linear_gate_up_silu(x.data(), M, K, g.view, u.view, gu.data(), act.data(), *pool);
          ASSERT_TRUE(same_bits(act, act_ref)) << what << " gate/up threads " << pool->size();
        }
        // Mixed dtypes: the f32 part gets the quantized x (d * q as f32, q8_act_fake_rows).
        const Weight f = make_weight(DType::F32, 24, K, rng);
        std::vector<float> xq(size_t(M * K));
        q8_act_fake_rows(x.data(), M, K, K, xq.data());
        std::vector<float> fused(size_t(M * 120), -1.f), ref(size_t(M * 120), -1.f);
        const LinearPart mixed[2] = {{ws[0].view, nullptr, fused.data(), 120},
                                     {f.view, nullptr, fused.data() + 96, 120}};
        linear_fused(x.data(), M, K, mixed, two);
        // The fused call's path: choose_path's for Q8_0 weights, an int8-dot kernel replaced
        // by its f32 twin.
        using linear_impl::Path;
        Path p = linear_impl::choose_path(linear_impl::active_kernels(), M, K, DType::Q8_0);
        p = p == Path::GemvInt8Dot ? Path::Gemv : p == Path::GemmInt8Dot ? Path::Gemm : p;
        set_int8_math(Int8Math::F32);
        linear_impl::force_path(p);
        linear(xq.data(), M, K, f.view, nullptr, ref.data() + 96, 120, two);
        linear_impl::force_path(linear_impl::Path::Auto);
        set_int8_math(Int8Math::Dot);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 96; n < 120; ++n)
            ASSERT_EQ(fused[size_t(m * 120 + n)], ref[size_t(m * 120 + n)]) << what << " mixed";
      }
  set_int8_math(Int8Math::Auto);
  set_active_isa(saved);
}

TEST(LinearFused, BadShapesAreErrors) {
  std::mt19937 rng(1);
  Weight a = make_weight(DType::F32, 8, 16, rng), b = make_weight(DType::F32, 8, 12, rng);
  std::vector<float> x(32), y(64);
  const LinearPart mixed[2] = {{a.view, nullptr, y.data(), 8}, {b.view, nullptr, y.data(), 8}};
  EXPECT_THROW(linear_fused(x.data(), 2, 16, mixed, global_pool()), Error);
  EXPECT_THROW(linear_fused(x.data(), 2, 16, std::span<const LinearPart>(), global_pool()), Error);
  Weight c = make_weight(DType::F32, 9, 16, rng);
  std::vector<float> gu(64), act(32);
  EXPECT_THROW(linear_gate_up_silu(x.data(), 2, 16, a.view, c.view, gu.data(), act.data(), global_pool()),
               Error);
}

}  // namespace
}  // namespace cpinfer
