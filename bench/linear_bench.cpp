// linear() on Qwen2.5-0.5B shapes: decode (M = 1, weight GB/s), decode batches (M = 8 to
// 64, GFLOP/s) and prefill (M = 512, GFLOP/s), bf16, f32 and Q8_0 weights, 1 and 2 threads,
// each ISA this CPU supports; on AVX512_BF16 CPUs also the bf16-dot GEMM and skinny tiles
// by name (".../path:gemm_bf16dot", ".../path:skinny_bf16dot"), on AVX512_VNNI CPUs the Q8_0
// GEMV on f32 and the GEMV and GEMM on int8 dot products by name (".../path:gemv",
// ".../path:gemv_int8dot", ".../path:gemm_int8dot"). Decode also on a tensor-parallel rank's
// o_proj and down_proj shards at tp 2, contiguous and as windows of the full rows
// (".../o_tp2/", ".../o_tp2_window/", ".../down_tp2/", ".../down_tp2_window/").
//
// Decode streams weights from DRAM as in a real forward pass: the benchmark cycles through
// enough copies of W (>= 256 MiB in all) that none is left in the 32 MiB L3 from its
// previous use. "hot" variants reuse one copy (an L3/L2 bandwidth figure).
//
//   build-kern/bench/linear_bench --benchmark_filter='avx512/bf16/.*M:1/'
//   ... --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// (the "_max" rows then give the best GB/s and GFLOP/s, "_min" the best time). The best_*
// counters come from the fastest single call: on a shared machine, the kernel's own speed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/linear.h"
#include "kernels/linear_impl.h"
#include "kernels/quantize.h"

#ifdef CPINFER_HAVE_DNNL
#include <dnnl.hpp>
extern "C" void omp_set_num_threads(int);  // libgomp, oneDNN's threading runtime here
#endif

namespace cpinfer {
namespace {

ThreadPool& pool_of(int threads) {
  static ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

struct Shape {
  const char* name;
  int64_t N, K;
  int64_t ld = 0;  // elements between W rows (0: K, contiguous)
  bool decode_only = false;  // registered for M = 1 only
};
// qkv fused (896 + 2 * 128), o_proj, gate+up fused (2 * 4864), down_proj; the LM head
// (151936-token vocabulary) for decode batches only (M <= 64).
const Shape kShapes[] = {{"qkv", 1152, 896}, {"o", 896, 896}, {"gate_up", 9728, 896},
                         {"down", 896, 4864}, {"lm_head", 151936, 896}};
// Decode (M = 1) only: a tensor-parallel rank's o_proj and down_proj at tp 2, contiguous
// (as the loader copies them) and as the window of each row of the full matrix it would
// read in place (ld = the full K).
const Shape kTp2Shapes[] = {{"o_tp2", 896, 448, 0, true}, {"o_tp2_window", 896, 448, 896, true},
                            {"down_tp2", 896, 2432, 0, true},
                            {"down_tp2_window", 896, 2432, 4864, true}};

void BM_linear(benchmark::State& state, Shape shape, DType dtype, int64_t M, int threads,
               Isa isa, bool cold, linear_impl::Path path) {
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported");
    return;
  }
  const Isa saved = active_isa();
  set_active_isa(isa);
  linear_impl::force_path(path);
  const int64_t N = shape.N, K = shape.K, ld = shape.ld > 0 ? shape.ld : K;
  // wbytes: what a call reads; each copy holds N rows of ld elements.
  const size_t wbytes = size_t(dtype_bytes(dtype, N * K)), copy_bytes = size_t(dtype_bytes(dtype, N * ld));
  const size_t copies = cold ? std::max<size_t>(2, (size_t(256) << 20) / copy_bytes + 1) : 1;
  std::vector<std::vector<uint8_t>> w(copies, std::vector<uint8_t>(copy_bytes));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  for (auto& c : w) {
    if (dtype == DType::Q8_0) {  // each row quantized (ld is a multiple of 32 in every shape)
      std::vector<float> row(static_cast<size_t>(ld));
      for (int64_t r = 0; r < N; ++r) {
        for (auto& v : row) v = dist(rng);
        quantize_row_q8_0(row.data(), ld, c.data() + r * dtype_bytes(dtype, ld));
      }
    } else if (dtype == DType::F32) {
      for (size_t i = 0; i < copy_bytes / 4; ++i) {
        float v = dist(rng);
        std::memcpy(c.data() + 4 * i, &v, 4);
      }
    } else {
      for (size_t i = 0; i < copy_bytes / 2; ++i) {
        uint16_t b = bf16(dist(rng)).bits;
        std::memcpy(c.data() + 2 * i, &b, 2);
      }
    }
  }
  std::vector<float> x(size_t(M * K)), y(size_t(M * N)), bias(size_t(N), 0.01f);
  for (auto& v : x) v = dist(rng);
  ThreadPool& pool = pool_of(threads);
  size_t i = 0;
  double best = 1e30;  // fastest single call, seconds
  for (auto _ : state) {
    WeightView wv{w[i].data(), dtype, N, K, ld};
    const auto t0 = std::chrono::steady_clock::now();
    linear(x.data(), M, K, wv, bias.data(), y.data(), N, pool);
    benchmark::ClobberMemory();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                              .count());
    i = (i + 1) % copies;
  }
  const double iters = double(state.iterations()), flop = 2.0 * double(M * N * K);
  state.counters["GB/s"] =
      benchmark::Counter(iters * double(wbytes) / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(iters * flop / 1e9, benchmark::Counter::kIsRate);
  // From the fastest call: what the kernel does when nothing else runs on the machine.
  state.counters["best_GB/s"] = double(wbytes) / best / 1e9;
  state.counters["best_GFLOP/s"] = flop / best / 1e9;
  set_active_isa(saved);
  linear_impl::force_path(linear_impl::Path::Auto);
}

#ifdef CPINFER_HAVE_DNNL
// The same product with oneDNN's matmul: y[M, N] = x[M, K] · W^T, W [N, K] given to oneDNN
// as its [K, N] weights in "ba" order and reordered once into the layout the primitive
// chooses (format any: its packed, blocked form), as an engine would at load. f32: x and W
// f32. bf16: x and W bf16 (x rounded: oneDNN's bf16 matmul takes bf16 sources), y f32.
// Threads: OpenMP's, set to `threads`.
void BM_onednn(benchmark::State& state, Shape shape, bool bf16_math, int64_t M, int threads) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  omp_set_num_threads(threads);
  const int64_t N = shape.N, K = shape.K;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const dt in = bf16_math ? dt::bf16 : dt::f32;
  const memory::desc x_md({M, K}, in, tag::ab), w_any({K, N}, in, tag::any),
      y_md({M, N}, dt::f32, tag::ab), w_user_md({K, N}, dt::f32, tag::ba),
      x_user_md({M, K}, dt::f32, tag::ab);
  // oneDNN has no kernel for some types on some CPUs (bf16 on a CPU without AVX-512, in
  // Debian's 2.6): report it as a skipped benchmark naming why, not an abort.
  matmul::primitive_desc pd;
  try {
    pd = matmul::primitive_desc(matmul::desc(x_md, w_any, y_md), eng);
  } catch (const dnnl::error& e) {
    state.SkipWithError((std::string("oneDNN has no ") + (bf16_math ? "bf16" : "f32") +
                         " matmul for this CPU: " + e.what())
                            .c_str());
    return;
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  std::vector<float> w(size_t(N * K)), x(size_t(M * K)), y(size_t(M * N));
  for (auto& v : w) v = dist(rng);
  for (auto& v : x) v = dist(rng);
  memory w_user(w_user_md, eng, w.data()), x_user(x_user_md, eng, x.data());
  memory w_packed(pd.weights_desc(), eng), x_mem(x_md, eng), y_mem(y_md, eng, y.data());
  reorder(w_user, w_packed).execute(s, w_user, w_packed);  // once, as at load
  reorder(x_user, x_mem).execute(s, x_user, x_mem);        // x to bf16 (or copied)
  const matmul prim(pd);
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    prim.execute(s, {{DNNL_ARG_SRC, x_mem}, {DNNL_ARG_WEIGHTS, w_packed}, {DNNL_ARG_DST, y_mem}});
    s.wait();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                              .count());
  }
  const double flop = 2.0 * double(M * N * K);
  state.counters["GFLOP/s"] =
      benchmark::Counter(double(state.iterations()) * flop / 1e9, benchmark::Counter::kIsRate);
  state.counters["best_GFLOP/s"] = flop / best / 1e9;
  state.SetLabel(pd.impl_info_str());
}

void register_onednn() {
  for (bool bf16_math : {false, true})
    for (const Shape& s : kShapes)
      for (int64_t M : {int64_t(64), int64_t(512), int64_t(2048)})
        if (std::string(s.name) != "lm_head")
        for (int threads : {1, 2}) {
          const std::string name = std::string("onednn/") + (bf16_math ? "bf16" : "f32") + "/" +
                                   s.name + "/K:" + std::to_string(s.K) + "/N:" +
                                   std::to_string(s.N) + "/M:" + std::to_string(M) +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), BM_onednn, s, bf16_math, M, threads)
              ->UseRealTime()
              ->ComputeStatistics("max", [](const std::vector<double>& v) {
                return *std::max_element(v.begin(), v.end());
              })
              ->Unit(benchmark::kMillisecond)
              ->MinTime(1.0);
        }
}
#endif

void register_all() {
#ifdef CPINFER_HAVE_DNNL
  register_onednn();
#else
  std::printf("linear_bench: built without oneDNN (apt install libdnnl-dev and reconfigure "
              "for the onednn/ A/B)\n");
#endif
  for (Isa isa : {Isa::Avx512, Isa::Avx2, Isa::Generic}) {
    for (DType dtype : {DType::BF16, DType::F32, DType::Q8_0}) {
      std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
      shapes.insert(shapes.end(), std::begin(kTp2Shapes), std::end(kTp2Shapes));
      for (const Shape& s : shapes) {
        for (int64_t M : {int64_t(1), int64_t(2), int64_t(4), int64_t(8), int64_t(16), int64_t(32), int64_t(64), int64_t(128), int64_t(256),
                          int64_t(512), int64_t(2048)}) {
          if (std::string(s.name) == "lm_head" && M > 64) continue;
          if (s.decode_only && M > 1) continue;
          for (int threads : {1, 2}) {
            for (bool cold : {true, false}) {
              if (M > 1 && !cold) continue;  // prefill reuses W from L2 anyway
              // Decode batches also run each path by name, to place the crossovers.
              std::vector<std::pair<linear_impl::Path, const char*>> paths = {
                  {linear_impl::Path::Auto, ""}};
              if (M > 1)
                paths = {{linear_impl::Path::Auto, ""},
                         {linear_impl::Path::Gemv, "/path:gemv"},
                         {linear_impl::Path::Skinny, "/path:skinny"},
                         {linear_impl::Path::Gemm, "/path:gemm"}};
              // The bf16-dot GEMM and skinny tiles (AVX512_BF16 CPUs; Auto takes them where
              // bf16 dot math is preferred).
              if (M > 1 && dtype == DType::BF16 && isa == Isa::Avx512 && bf16_dot_supported()) {
                paths.push_back({linear_impl::Path::GemmBf16Dot, "/path:gemm_bf16dot"});
                paths.push_back({linear_impl::Path::SkinnyBf16Dot, "/path:skinny_bf16dot"});
              }
              // Q8_0: the f32 GEMV and the int8-dot GEMV and GEMM by name (AVX512_VNNI CPUs;
              // Auto takes the int8-dot ones where int8 dot math is chosen).
              if (dtype == DType::Q8_0 && isa == Isa::Avx512 && int8_dot_supported()) {
                if (M == 1) paths.push_back({linear_impl::Path::Gemv, "/path:gemv"});
                if (M <= 64) paths.push_back({linear_impl::Path::GemvInt8Dot, "/path:gemv_int8dot"});
                if (M > 1) paths.push_back({linear_impl::Path::GemmInt8Dot, "/path:gemm_int8dot"});
              }
              for (auto [path, path_name] : paths) {
              std::string name = std::string(isa_name(isa)) + "/" +
                                 (dtype == DType::F32 ? "f32" : dtype == DType::BF16 ? "bf16" : "q8_0") + "/" + s.name +
                                 "/K:" + std::to_string(s.K) + "/N:" + std::to_string(s.N) +
                                 "/M:" + std::to_string(M) + "/threads:" +
                                 std::to_string(threads) + (cold ? "" : "/hot") + path_name;
              benchmark::RegisterBenchmark(name.c_str(), BM_linear, s, dtype, M, threads, isa,
                                           cold, path)
                  ->UseRealTime()
                  // With --benchmark_repetitions: the best run, robust to a busy machine.
                  ->ComputeStatistics("min", [](const std::vector<double>& v) {
                    return *std::min_element(v.begin(), v.end());
                  })
                  ->ComputeStatistics("max", [](const std::vector<double>& v) {
                    return *std::max_element(v.begin(), v.end());
                  })
                  ->Unit(M == 1 ? benchmark::kMicrosecond : benchmark::kMillisecond)
                  ->MinTime(M == 1 ? 0.3 : 1.0);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace cpinfer

int main(int argc, char** argv) {
  cpinfer::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
