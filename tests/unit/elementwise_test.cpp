// rms_norm, add_rms_norm, silu_mul, rope_tables and rope_apply against float64 references
// written here, for every ISA this CPU supports and pools of 1 and 2 threads.
//
// Tolerances (u = 2^-24, the f32 unit roundoff; FLT_EPSILON = 2u):
//   rms_norm:   the sum of squares is accumulated in double (error ~d * 2^-53, negligible),
//               1/sqrt(mean + eps) is rounded once to f32 (u), then x * s and * w are two
//               more f32 roundings: |y - ref| <= 3u |ref| (+ O(u^2)); we allow 2 * FLT_EPSILON.
//   silu_mul:   exp (glibc expf or a Cephes polynomial, <= 2 ulp), 1 + t, a product, a
//               division and * u: about 5u relative; we allow 4 * FLT_EPSILON. Below
//               g = ln(FLT_MIN) the SIMD exp flushes exp(g) to 0, so there the bound is
//               |g u| FLT_MIN (the true |out| is smaller than that).
//   rope:       cos/sin computed in double and rounded once (<= u), then products and a sum
//               in f32: |err| <= 3u (|x1| + |x2|); we allow 2 * FLT_EPSILON (|x1| + |x2|),
//               against a reference that takes cos/sin of the exact angle in double.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/elementwise.h"

namespace cpinfer {
namespace {

class IsaScope {
 public:
  explicit IsaScope(Isa isa) : saved_(active_isa()) { set_active_isa(isa); }
  ~IsaScope() { set_active_isa(saved_); }

 private:
  Isa saved_;
};

ThreadPool& pool_of(int threads) {
  static ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

std::vector<float> uniform(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng);
  return v;
}

// A norm weight of `dtype` (bytes) and its values as double.
struct NormWeight {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  std::vector<double> exact;
  DType dtype;
  const void* data() const {
    return dtype == DType::F32 ? static_cast<const void*>(f32.data())
                               : static_cast<const void*>(half.data());
  }
};

NormWeight make_norm_weight(std::mt19937& rng, DType dtype, int64_t d) {
  NormWeight w{{}, {}, {}, dtype};
  for (float v : uniform(rng, size_t(d), 0.5f, 1.5f)) {
    if (dtype == DType::F32) {
      w.f32.push_back(v);
      w.exact.push_back(v);
    } else if (dtype == DType::BF16) {
      w.half.push_back(bf16(v).bits);
      w.exact.push_back(double(float(bf16(v))));
    } else {
      w.half.push_back(f16(v).bits);
      w.exact.push_back(double(float(f16(v))));
    }
  }
  return w;
}

// y = x / sqrt(mean(x^2) + eps) * w, in double.
std::vector<double> rms_reference(const std::vector<float>& x, const std::vector<double>& w,
                                  int64_t n, int64_t d, double eps) {
  std::vector<double> y(size_t(n * d));
  for (int64_t i = 0; i < n; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += double(x[size_t(i * d + j)]) * x[size_t(i * d + j)];
    const double s = 1.0 / std::sqrt(ss / double(d) + eps);
    for (int64_t j = 0; j < d; ++j)
      y[size_t(i * d + j)] = double(x[size_t(i * d + j)]) * s * w[size_t(j)];
  }
  return y;
}

int check_close(const std::vector<float>& got, const std::vector<double>& want, double rel,
                const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    if (!(err <= rel * std::fabs(want[i])) && ++bad <= 3)
      ADD_FAILURE() << what << ": [" << i << "] = " << got[i] << ", want " << want[i];
  }
  return bad;
}

const int64_t kDims[] = {1, 7, 16, 33, 100, 896, 1000};
const int64_t kRows[] = {1, 3, 17};
const DType kWeightTypes[] = {DType::F32, DType::BF16, DType::F16};

TEST(RmsNorm, MatchesFloat64Reference) {
  std::mt19937 rng(11);
  for (DType wt : kWeightTypes)
    for (int64_t d : kDims)
      for (int64_t n : kRows) {
        const NormWeight w = make_norm_weight(rng, wt, d);
        std::vector<float> x = uniform(rng, size_t(n * d), -2.0f, 2.0f);
        x[0] = 0.0f;
        if (n > 1)  // an all-zero row: y = 0 (eps keeps the scale finite)
          for (int64_t j = 0; j < d; ++j) x[size_t(d + j)] = 0.0f;
        for (double eps : {1e-6, 1e-5}) {
          const std::vector<double> ref = rms_reference(x, w.exact, n, d, eps);
          for (Isa isa : supported_isas()) {
            IsaScope scope(isa);
            for (int threads : {1, 2}) {
              const std::string what = std::string(dtype_name(wt)) + " d=" + std::to_string(d) +
                                       " n=" + std::to_string(n) + " " +
                                       std::string(isa_name(isa)) + " t=" + std::to_string(threads);
              std::vector<float> y(x.size(), -1.0f);
              rms_norm(x.data(), w.data(), wt, n, d, eps, y.data(), pool_of(threads));
              ASSERT_EQ(check_close(y, ref, 2 * FLT_EPSILON, what), 0);
              std::vector<float> inplace = x;  // y aliases x
              rms_norm(inplace.data(), w.data(), wt, n, d, eps, inplace.data(), pool_of(threads));
              ASSERT_EQ(check_close(inplace, ref, 2 * FLT_EPSILON, what + " in place"), 0);
            }
          }
        }
      }
}

TEST(AddRmsNorm, UpdatesResidualAndNormalises) {
  std::mt19937 rng(12);
  const double eps = 1e-6;
  for (DType wt : kWeightTypes)
    for (int64_t d : kDims)
      for (int64_t n : kRows) {
        const NormWeight w = make_norm_weight(rng, wt, d);
        const std::vector<float> r0 = uniform(rng, size_t(n * d), -3.0f, 3.0f);
        const std::vector<float> x = uniform(rng, size_t(n * d), -1.0f, 1.0f);
        std::vector<float> r_want(r0.size());
        for (size_t i = 0; i < r0.size(); ++i) r_want[i] = r0[i] + x[i];  // one f32 add
        const std::vector<double> ref = rms_reference(r_want, w.exact, n, d, eps);
        for (Isa isa : supported_isas()) {
          IsaScope scope(isa);
          for (int threads : {1, 2}) {
            for (bool alias : {false, true}) {
              const std::string what = std::string(dtype_name(wt)) + " d=" + std::to_string(d) +
                                       " n=" + std::to_string(n) + " " +
                                       std::string(isa_name(isa)) + (alias ? " y=x" : "");
              std::vector<float> r = r0, xx = x, y(x.size(), -1.0f);
              float* out = alias ? xx.data() : y.data();
              add_rms_norm(r.data(), xx.data(), w.data(), wt, n, d, eps, out, pool_of(threads));
              for (size_t i = 0; i < r.size(); ++i)
                ASSERT_EQ(float_to_bits(r[i]), float_to_bits(r_want[i]))
                    << what << " r[" << i << "]";
              ASSERT_EQ(check_close(alias ? xx : y, ref, 2 * FLT_EPSILON, what), 0);
            }
          }
        }
      }
}

TEST(SiluMul, MatchesFloat64Reference) {
  std::mt19937 rng(13);
  const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1.0f, -1.0f, 15.0f, -15.0f,
                            80.0f, -80.0f, 87.0f, 88.5f, 100.0f, -87.5f, -100.0f, -1e30f};
  for (int64_t F : {int64_t(1), int64_t(7), int64_t(16), int64_t(33), int64_t(100),
                    int64_t(4864)}) {
    for (int64_t n : kRows) {
      std::vector<float> gu = uniform(rng, size_t(n * 2 * F), -20.0f, 20.0f);
      for (size_t i = 0; i < std::size(specials) && i < size_t(F); ++i) gu[i] = specials[i];
      std::vector<double> ref(size_t(n * F));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t f = 0; f < F; ++f) {
          const double g = gu[size_t(i * 2 * F + f)], u = gu[size_t(i * 2 * F + F + f)];
          ref[size_t(i * F + f)] = g / (1.0 + std::exp(-g)) * u;
        }
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        for (int threads : {1, 2}) {
          std::vector<float> out(size_t(n * F), -1.0f);
          silu_mul(gu.data(), n, F, out.data(), pool_of(threads));
          int bad = 0;
          for (int64_t i = 0; i < n; ++i)
            for (int64_t f = 0; f < F; ++f) {
              const size_t o = size_t(i * F + f);
              const double g = gu[size_t(i * 2 * F + f)], u = gu[size_t(i * 2 * F + F + f)];
              const double err = std::fabs(double(out[o]) - ref[o]);
              const bool ok = g < std::log(double(FLT_MIN))
                                  ? err <= std::fabs(g * u) * double(FLT_MIN)
                                  : err <= 4 * FLT_EPSILON * std::fabs(ref[o]);
              if (!ok && ++bad <= 3)
                ADD_FAILURE() << isa_name(isa) << " F=" << F << " g=" << g << ": " << out[o]
                              << ", want " << ref[o];
            }
          ASSERT_EQ(bad, 0);
        }
      }
    }
  }
}

TEST(SiluMul, PropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> gu = {nan, 1.0f, 2.0f, 3.0f, nan, 1.0f, 1.0f, 1.0f,   // gate
                           1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, nan, 1.0f};  // up
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    std::vector<float> out(8);
    silu_mul(gu.data(), 1, 8, out.data(), pool_of(1));
    for (int f = 0; f < 8; ++f)
      EXPECT_EQ(std::isnan(out[size_t(f)]), f == 0 || f == 4 || f == 6)
          << isa_name(isa) << " f=" << f;
  }
}

// inv_freq for head_dim 128 and rope_theta 1e6 (Qwen2.5).
std::vector<double> qwen_inv_freq() {
  std::vector<double> inv(64);
  for (int j = 0; j < 64; ++j) inv[size_t(j)] = std::pow(1e6, -2.0 * j / 128.0);
  return inv;
}

TEST(RopeTables, AreDoubleAccurateAtLargePositions) {
  const std::vector<double> inv = qwen_inv_freq();
  const std::vector<int32_t> pos = {0, 1, 7, 4095, 30000, 131071};
  const int64_t n = int64_t(pos.size()), half = 64;
  std::vector<float> c(size_t(n * half)), s(size_t(n * half));
  rope_tables(pos.data(), n, inv.data(), half, c.data(), s.data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < half; ++j) {
      const long double a = (long double)pos[size_t(i)] * (long double)inv[size_t(j)];
      // Rounded once from an accurate value: within one f32 ulp of 1 (2^-23) at most.
      EXPECT_NEAR(c[size_t(i * half + j)], double(std::cos(a)), 6e-8) << pos[size_t(i)] << " " << j;
      EXPECT_NEAR(s[size_t(i * half + j)], double(std::sin(a)), 6e-8) << pos[size_t(i)] << " " << j;
    }
}

TEST(RopeApply, MatchesFloat64RotateHalf) {
  std::mt19937 rng(14);
  const std::vector<double> inv_all = qwen_inv_freq();
  const std::vector<int32_t> pos = {0, 5, 30000, 131071, 17};
  const int64_t n = int64_t(pos.size());
  for (int64_t head_dim : {int64_t(2), int64_t(64), int64_t(128)}) {
    const int64_t half = head_dim / 2, heads = 3, ld = heads * head_dim + 5;
    std::vector<double> inv(static_cast<size_t>(half));
    for (int64_t j = 0; j < half; ++j) inv[size_t(j)] = inv_all[size_t(j * 64 / half)];
    std::vector<float> c(size_t(n * half)), s(size_t(n * half));
    rope_tables(pos.data(), n, inv.data(), half, c.data(), s.data());
    const std::vector<float> x0 = uniform(rng, size_t(n * ld), -2.0f, 2.0f);
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      for (int threads : {1, 2}) {
        std::vector<float> x = x0;
        rope_apply(x.data(), n, heads, head_dim, ld, c.data(), s.data(), pool_of(threads));
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t j = 0; j < half; ++j) {
              const size_t a = size_t(i * ld + h * head_dim + j), b = a + size_t(half);
              const double angle = double(pos[size_t(i)]) * inv[size_t(j)];
              const double x1 = x0[a], x2 = x0[b];
              const double tol = 2 * FLT_EPSILON * (std::fabs(x1) + std::fabs(x2));
              ASSERT_NEAR(x[a], x1 * std::cos(angle) - x2 * std::sin(angle), tol)
                  << isa_name(isa) << " D=" << head_dim << " pos=" << pos[size_t(i)];
              ASSERT_NEAR(x[b], x2 * std::cos(angle) + x1 * std::sin(angle), tol)
                  << isa_name(isa) << " D=" << head_dim << " pos=" << pos[size_t(i)];
            }
          for (int64_t p = heads * head_dim; p < ld; ++p)  // padding untouched
            ASSERT_EQ(x[size_t(i * ld + p)], x0[size_t(i * ld + p)]);
        }
      }
    }
  }
}

TEST(Elementwise, RejectsBadArguments) {
  std::vector<float> x(64, 1.0f), y(64), w(64, 1.0f);
  ThreadPool& pool = pool_of(1);
  EXPECT_THROW(rms_norm(x.data(), w.data(), DType::I32, 2, 8, 1e-6, y.data(), pool), Error);
  EXPECT_THROW(rms_norm(x.data(), w.data(), DType::F32, 2, 0, 1e-6, y.data(), pool), Error);
  EXPECT_THROW(rms_norm(x.data(), w.data(), DType::F32, 2, 8, -1.0, y.data(), pool), Error);
  EXPECT_THROW(silu_mul(x.data(), 2, 0, y.data(), pool), Error);
  EXPECT_THROW(rope_apply(x.data(), 2, 2, 7, 14, w.data(), w.data(), pool), Error);  // odd
  EXPECT_THROW(rope_apply(x.data(), 2, 2, 8, 15, w.data(), w.data(), pool), Error);  // ld
  EXPECT_NO_THROW(rope_apply(x.data(), 2, 2, 8, 16, w.data(), w.data(), pool));
  EXPECT_NO_THROW(rms_norm(x.data(), w.data(), DType::F32, 0, 8, 1e-6, y.data(), pool));
}

}  // namespace
}  // namespace cpinfer
