// linear() and embedding_lookup() against a float64 reference written here (no code shared
// with the kernels), for every ISA this CPU supports, f32/bf16/f16 weights, odd sizes,
// padded strides and pools of 1 and 2 threads. Q8_0 weights are quantized here with
// quantize_row_q8_0 and the reference uses their dequantized values (d * q, exact in f32),
// so the same tolerance holds: the kernels must reproduce those weights exactly.
//
// Tolerance. The weights are rounded to their dtype first and the reference uses exactly
// those rounded values (widened to double), and x is f32, so the only error left is the
// f32 accumulation of K products plus the bias. With unit roundoff u = 2^-24 the
// probabilistic bound of Higham & Mary (2019) gives, for any summation order,
//   |y - ref| <= lambda * sqrt(K + 1) * u * (sum_k |x_k w_k| + |bias|)
// with failure probability below 2 exp(-lambda^2 / 2) per output when roundings behave as
// independent errors; lambda = 4 (about 7e-4 for one output, and the true errors of these
// data sit far below the bound: the test prints the worst ratio seen). That is
//   tol = 2 * FLT_EPSILON * sqrt(K + 1) * (sum_k |x_k w_k| + |bias|).
// A wrong index, a lost K tail or a dropped strip is off by O(|x w|), orders above tol.
// Padding of x and W is NaN, so reading past K shows up as NaN; padding of y is a sentinel
// that must survive.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/linear.h"
#include "kernels/linear_impl.h"
#include "kernels/quantize.h"

namespace cpinfer {
namespace {

constexpr float kYSentinel = -777.25f;

// Sets the active ISA for a scope and restores the previous one.
class IsaScope {
 public:
  explicit IsaScope(Isa isa) : saved_(active_isa()) { set_active_isa(isa); }
  ~IsaScope() { set_active_isa(saved_); }

 private:
  Isa saved_;
};

// Forces linear()'s kernel choice for a scope (GEMV, skinny tiles or packed GEMM), then back
// to Auto.
class PathScope {
 public:
  explicit PathScope(linear_impl::Path p) { linear_impl::force_path(p); }
  ~PathScope() { linear_impl::force_path(linear_impl::Path::Auto); }
};

// Sets linear()'s bf16 math for a scope, then back to Auto.
class Bf16MathScope {
 public:
  explicit Bf16MathScope(Bf16Math m) { set_bf16_math(m); }
  ~Bf16MathScope() { set_bf16_math(Bf16Math::Auto); }
};

// Sets linear()'s int8 math for a scope, then back to Auto.
class Int8MathScope {
 public:
  explicit Int8MathScope(Int8Math m) { set_int8_math(m); }
  ~Int8MathScope() { set_int8_math(Int8Math::Auto); }
};

const char* path_name(linear_impl::Path p) {
  switch (p) {
    case linear_impl::Path::Gemv: return "gemv";
    case linear_impl::Path::Gemm: return "gemm";
    case linear_impl::Path::Skinny: return "skinny";
    case linear_impl::Path::GemmBf16Dot: return "gemm_bf16dot";
    case linear_impl::Path::SkinnyBf16Dot: return "skinny_bf16dot";
    case linear_impl::Path::GemvInt8Dot: return "gemv_int8dot";
    case linear_impl::Path::GemmInt8Dot: return "gemm_int8dot";
    default: return "auto";
  }
}

ThreadPool& pool_of(int threads) {
  static ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

// A [rows, cols] weight stored in `dtype` with row stride ld (padding NaN), plus the
// stored values exactly as double.
struct TestWeights {
  DType dtype;
  int64_t rows, cols, ld;
  std::vector<uint16_t> half;   // bf16 / f16 bits
  std::vector<float> single;    // f32
  std::vector<uint8_t> blocks;  // Q8_0 blocks
  std::vector<double> exact;    // [rows, cols], the stored values

  WeightView view() const {
    WeightView w;
    w.data = dtype == DType::F32    ? static_cast<const void*>(single.data())
             : dtype == DType::Q8_0 ? static_cast<const void*>(blocks.data())
                                    : static_cast<const void*>(half.data());
    w.dtype = dtype;
    w.rows = rows;
    w.cols = cols;
    w.ld = ld;
    return w;
  }
};

// Stores value v (already representable in dtype) at element i.
void store(TestWeights& t, size_t i, float v) {
  if (t.dtype == DType::F32) t.single[i] = v;
  else if (t.dtype == DType::BF16) t.half[i] = bf16(v).bits;
  else t.half[i] = f16(v).bits;
}

float round_to(DType dtype, float v) {
  if (dtype == DType::BF16) return float(bf16(v));
  if (dtype == DType::F16) return float(f16(v));
  return v;
}

// Q8_0: each row of `values` quantized; the padding blocks (ld > cols) have a NaN scale, so
// a kernel reading them makes NaN outputs. exact = the dequantized values.
TestWeights make_q8_0_weights(int64_t rows, int64_t cols, int64_t ld,
                              const std::vector<float>& values) {
  TestWeights t{DType::Q8_0, rows, cols, ld, {}, {}, {}, {}};
  const int64_t row_bytes = dtype_bytes(DType::Q8_0, ld);
  t.blocks.assign(size_t(rows * row_bytes), 0);
  t.exact.resize(size_t(rows * cols));
  std::vector<float> dq(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = t.blocks.data() + r * row_bytes;
    quantize_row_q8_0(values.data() + r * cols, cols, row);
    for (int64_t b = cols / kQ8BlockElems; b < ld / kQ8BlockElems; ++b) {
      const uint16_t nan = 0x7e00;
      std::memcpy(row + b * kQ8BlockBytes, &nan, 2);
    }
    dequantize_row_q8_0(row, cols, dq.data());
    for (int64_t c = 0; c < cols; ++c) t.exact[size_t(r * cols + c)] = double(dq[size_t(c)]);
  }
  return t;
}

// `values` is [rows, cols] of numbers representable in dtype (Q8_0: any numbers).
TestWeights make_weights(DType dtype, int64_t rows, int64_t cols, int64_t ld,
                         const std::vector<float>& values) {
  if (dtype == DType::Q8_0) return make_q8_0_weights(rows, cols, ld, values);
  TestWeights t{dtype, rows, cols, ld, {}, {}, {}, {}};
  const size_t n = size_t(rows * ld);
  if (dtype == DType::F32) t.single.assign(n, std::numeric_limits<float>::quiet_NaN());
  else t.half.assign(n, dtype == DType::BF16 ? uint16_t(0x7fc0) : uint16_t(0x7e00));  // NaN
  t.exact.resize(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = values[size_t(r * cols + c)];
      store(t, size_t(r * ld + c), v);
      t.exact[size_t(r * cols + c)] = double(v);
    }
  return t;
}

std::vector<float> random_values(std::mt19937& rng, size_t n, DType dtype) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = round_to(dtype, dist(rng));
  return v;
}

// x [M, K] with row stride ldx, padding NaN.
std::vector<float> strided(const std::vector<float>& dense, int64_t rows, int64_t cols,
                           int64_t ld) {
  std::vector<float> out(size_t(rows * ld), std::numeric_limits<float>::quiet_NaN());
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(dense.begin() + r * cols, cols, out.begin() + r * ld);
  return out;
}

struct Reference {
  std::vector<double> y;    // [M, N]
  std::vector<double> mag;  // [M, N]: sum_k |x_k w_k| + |bias|
};

Reference reference(const std::vector<float>& x, const TestWeights& w, const float* bias,
                    int64_t M) {
  const int64_t N = w.rows, K = w.cols;
  Reference r{std::vector<double>(size_t(M * N)), std::vector<double>(size_t(M * N))};
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? double(bias[n]) : 0.0, a = bias ? std::fabs(double(bias[n])) : 0.0;
      for (int64_t k = 0; k < K; ++k) {
        double p = double(x[size_t(m * K + k)]) * w.exact[size_t(n * K + k)];
        s += p;
        a += std::fabs(p);
      }
      r.y[size_t(m * N + n)] = s;
      r.mag[size_t(m * N + n)] = a;
    }
  return r;
}

double tolerance(int64_t K, double mag) {
  return 2.0 * double(FLT_EPSILON) * std::sqrt(double(K + 1)) * mag;
}

// Worst error / (FLT_EPSILON * sqrt(K + 1) * mag) seen by the sweep, for the log.
double g_worst_ratio = 0;

// Compares y [M, N] (row stride ldy) with the reference; also checks the padding of y.
// Returns the number of mismatches (reports the first few).
int compare(const std::vector<float>& y, int64_t M, int64_t N, int64_t ldy, int64_t K,
            const Reference& ref, const std::string& what) {
  int bad = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      const double got = double(y[size_t(m * ldy + n)]);
      const double want = ref.y[size_t(m * N + n)], mag = ref.mag[size_t(m * N + n)];
      const double err = std::fabs(got - want);
      if (mag > 0)
        g_worst_ratio = std::max(g_worst_ratio,
                                 err / (double(FLT_EPSILON) * std::sqrt(double(K + 1)) * mag));
      if (!(err <= tolerance(K, mag))) {
        if (++bad <= 3)
          ADD_FAILURE() << what << ": y[" << m << ", " << n << "] = " << got << ", want " << want
                        << " (tol " << tolerance(K, mag) << ")";
      }
    }
    for (int64_t n = N; n < ldy; ++n)
      if (y[size_t(m * ldy + n)] != kYSentinel && ++bad <= 3)
        ADD_FAILURE() << what << ": wrote padding y[" << m << ", " << n << "]";
  }
  return bad;
}

const int64_t kMs[] = {1, 2, 3, 5, 7, 8, 13, 15, 16, 17, 31, 48, 64, 100};
const int64_t kNs[] = {1, 7, 16, 33, 130, 515};
const int64_t kKs[] = {1, 3, 16, 31, 64, 100, 896};
const int64_t kQ8Ks[] = {32, 64, 96, 896};  // Q8_0: whole 32-element blocks

// One (M, N, K, bias) case of the sweeps: W [N, K] of `w_dtype` from values drawn as
// `value_dtype`, x [M, K] and the bias drawn in that order from `rng`; W and x also with
// padded row strides (x rows K + 3; W rows K + 5, or one Q8_0 block more), their padding NaN.
struct SweepCase {
  int64_t M, N, K;
  std::vector<float> x, x_padded, bias;
  const float* b;  // bias.data() or nullptr
  TestWeights w_dense, w_padded;
};

SweepCase make_case(std::mt19937& rng, DType w_dtype, DType value_dtype, int64_t M, int64_t N,
                    int64_t K, bool with_bias) {
  const std::vector<float> wvals = random_values(rng, size_t(N * K), value_dtype);
  SweepCase c{M, N, K, random_values(rng, size_t(M * K), DType::F32), {}, {}, nullptr,
              make_weights(w_dtype, N, K, K, wvals),
              make_weights(w_dtype, N, K, K + (w_dtype == DType::Q8_0 ? 32 : 5), wvals)};
  c.bias = random_values(rng, size_t(N), DType::F32);
  c.b = with_bias ? c.bias.data() : nullptr;
  c.x_padded = strided(c.x, M, K, K + 3);
  return c;
}

// linear() on the case for {1, 2} threads x {dense, padded} strides (y rows N + 7 when
// padded, its padding checked), each result compared with `ref`; `also(y, ldy, what)` runs
// any further check on it. Returns the number of mismatches; stops at the first variant that
// has some.
int check_strides(const SweepCase& c, const Reference& ref, const std::string& what,
                  const std::function<void(const std::vector<float>&, int64_t,
                                           const std::string&)>& also = {}) {
  for (int threads : {1, 2})
    for (bool padded : {false, true}) {
      const int64_t ldx = padded ? c.K + 3 : c.K, ldy = padded ? c.N + 7 : c.N;
      std::vector<float> y(size_t(c.M * ldy), kYSentinel);
      linear(padded ? c.x_padded.data() : c.x.data(), c.M, ldx,
             padded ? c.w_padded.view() : c.w_dense.view(), c.b, y.data(), ldy,
             pool_of(threads));
      const std::string full = what + " M=" + std::to_string(c.M) + " N=" +
                               std::to_string(c.N) + " K=" + std::to_string(c.K) +
                               (c.b ? " bias" : "") + " threads=" + std::to_string(threads) +
                               (padded ? " padded" : " dense");
      if (const int bad = compare(y, c.M, c.N, ldy, c.K, ref, full)) return bad;
      if (also) also(y, ldy, full);
    }
  return 0;
}

struct SweepParam {
  DType dtype;
  bool bias;
  int64_t M;
};

std::string param_name(const testing::TestParamInfo<SweepParam>& info) {
  return std::string(dtype_name(info.param.dtype)) + (info.param.bias ? "_bias" : "_nobias") +
         "_M" + std::to_string(info.param.M);
}

class LinearSweep : public testing::TestWithParam<SweepParam> {};

// Every (N, K) for one (dtype, bias, M): each ISA x {GEMV, GEMM, skinny} kernel (whichever
// linear() would pick, and the others) x {1, 2} threads x {dense, padded} strides.
TEST_P(LinearSweep, MatchesFloat64Reference) {
  const SweepParam p = GetParam();
  const int64_t M = p.M;
  std::mt19937 rng(unsigned(1000 * M + 10 * int(p.dtype) + p.bias));
  const bool q8 = p.dtype == DType::Q8_0;
  const std::vector<int64_t> Ks = q8 ? std::vector<int64_t>(std::begin(kQ8Ks), std::end(kQ8Ks))
                                     : std::vector<int64_t>(std::begin(kKs), std::end(kKs));
  for (int64_t N : kNs) {
    for (int64_t K : Ks) {
      const SweepCase c = make_case(rng, p.dtype, p.dtype, M, N, K, p.bias);
      const Reference ref = reference(c.x, c.w_dense, c.b, M);
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        for (linear_impl::Path path : {linear_impl::Path::Gemv, linear_impl::Path::Gemm, linear_impl::Path::Skinny}) {
          PathScope path_scope(path);
          const std::string what = "isa=" + std::string(isa_name(isa)) + " " + path_name(path);
          if (check_strides(c, ref, what) > 0) return;  // one report per size
        }
      }
    }
  }
  std::printf("worst error / (FLT_EPSILON * sqrt(K+1) * sum|xw|) so far: %.3f (limit 2)\n",
              g_worst_ratio);
}

std::vector<SweepParam> sweep_params() {
  std::vector<SweepParam> v;
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::Q8_0})
    for (bool bias : {false, true})
      for (int64_t M : kMs) v.push_back({dt, bias, M});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, LinearSweep, testing::ValuesIn(sweep_params()), param_name);

// Qwen2.5-0.5B's down projection: K = 4864 spans many GEMM K blocks and, for M > 1, the
// GEMV's K chunks (partial sums accumulated in y); every kernel, bf16 and Q8_0 (whose
// chunks and blocks must start on 32-element blocks), two threads.
class LargeK : public testing::TestWithParam<DType> {};
TEST_P(LargeK, MatchesFloat64Reference) {
  const int64_t N = 96, K = 4864;
  std::mt19937 rng(7);
  const std::vector<float> wvals = random_values(rng, size_t(N * K), GetParam());
  const TestWeights w = make_weights(GetParam(), N, K, K, wvals);
  for (int64_t M : {int64_t(1), int64_t(3), int64_t(6), int64_t(40), int64_t(70)}) {
    const std::vector<float> x = random_values(rng, size_t(M * K), DType::F32);
    const Reference ref = reference(x, w, nullptr, M);
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      for (linear_impl::Path path : {linear_impl::Path::Gemv, linear_impl::Path::Gemm, linear_impl::Path::Skinny}) {
        PathScope path_scope(path);
        std::vector<float> y(size_t(M * N), kYSentinel);
        linear(x.data(), M, K, w.view(), nullptr, y.data(), N, pool_of(2));
        EXPECT_EQ(compare(y, M, N, N, K, ref, "M=" + std::to_string(M) + " isa=" +
                                                 std::string(isa_name(isa)) + " " +
                                                 path_name(path)),
                  0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LargeK, testing::Values(DType::BF16, DType::Q8_0),
                         [](const testing::TestParamInfo<DType>& i) {
                           return std::string(dtype_name(i.param));
                         });

// Special values pass through: an Inf weight makes an Inf output in its column only.
TEST(Linear, InfWeightStaysInItsColumn) {
  const int64_t N = 40, K = 20;
  for (int64_t M : {int64_t(1), int64_t(20)}) {
    std::vector<float> wvals(size_t(N * K), 0.5f), x(size_t(M * K), 1.0f);
    wvals[size_t(17 * K + 3)] = std::numeric_limits<float>::infinity();
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      const TestWeights w = make_weights(dt, N, K, K, wvals);
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        for (linear_impl::Path path : {linear_impl::Path::Gemv, linear_impl::Path::Gemm, linear_impl::Path::Skinny}) {
          PathScope path_scope(path);
          std::vector<float> y(size_t(M * N));
          linear(x.data(), M, K, w.view(), nullptr, y.data(), N, pool_of(1));
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              if (n == 17) EXPECT_TRUE(std::isinf(y[size_t(m * N + n)]));
              else EXPECT_EQ(y[size_t(m * N + n)], 10.0f)
                  << "n=" << n << " " << isa_name(isa) << " " << path_name(path);
            }
        }
      }
    }
  }
}

TEST(Linear, ZeroRowsIsANoOp) {
  std::vector<float> wv(12, 1.0f);
  WeightView w{wv.data(), DType::F32, 3, 4, 4};
  linear(nullptr, 0, 4, w, nullptr, nullptr, 3, pool_of(1));
}

// The CPU's vendor from /proc/cpuinfo, independently of the CPUID builtins the rules use.
bool cpu_is_amd() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("vendor_id", 0) == 0) return line.find("AuthenticAMD") != std::string::npos;
  return false;
}

// AMD family 25 with avx512f (Zen 4), from /proc/cpuinfo; prints what it read.
bool cpu_is_zen4_by_cpuinfo() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  int family = -1;
  bool avx512f = false;
  while (std::getline(f, line)) {
    if (family < 0 && line.rfind("cpu family", 0) == 0)
      family = std::stoi(line.substr(line.find(':') + 1));
    if (line.rfind("flags", 0) == 0) {
      avx512f = (line + " ").find(" avx512f ") != std::string::npos;
      break;
    }
  }
  std::printf("CPU family %d, avx512f %d\n", family, int(avx512f));
  return cpu_is_amd() && family == 25 && avx512f;
}

// The Auto path's skinny/GEMM crossover follows the CPU's vendor (read here from
// /proc/cpuinfo, independently of the CPUID builtin the rule uses): AMD keeps skinny tiles
// up to 256 rows with AVX-512 and 128 with AVX2, other CPUs switch to the packed GEMM after
// 24 (AVX-512) / 48 (AVX2) rows. So does the GEMV/skinny crossover over bf16 weights with
// f32 math: from 2 rows with AVX-512 on Zen 4, 5 on other AVX-512 cores, 4 with AVX2.
TEST(Linear, AutoPathCrossoverFollowsTheCpu) {
  const bool amd = cpu_is_amd(), zen4 = cpu_is_zen4_by_cpuinfo();
  EXPECT_EQ(linear_impl::skinny_max_rows_for(true), amd ? 256 : 24);
  EXPECT_EQ(linear_impl::skinny_max_rows_for(false), amd ? 128 : 48);
  for (Isa isa : {Isa::Avx512, Isa::Avx2}) {
    if (!isa_supported(isa)) {
      std::printf("skipped %s: this CPU lacks it\n", std::string(isa_name(isa)).c_str());
      continue;
    }
    IsaScope scope(isa);
    Bf16MathScope exact(Bf16Math::F32);  // the bf16-dot GEMM has its own test below
    Int8MathScope exact_int8(Int8Math::F32);  // and so has the int8-dot GEMV
    const linear_impl::Kernels& k = linear_impl::active_kernels();
    const int64_t limit = k.skinny_max_rows;
    // bf16 weights: AVX2's pair tiles from 4 rows, AVX-512's tiles from 2 on Zen 4 and
    // from 5 elsewhere; other dtypes from 5 on both.
    const int64_t bf16_from = isa == Isa::Avx2 ? 4 : zen4 ? 2 : 5;
    EXPECT_EQ(linear_impl::choose_path(k, bf16_from - 1, 896, DType::BF16), linear_impl::Path::Gemv);
    EXPECT_EQ(linear_impl::choose_path(k, bf16_from, 896, DType::BF16), linear_impl::Path::Skinny);
    EXPECT_EQ(linear_impl::choose_path(k, 4, 896, DType::F32), linear_impl::Path::Gemv);
    EXPECT_EQ(linear_impl::choose_path(k, 5, 896, DType::F32), linear_impl::Path::Skinny);
    EXPECT_EQ(linear_impl::choose_path(k, 4, 896, DType::Q8_0), linear_impl::Path::Gemv);
    EXPECT_EQ(linear_impl::choose_path(k, 5, 896, DType::BF16), linear_impl::Path::Skinny);
    EXPECT_EQ(linear_impl::choose_path(k, limit, 896, DType::BF16), linear_impl::Path::Skinny);
    EXPECT_EQ(linear_impl::choose_path(k, limit + 1, 896, DType::BF16), linear_impl::Path::Gemm);
  }
}

// The software prefetch of W follows the CPU (read here from /proc/cpuinfo): on AMD family
// 25 with AVX-512 (Zen 4) the GEMV does not prefetch F32 / BF16 / F16 weights and the skinny
// tiles prefetch into L2; elsewhere the GEMV prefetches and the skinny tiles into L1; the
// f32 GEMV always prefetches Q8_0, the int8-dot GEMV as bf16.
TEST(Linear, WeightPrefetchFollowsTheCpu) {
  if (std::getenv("CPINFER_GEMV_PREFETCH") != nullptr) {
    std::printf("skipped: CPINFER_GEMV_PREFETCH is set and overrides the rule\n");
    return;
  }
  const bool zen4 = cpu_is_zen4_by_cpuinfo();
  std::printf("GEMV prefetch %s for bf16, skinny tiles into %s\n", zen4 ? "off" : "on",
              zen4 ? "L2" : "L1");
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    EXPECT_EQ(linear_impl::gemv_prefetch_for(dt), !zen4) << dtype_name(dt);
  EXPECT_TRUE(linear_impl::gemv_prefetch_for(DType::Q8_0));
  EXPECT_EQ(linear_impl::gemv_int8_dot_prefetch(), !zen4);
  EXPECT_EQ(linear_impl::skinny_prefetch_to_l2(), zen4);
}

// ---- the bf16-dot GEMM (AVX512_BF16) ---------------------------------------------------
//
// It computes x rounded to bf16 (round to nearest even) times the stored bf16 weights with
// exact products and f32 sums. So against a float64 reference on the rounded x the f32
// tolerance above holds unchanged (any wrong pair, pad or strip is off by O(|x w|)); and
// against the reference on x itself the rounding adds at most 2^-8 * sum_k |x_k w_k| (bf16
// keeps 8 significant bits: a relative error <= 2^-8 per activation), the bound users get.

// Whether this CPU runs the bf16-dot GEMM; prints why not.
bool bf16_dot_runs() {
  if (!isa_supported(Isa::Avx512) || !bf16_dot_supported()) {
    std::printf("skipped: this CPU lacks AVX-512 with AVX512_BF16, so the bf16-dot GEMM "
                "cannot run here\n");
    return false;
  }
  return true;
}

std::vector<float> rounded_to_bf16(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = round_to(DType::BF16, x[i]);
  return r;
}

// Both dot paths (the GEMM and the skinny tiles), every M of the sweep, odd N and K (odd K:
// a padded last pair; K % 32 != 0: a masked last step of the skinny tiles), bias or not,
// 1 and 2 threads, dense and padded strides.
TEST(LinearBf16Dot, MatchesFloat64ReferenceOnRoundedX) {
  if (!bf16_dot_runs()) GTEST_SKIP() << "no AVX512_BF16";
  IsaScope isa(Isa::Avx512);
  for (linear_impl::Path dot_path : {linear_impl::Path::GemmBf16Dot, linear_impl::Path::SkinnyBf16Dot}) {
  PathScope path(dot_path);
  std::mt19937 rng(11);
  double worst_rounding = 0;  // error vs the unrounded reference / (2^-8 sum|xw|)
  for (int64_t M : kMs)
    for (int64_t N : kNs)
      for (int64_t K : kKs)
        for (bool with_bias : {false, true}) {
          const SweepCase c = make_case(rng, DType::BF16, DType::BF16, M, N, K, with_bias);
          const Reference ref = reference(c.x, c.w_dense, c.b, M);
          // Within the f32 tolerance of x rounded to bf16, and within one bf16 rounding of
          // each product (2^-8 sum|xw|) plus that tolerance of the unrounded x.
          auto unrounded = [&](const std::vector<float>& y, int64_t ldy, const std::string& what) {
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n) {
                const double err = std::fabs(double(y[size_t(m * ldy + n)]) - ref.y[size_t(m * N + n)]);
                const double mag = ref.mag[size_t(m * N + n)];
                const double bound = std::ldexp(mag, -8) + tolerance(K, mag);
                ASSERT_LE(err, bound) << what << " y[" << m << ", " << n << "] vs unrounded x";
                if (mag > 0) worst_rounding = std::max(worst_rounding, err / std::ldexp(mag, -8));
              }
          };
          ASSERT_EQ(check_strides(c, reference(rounded_to_bf16(c.x), c.w_dense, c.b, M),
                                  path_name(dot_path), unrounded), 0);
        }
  std::printf("%s: worst error vs unrounded x / (2^-8 sum|xw|) = %.3f (limit 1 + the f32 "
              "part)\n", path_name(dot_path), worst_rounding);
  }
}

// K = 4864 (qwen2.5's down projection): K blocks of 694-695 elements, some odd, so pairs
// restart at odd offsets of the row; M past one 14-row tile and one thread's share. The
// skinny tiles too (152 steps of 32 K each, the next W rows prefetched over them).
TEST(LinearBf16Dot, LargeKMatchesFloat64ReferenceOnRoundedX) {
  if (!bf16_dot_runs()) GTEST_SKIP() << "no AVX512_BF16";
  IsaScope isa(Isa::Avx512);
  for (linear_impl::Path dot_path : {linear_impl::Path::GemmBf16Dot, linear_impl::Path::SkinnyBf16Dot}) {
  PathScope path(dot_path);
  const int64_t N = 96, K = 4864;
  std::mt19937 rng(13);
  const TestWeights w = make_weights(DType::BF16, N, K, K,
                                     random_values(rng, size_t(N * K), DType::BF16));
  for (int64_t M : {int64_t(1), int64_t(15), int64_t(70), int64_t(300)}) {
    const std::vector<float> x = random_values(rng, size_t(M * K), DType::F32);
    const Reference ref = reference(rounded_to_bf16(x), w, nullptr, M);
    std::vector<float> y(size_t(M * N), kYSentinel);
    linear(x.data(), M, K, w.view(), nullptr, y.data(), N, pool_of(2));
    EXPECT_EQ(compare(y, M, N, N, K, ref, std::string(path_name(dot_path)) + " M=" + std::to_string(M)), 0);
  }
  }
}

// Under Dot math every Auto path sees x rounded to bf16 (the decode-sized paths through a
// rounded copy), so a row's result does not depend on how many rows share the call: each
// M matches the float64 reference on the rounded x within the f32 tolerance.
TEST(LinearBf16Dot, EveryAutoPathSeesRoundedX) {
  if (!bf16_dot_runs()) GTEST_SKIP() << "no AVX512_BF16";
  IsaScope isa(Isa::Avx512);
  Bf16MathScope dot(Bf16Math::Dot);
  const int64_t N = 40, K = 333;
  std::mt19937 rng(17);
  const TestWeights w = make_weights(DType::BF16, N, K, K,
                                     random_values(rng, size_t(N * K), DType::BF16));
  for (int64_t M : {int64_t(1), int64_t(4), int64_t(5), int64_t(30), int64_t(48), int64_t(49),
                    int64_t(128), int64_t(129), int64_t(200)}) {
    const std::vector<float> x = random_values(rng, size_t(M * K), DType::F32);
    const Reference ref = reference(rounded_to_bf16(x), w, nullptr, M);
    for (int threads : {1, 2}) {
      std::vector<float> y(size_t(M * N), kYSentinel);
      linear(x.data(), M, K, w.view(), nullptr, y.data(), N, pool_of(threads));
      EXPECT_EQ(compare(y, M, N, N, K, ref, "auto M=" + std::to_string(M) + " path " +
                                                path_name(linear_impl::choose_path(
                                                    linear_impl::active_kernels(), M, K,
                                                    DType::BF16))),
                0);
    }
  }
}

// Auto takes the bf16-dot GEMM for prefill-sized M over bf16 weights exactly where
// bf16_dot_preferred() (AMD with AVX512_BF16, vendor read here from /proc/cpuinfo);
// Dot takes it wherever it can run, F32 never; decode-sized M and other dtypes never.
TEST(LinearBf16Dot, PathChoiceFollowsTheSetting) {
  const bool amd = cpu_is_amd();
  const bool runs = isa_supported(Isa::Avx512) && bf16_dot_supported();
  EXPECT_EQ(bf16_dot_preferred(), amd && bf16_dot_supported());
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    const linear_impl::Kernels& k = linear_impl::active_kernels();
    const bool here = runs && isa == Isa::Avx512;
    using linear_impl::Path;
    const Path dot_or_gemm = here ? Path::GemmBf16Dot : Path::Gemm;
    {
      Bf16MathScope m(Bf16Math::Dot);
      EXPECT_EQ(linear_impl::choose_path(k, 2048, 896, DType::BF16), dot_or_gemm) << isa_name(isa);
      EXPECT_EQ(linear_impl::choose_path(k, 2048, 896, DType::F32), Path::Gemm);
      EXPECT_EQ(linear_impl::choose_path(k, 2048, 896, DType::F16), Path::Gemm);
      EXPECT_EQ(linear_impl::choose_path(k, 1, 896, DType::BF16), Path::Gemv);
    }
    {
      Bf16MathScope m(Bf16Math::F32);
      EXPECT_EQ(linear_impl::choose_path(k, 2048, 896, DType::BF16), Path::Gemm);
    }
    EXPECT_EQ(linear_impl::choose_path(k, 2048, 896, DType::BF16),
              here && amd ? Path::GemmBf16Dot : Path::Gemm) << isa_name(isa);
    // Under Dot: the dot skinny tiles where the f32 math takes the f32 ones or the GEMV
    // for 2-4 rows, up to 128 rows; the GEMV for one row; the dot GEMM for the rest.
    constexpr int64_t kMaxM = 300;
    std::vector<Path> f32_paths(kMaxM + 1);
    {
      Bf16MathScope m(Bf16Math::F32);
      for (int64_t M = 1; M <= kMaxM; ++M) f32_paths[size_t(M)] = linear_impl::choose_path(k, M, 896, DType::BF16);
    }
    {
      Bf16MathScope m(Bf16Math::Dot);
      for (int64_t M = 1; M <= kMaxM; ++M) {
        const Path f32 = f32_paths[size_t(M)];
        const Path want = !here || M == 1 ? f32
                          : (f32 == Path::Skinny || f32 == Path::Gemv) && M <= 128
                              ? Path::SkinnyBf16Dot
                              : Path::GemmBf16Dot;
        EXPECT_EQ(linear_impl::choose_path(k, M, 896, DType::BF16), want) << isa_name(isa) << " M " << M;
      }
      // Fixed points of that rule (AVX2's bf16 pair tiles take 4 rows already).
      EXPECT_EQ(linear_impl::choose_path(k, 4, 896, DType::BF16),
                here ? Path::SkinnyBf16Dot : isa == Isa::Avx2 ? Path::Skinny : Path::Gemv)
          << isa_name(isa);
      EXPECT_EQ(linear_impl::choose_path(k, 2, 896, DType::BF16),
                here ? Path::SkinnyBf16Dot : Path::Gemv) << isa_name(isa);
      EXPECT_EQ(linear_impl::choose_path(k, 1, 896, DType::BF16), Path::Gemv) << isa_name(isa);
      EXPECT_EQ(linear_impl::choose_path(k, 8, 896, DType::BF16),
                here ? Path::SkinnyBf16Dot : linear_impl::choose_path(k, 8, 896, DType::F32))
          << isa_name(isa);
      if (here && amd) {
        EXPECT_EQ(linear_impl::choose_path(k, 128, 896, DType::BF16), Path::SkinnyBf16Dot);
        EXPECT_EQ(linear_impl::choose_path(k, 129, 896, DType::BF16), Path::GemmBf16Dot);
      }
    }
    // Forced, each dot path runs where it can and falls back to its f32 twin elsewhere (the
    // skinny tiles to the GEMV on an ISA or dtype without them).
    const Path f32_skinny = k.skinny ? Path::Skinny : Path::Gemv;
    {
      PathScope forced(Path::SkinnyBf16Dot);
      EXPECT_EQ(linear_impl::choose_path(k, 3, 896, DType::BF16), here ? Path::SkinnyBf16Dot : f32_skinny);
      EXPECT_EQ(linear_impl::choose_path(k, 3, 896, DType::F32), f32_skinny);
      EXPECT_EQ(linear_impl::choose_path(k, 3, 896, DType::Q8_0), Path::Gemv);
    }
    PathScope forced(Path::GemmBf16Dot);
    EXPECT_EQ(linear_impl::choose_path(k, 3, 896, DType::BF16), dot_or_gemm);
    EXPECT_EQ(linear_impl::choose_path(k, 3, 896, DType::F32), Path::Gemm);
  }
}

// ---- int8 dot products over Q8_0 weights (Int8Math::Dot) ------------------------------
//
// Under int8 dot math the activations are quantized per 32-element block (kernels/
// quantize.h), written here again from that definition: d = max|x| / 127 in f32, q = x *
// (1 / d) rounded to nearest even; the values d * q. The int8-dot GEMV multiplies those q by
// the stored int8 weights exactly (int32 sums) and scales each block's sum by dw * d, so
// against a float64 reference on the quantized x and the dequantized weights the f32
// tolerance above holds unchanged; a wrong block, scale or sign is off by O(|x w|).

// x [M, K] (dense) as the int8 dot math sees it: each block's d * q, computed in double.
std::vector<float> quantized_x(const std::vector<float>& x, int64_t M, int64_t K) {
  std::vector<float> r(x.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < K / 32; ++b) {
      const float* xb = x.data() + m * K + b * 32;
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
      const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
      for (int j = 0; j < 32; ++j)
        r[size_t(m * K + b * 32 + j)] = float(double(d) * std::nearbyint(xb[j] * id));
    }
  return r;
}

// Whether this CPU runs the int8-dot GEMV and GEMM; prints why not.
bool int8_dot_runs() {
  if (!isa_supported(Isa::Avx512) || !int8_dot_supported()) {
    std::printf("skipped: this CPU lacks AVX-512 with AVX512_VNNI, so the int8-dot GEMV and "
                "GEMM cannot run here (the f32 kernels on quantized activations are checked "
                "below)\n");
    return false;
  }
  return true;
}

// The GEMV and the GEMM forced: every M of the sweep, odd N, K of 1 to 28 blocks (odd block
// counts: the GEMV's last block alone), bias or not, 1 and 2 threads, dense and padded
// strides (padding blocks of W have NaN scales, x padding is NaN).
TEST(LinearInt8Dot, MatchesFloat64ReferenceOnQuantizedX) {
  if (!int8_dot_runs()) GTEST_SKIP() << "no AVX512_VNNI";
  IsaScope isa(Isa::Avx512);
  for (linear_impl::Path dot_path : {linear_impl::Path::GemvInt8Dot, linear_impl::Path::GemmInt8Dot}) {
  PathScope path(dot_path);
  std::mt19937 rng(19);
  for (int64_t M : kMs)
    for (int64_t N : kNs)
      for (int64_t K : kQ8Ks)
        for (bool with_bias : {false, true}) {
          const SweepCase c = make_case(rng, DType::Q8_0, DType::F32, M, N, K, with_bias);
          ASSERT_EQ(check_strides(c, reference(quantized_x(c.x, M, K), c.w_dense, c.b, M),
                                  path_name(dot_path)), 0);
        }
  }
}

// K = 4864 (qwen2.5's down projection, 152 blocks: no K chunks in the GEMV, 5 K blocks of
// 30-31 Q8_0 blocks in the GEMM) at M past one group of 4 x rows and one 12-row GEMM tile;
// and weights of -128 (a GGUF file may hold them; quantize_row_q8_0 never writes one), whose
// magnitude 128 only fits vpdpbusd's unsigned operand (the GEMV's |w|; the GEMM's w + 128 = 0).
TEST(LinearInt8Dot, LargeKAndMinus128Weights) {
  if (!int8_dot_runs()) GTEST_SKIP() << "no AVX512_VNNI";
  IsaScope isa(Isa::Avx512);
  for (linear_impl::Path dot_path : {linear_impl::Path::GemvInt8Dot, linear_impl::Path::GemmInt8Dot}) {
  PathScope path(dot_path);
  std::mt19937 rng(23);
  {
    const int64_t N = 40, K = 4864;
    const TestWeights w = make_weights(DType::Q8_0, N, K, K,
                                       random_values(rng, size_t(N * K), DType::F32));
    for (int64_t M : {int64_t(1), int64_t(6), int64_t(64), int64_t(77)}) {
      const std::vector<float> x = random_values(rng, size_t(M * K), DType::F32);
      std::vector<float> y(size_t(M * N), kYSentinel);
      linear(x.data(), M, K, w.view(), nullptr, y.data(), N, pool_of(2));
      EXPECT_EQ(compare(y, M, N, N, K, reference(quantized_x(x, M, K), w, nullptr, M),
                        std::string(path_name(dot_path)) + " K=4864 M=" + std::to_string(M)), 0);
    }
  }
  const int64_t N = 5, K = 96, M = 3;
  TestWeights w = make_weights(DType::Q8_0, N, K, K, random_values(rng, size_t(N * K), DType::F32));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c : {int64_t(0), int64_t(33), int64_t(95), int64_t(17 + n)}) {
      const int64_t block = n * (K / 32) + c / 32;
      w.blocks[size_t(block * kQ8BlockBytes + 2 + c % 32)] = uint8_t(int8_t(-128));
      uint16_t d_bits;
      std::memcpy(&d_bits, w.blocks.data() + block * kQ8BlockBytes, 2);
      w.exact[size_t(n * K + c)] = -128.0 * double(float(f16::from_bits(d_bits)));
    }
  const std::vector<float> x = random_values(rng, size_t(M * K), DType::F32);
  std::vector<float> y(size_t(M * N), kYSentinel);
  linear(x.data(), M, K, w.view(), nullptr, y.data(), N, pool_of(1));
  EXPECT_EQ(compare(y, M, N, N, K, reference(quantized_x(x, M, K), w, nullptr, M),
                    std::string(path_name(dot_path)) + " -128"), 0);
  }
}

// Under Dot every Auto path over Q8_0 weights, on every ISA, sees the quantized x (the
// int8-dot GEMV where it runs, the f32 GEMV and GEMM on d * q elsewhere), so a row's result
// does not depend on how many rows share its call: each M matches the float64 reference on
// the quantized x within the f32 tolerance. A NaN in x makes its row NaN on every path.
TEST(LinearInt8Dot, EveryAutoPathSeesQuantizedX) {
  Int8MathScope dot(Int8Math::Dot);
  const int64_t N = 40, K = 352;
  std::mt19937 rng(29);
  const TestWeights w = make_weights(DType::Q8_0, N, K, K,
                                     random_values(rng, size_t(N * K), DType::F32));
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    for (int64_t M : {int64_t(1), int64_t(4), int64_t(5), int64_t(30), int64_t(64), int64_t(65),
                      int64_t(200)}) {
      const std::vector<float> x = random_values(rng, size_t(M * K), DType::F32);
      const Reference ref = reference(quantized_x(x, M, K), w, nullptr, M);
      const char* path = path_name(linear_impl::choose_path(linear_impl::active_kernels(), M, K,
                                                            DType::Q8_0));
      for (int threads : {1, 2}) {
        std::vector<float> y(size_t(M * N), kYSentinel);
        linear(x.data(), M, K, w.view(), nullptr, y.data(), N, pool_of(threads));
        EXPECT_EQ(compare(y, M, N, N, K, ref, std::string(isa_name(isa)) + " auto M=" +
                                                  std::to_string(M) + " path " + path),
                  0);
      }
      std::vector<float> xn = x;
      xn[size_t((M - 1) * K + 100)] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> y(size_t(M * N), kYSentinel);
      linear(xn.data(), M, K, w.view(), nullptr, y.data(), N, pool_of(2));
      for (int64_t n = 0; n < N; ++n)
        EXPECT_TRUE(std::isnan(y[size_t((M - 1) * N + n)])) << isa_name(isa) << " " << path << " M=" << M;
    }
  }
}

// Auto takes the int8-dot GEMV up to 4 rows and the int8-dot GEMM from 5 over Q8_0 weights,
// exactly where the CPU has AVX512_VNNI (read here from /proc/cpuinfo) with the AVX-512
// kernels active; Dot takes them wherever they can run, F32 never; other dtypes never.
// Elsewhere the f32 choice: the GEMV up to 64 rows, the GEMM beyond.
TEST(LinearInt8Dot, PathChoiceFollowsTheSetting) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  bool vnni = false;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) {
      vnni = (line + " ").find(" avx512_vnni ") != std::string::npos;
      break;
    }
  EXPECT_EQ(int8_dot_supported(), vnni && isa_supported(Isa::Avx512));
  EXPECT_EQ(int8_dot_chosen(), int8_dot_supported());  // Auto
  using linear_impl::Path;
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    const linear_impl::Kernels& k = linear_impl::active_kernels();
    const bool here = int8_dot_supported() && isa == Isa::Avx512;
    for (Int8Math m : {Int8Math::Auto, Int8Math::Dot, Int8Math::F32}) {
      Int8MathScope math(m);
      const bool dot = m == Int8Math::Dot || (m == Int8Math::Auto && int8_dot_supported());
      EXPECT_EQ(linear_uses_int8_dot(DType::Q8_0), dot);
      EXPECT_FALSE(linear_uses_int8_dot(DType::BF16));
      for (int64_t M : {int64_t(1), int64_t(4)})
        EXPECT_EQ(linear_impl::choose_path(k, M, 896, DType::Q8_0),
                  dot && here ? Path::GemvInt8Dot : Path::Gemv) << isa_name(isa) << " M " << M;
      for (int64_t M : {int64_t(5), int64_t(64)})
        EXPECT_EQ(linear_impl::choose_path(k, M, 896, DType::Q8_0),
                  dot && here ? Path::GemmInt8Dot : Path::Gemv) << isa_name(isa) << " M " << M;
      for (int64_t M : {int64_t(65), int64_t(2048)})
        EXPECT_EQ(linear_impl::choose_path(k, M, 896, DType::Q8_0),
                  dot && here ? Path::GemmInt8Dot : Path::Gemm) << isa_name(isa) << " M " << M;
      EXPECT_NE(linear_impl::choose_path(k, 1, 896, DType::BF16), Path::GemvInt8Dot);
      EXPECT_NE(linear_impl::choose_path(k, 2048, 896, DType::BF16), Path::GemmInt8Dot);
    }
    {
      PathScope forced(Path::GemvInt8Dot);
      EXPECT_EQ(linear_impl::choose_path(k, 100, 896, DType::Q8_0), here ? Path::GemvInt8Dot : Path::Gemv);
      EXPECT_EQ(linear_impl::choose_path(k, 1, 896, DType::BF16), Path::Gemv);
    }
    PathScope forced(Path::GemmInt8Dot);
    EXPECT_EQ(linear_impl::choose_path(k, 1, 896, DType::Q8_0), here ? Path::GemmInt8Dot : Path::Gemm);
    EXPECT_EQ(linear_impl::choose_path(k, 1, 896, DType::BF16), Path::Gemm);
  }
}

TEST(Linear, RejectsBadShapes) {
  std::vector<float> wv(12, 1.0f), x(8, 1.0f), y(6, 0.0f);
  WeightView w{wv.data(), DType::F32, 3, 4, 4};
  auto call = [&](const WeightView& ww, int64_t ldx, int64_t ldy) {
    linear(x.data(), 2, ldx, ww, nullptr, y.data(), ldy, pool_of(1));
  };
  EXPECT_NO_THROW(call(w, 4, 3));
  EXPECT_THROW(call(w, 3, 3), Error);  // ldx < K
  EXPECT_THROW(call(w, 4, 2), Error);  // ldy < N
  WeightView bad = w;
  bad.ld = 3;  // ld < cols
  EXPECT_THROW(call(bad, 4, 3), Error);
  bad = w;
  bad.dtype = DType::I32;
  EXPECT_THROW(call(bad, 4, 3), Error);
  bad = w;
  bad.cols = 0;
  EXPECT_THROW(call(bad, 4, 3), Error);
  // Q8_0 needs K and the row stride in whole 32-element blocks.
  std::vector<uint8_t> blocks(size_t(3 * 2 * kQ8BlockBytes), 0);
  std::vector<float> x64(size_t(2 * 64), 1.0f);
  const WeightView q8{blocks.data(), DType::Q8_0, 3, 64, 64};
  EXPECT_NO_THROW(linear(x64.data(), 2, 64, q8, nullptr, y.data(), 3, pool_of(1)));
  WeightView q8_bad = q8;
  q8_bad.cols = 40;
  EXPECT_THROW(linear(x64.data(), 2, 64, q8_bad, nullptr, y.data(), 3, pool_of(1)), Error);
  q8_bad = q8;
  q8_bad.cols = 32;
  q8_bad.ld = 48;
  EXPECT_THROW(linear(x64.data(), 2, 64, q8_bad, nullptr, y.data(), 3, pool_of(1)), Error);
  EXPECT_THROW(linear(x.data(), -1, 4, w, nullptr, y.data(), 3, pool_of(1)), Error);
}

// ---- embedding_lookup ----------------------------------------------------------------

TEST(Embedding, GathersAndWidensRows) {
  const int64_t rows = 50, cols = 37, ld = 40;
  std::mt19937 rng(3);
  const std::vector<int32_t> ids = {0, 49, 7, 7, 23, 1, 48, 0, 30, 12, 5};
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    std::vector<float> vals = random_values(rng, size_t(rows * cols), dt);
    vals[5] = -0.0f;
    vals[6] = std::numeric_limits<float>::infinity();
    if (dt == DType::F16) vals[7] = float(f16::from_bits(0x0001));  // smallest subnormal
    const TestWeights t = make_weights(dt, rows, cols, ld, vals);
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      for (int threads : {1, 2}) {
        std::vector<float> out(ids.size() * size_t(cols), kYSentinel);
        embedding_lookup(t.view(), ids.data(), int64_t(ids.size()), out.data(), pool_of(threads));
        for (size_t i = 0; i < ids.size(); ++i)
          for (int64_t c = 0; c < cols; ++c) {
            const float want = vals[size_t(ids[i] * cols + c)];
            const float got = out[i * size_t(cols) + size_t(c)];
            ASSERT_EQ(float_to_bits(got), float_to_bits(want))
                << dtype_name(dt) << " " << isa_name(isa) << " id " << ids[i] << " col " << c;
          }
      }
    }
  }
}

// A Q8_0 table (two 32-element blocks a row, one padding block) gives its dequantized rows.
TEST(Embedding, DequantizesQ8_0Rows) {
  const int64_t rows = 9, cols = 64, ld = 96;
  std::mt19937 rng(5);
  const std::vector<int32_t> ids = {8, 0, 3, 3, 7};
  const TestWeights t = make_weights(DType::Q8_0, rows, cols, ld,
                                     random_values(rng, size_t(rows * cols), DType::F32));
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    std::vector<float> out(ids.size() * size_t(cols), kYSentinel);
    embedding_lookup(t.view(), ids.data(), int64_t(ids.size()), out.data(), pool_of(2));
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(double(out[i * size_t(cols) + size_t(c)]), t.exact[size_t(ids[i] * cols + c)])
            << isa_name(isa) << " id " << ids[i] << " col " << c;
  }
}

TEST(Embedding, RejectsOutOfRangeIds) {
  std::vector<float> table(20, 1.0f), out(10);
  WeightView t{table.data(), DType::F32, 4, 5, 5};
  const int32_t ok[] = {0, 3}, too_big[] = {1, 4}, negative[] = {-1};
  EXPECT_NO_THROW(embedding_lookup(t, ok, 2, out.data(), pool_of(1)));
  EXPECT_THROW(embedding_lookup(t, too_big, 2, out.data(), pool_of(1)), Error);
  EXPECT_THROW(embedding_lookup(t, negative, 1, out.data(), pool_of(1)), Error);
}

}  // namespace
}  // namespace cpinfer
