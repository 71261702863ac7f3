// `cpinfer bench attention`: the attention backend on one synthetic layer shape.
//   --mode prefill: one causal (or --non-causal) sequence of --seq-len tokens attending to
//     itself in the paged cache; gflops counts 2 * 2 * D * Hq * S * S / 2 for causal (the
//     useful half), 2 * 2 * D * Hq * S * S otherwise.
//   --mode decode: --batch sequences of one query token over --context-len cached tokens;
//     gbps counts the bytes of K and V read. The cache holds enough layers (>= 256 MiB) that
//     each timed pass streams KV from DRAM, as a forward pass does; seconds are per layer.
// seconds is the median over --repeats timed runs (after one warm-up). --compare also times
// the flash kernel on 1 thread and the straightforward kernel (paged_attention_reference) on
// 1 and --threads threads, side by side in the same JSON line; --measure-peak adds this
// machine's peaks (src/kernels/peak.h) and the fraction reached.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/stats.h"
#include "attention/kv_cache.h"
#include "attention/page_pool.h"
#include "cli/commands.h"
#include "cli/rank_setup.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/peak.h"

namespace cpinfer {

namespace {

struct AttnArgs {
  std::string mode = "prefill", kv_dtype = "f32", kernel = "flash", bf16_math = "auto";
  int64_t seq_len = 4096, context_len = 4096, batch = 1;
  int64_t num_q_heads = 16, num_kv_heads = 2, head_dim = 128, page_size = 16;
  int threads = 1, repeats = 5, reference_repeats = 1;
  int64_t cold_mib = 256;  // decode: the cache spans at least this much (>> the L3)
  bool non_causal = false, compare = false, measure_peak = false, json = false;
};

// One benchmark problem: the cache (num_layers copies of the same shape), page tables, q.
struct Setup {
  std::unique_ptr<KvCache> cache;
  std::vector<int64_t> q_indptr, kv_lens;
  std::vector<int32_t> page_indptr, page_indices;
  std::vector<float> q, o, lse;
  AttentionBatch batch;
  int64_t num_layers = 1, tokens = 0;
  double flops = 0, kv_bytes = 0;  // per layer call
};

Setup make_setup(const AttnArgs& a, DType dtype) {
  Setup s;
  const bool prefill = a.mode == "prefill";
  const int64_t B = a.batch, L = prefill ? a.seq_len : a.context_len;
  const int64_t q_len = prefill ? a.seq_len : 1;
  const int64_t Hq = a.num_q_heads, Hkv = a.num_kv_heads, D = a.head_dim;
  const int64_t pages_per_seq = (L + a.page_size - 1) / a.page_size;
  const double layer_bytes = double(B * pages_per_seq * a.page_size * Hkv * D) * 2.0 *
                             double(dtype_size(dtype));
  // Decode streams from DRAM: enough layers for >= --cold-mib MiB, so no layer is still in
  // the 32 MiB L3 when its turn comes again. Prefill is compute-bound: one layer.
  s.num_layers = prefill ? 1 : std::max<int64_t>(2, int64_t(std::ceil(double(a.cold_mib) *
                                                                     (1 << 20) / layer_bytes)));
  PagePool pool(int32_t(B * pages_per_seq));
  s.q_indptr = {0};
  s.page_indptr = {0};
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int32_t> pages = pool.allocate(int32_t(pages_per_seq));
    s.page_indices.insert(s.page_indices.end(), pages.begin(), pages.end());
    s.page_indptr.push_back(int32_t(s.page_indices.size()));
    s.kv_lens.push_back(L);
    s.q_indptr.push_back(s.q_indptr.back() + q_len);
  }
  s.tokens = s.q_indptr.back();
  s.cache = std::make_unique<KvCache>(
      KvCacheShape{s.num_layers, B * pages_per_seq, a.page_size, Hkv, D, dtype});
  // Fill every layer with N(0, 1) K/V through append (slot = page * page_size + offset); the
  // layers share values (not addresses).
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t chunk = 1024, row = Hkv * D;
  std::vector<float> k(size_t(chunk * row)), v(k.size());
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  std::vector<int64_t> slots(static_cast<size_t>(chunk));
  for (int64_t layer = 0; layer < s.num_layers; ++layer)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j0 = 0; j0 < L; j0 += chunk) {
        const int64_t n = std::min(chunk, L - j0);
        for (int64_t j = 0; j < n; ++j)
          slots[size_t(j)] = int64_t(s.page_indices[size_t(b * pages_per_seq + (j0 + j) /
                                                           a.page_size)]) * a.page_size +
                             (j0 + j) % a.page_size;
        s.cache->append(layer, k.data(), v.data(), row, slots.data(), n);
      }
  s.q.resize(size_t(s.tokens * Hq * D));
  for (auto& x : s.q) x = nd(rng);
  s.o.assign(s.q.size(), 0.f);
  s.lse.assign(size_t(s.tokens * Hq), 0.f);
  s.batch = AttentionBatch{B, s.q_indptr.data(), s.kv_lens.data(), s.page_indptr.data(),
                           s.page_indices.data(), !a.non_causal};
  const double sd = double(a.seq_len);
  s.flops = prefill ? 4.0 * double(D * Hq) * sd * sd * double(B) * (a.non_causal ? 1.0 : 0.5)
                    : 4.0 * double(D * Hq) * double(L) * double(B);
  s.kv_bytes = double(B * L * Hkv * D) * 2.0 * double(dtype_size(dtype));
  return s;
}

// Median seconds per layer call of `kernel` on a pool of `threads` (and, when `best` is
// given, the fastest pass's: the figure least disturbed by other work on a shared machine).
double time_kernel(const AttnArgs& a, Setup& s, const std::string& kernel, int threads,
                   int repeats, double* best = nullptr) {
  ThreadPool pool(threads);
  const float scale = float(1.0 / std::sqrt(double(a.head_dim)));
  const int64_t ld = a.num_q_heads * a.head_dim;
  AttentionProblem problem = paged_problem(s.batch, a.num_q_heads, s.cache->layer(0), threads);
  problem.bf16_math = a.bf16_math == "dot"     ? Bf16Math::Dot
                      : a.bf16_math == "exact" ? Bf16Math::F32
                                               : Bf16Math::Auto;
  AttentionPlan plan = plan_attention(problem);
  AttentionWorkspace ws;
  ws.reserve(plan);
  auto pass = [&] {  // one call per layer, as a forward pass makes them
    for (int64_t l = 0; l < s.num_layers; ++l) {
      if (kernel == "flash")
        run_attention(plan, s.q.data(), ld, s.cache->layer(l), scale, s.o.data(), ld,
                      s.lse.data(), ws, pool);
      else
        paged_attention_reference(s.q.data(), ld, a.num_q_heads, s.cache->layer(l), s.batch,
                                  scale, s.o.data(), ld, s.lse.data(), pool);
    }
  };
  // Warm-up (pages touched, threads awake); skipped for a prefill of the straightforward
  // kernel, which takes minutes at long lengths and has nothing to warm.
  if (kernel == "flash" || a.mode == "decode") pass();
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = steady_seconds();
    pass();
    t.push_back((steady_seconds() - t0) / double(s.num_layers));
  }
  if (best) *best = *std::min_element(t.begin(), t.end());
  return median(t);
}

nlohmann::json figures(const AttnArgs& a, const Setup& s, double seconds) {
  nlohmann::json j;
  j["seconds"] = seconds;
  j["gflops"] = s.flops / seconds * 1e-9;  // decode too: it shows when decode is compute-bound
  if (a.mode == "decode") j["gbps"] = s.kv_bytes / seconds * 1e-9;
  return j;
}

int run_bench_attention(const AttnArgs& a) {
  CPI_CHECK(a.mode == "prefill" || a.mode == "decode", "--mode '{}' is not prefill or decode",
            a.mode);
  CPI_CHECK(a.kernel == "flash" || a.kernel == "reference",
            "--kernel '{}' is not flash or reference", a.kernel);
  CPI_CHECK(a.bf16_math == "auto" || a.bf16_math == "dot" || a.bf16_math == "exact",
            "--bf16-math '{}' is not auto, dot or exact", a.bf16_math);
  const DType dtype = resolve_kv_dtype(a.kv_dtype, "");  // no model: auto is f32
  CPI_CHECK(a.num_kv_heads > 0 && a.num_q_heads % a.num_kv_heads == 0,
            "--num-q-heads {} is not a multiple of --num-kv-heads {}", a.num_q_heads,
            a.num_kv_heads);
  Setup s = make_setup(a, dtype);
  nlohmann::json j;
  j["mode"] = a.mode;
  j["kernel"] = a.kernel;
  j["isa"] = std::string(isa_name(active_isa()));
  if (a.mode == "prefill") {
    j["seq_len"] = a.seq_len;
    j["causal"] = !a.non_causal;
  } else {
    j["context_len"] = a.context_len;
  }
  j["batch"] = a.batch;
  j["num_q_heads"] = a.num_q_heads;
  j["num_kv_heads"] = a.num_kv_heads;
  j["head_dim"] = a.head_dim;
  j["page_size"] = a.page_size;
  j["kv_cache_dtype"] = std::string(dtype == DType::BF16 ? "bf16" : "f32");
  if (dtype == DType::BF16) {
    j["bf16_math"] = a.bf16_math;
    // What tasks over the bf16 cache ran (decode and prefill): bf16 dot products need
    // AVX512_BF16 and the AVX-512 kernels.
    const bool dot = (a.bf16_math == "dot" || (a.bf16_math == "auto" && bf16_dot_preferred())) &&
                     __builtin_cpu_supports("avx512bf16") && active_isa() == Isa::Avx512;
    j["bf16_math_used"] = dot ? "dot" : "exact";
  }
  j["threads"] = a.threads;
  j["repeats"] = a.repeats;
  double best = 0;
  const double sec = time_kernel(a, s, a.kernel, a.threads, a.repeats, &best);
  j.update(figures(a, s, sec));
  j["seconds_best"] = best;
  if (a.mode == "decode") j["gbps_best"] = s.kv_bytes / best * 1e-9;
  if (a.compare) {
    nlohmann::json rows = nlohmann::json::array();
    auto add = [&](const std::string& kernel, int threads, double seconds) {
      nlohmann::json r = figures(a, s, seconds);
      r["kernel"] = kernel;
      r["threads"] = threads;
      rows.push_back(r);
      return seconds;
    };
    const double flash_n = a.kernel == "flash" ? sec : time_kernel(a, s, "flash", a.threads,
                                                                   a.repeats);
    const double flash_1 = a.threads == 1 ? flash_n : time_kernel(a, s, "flash", 1, a.repeats);
    const double ref_1 = time_kernel(a, s, "reference", 1, a.reference_repeats);
    const double ref_n = a.threads == 1 ? ref_1
                                        : time_kernel(a, s, "reference", a.threads,
                                                      a.reference_repeats);
    add("flash", 1, flash_1);
    if (a.threads > 1) add("flash", a.threads, flash_n);
    add("reference", 1, ref_1);
    if (a.threads > 1) add("reference", a.threads, ref_n);
    j["compare"] = rows;
    j["speedup_vs_reference"] = ref_n / flash_n;
    j["thread_scaling_flash"] = flash_1 / flash_n;
    j["thread_scaling_reference"] = ref_1 / ref_n;
  }
  if (a.measure_peak) {
    ThreadPool pool(a.threads);
    PeakOptions po;
    po.seconds = 0.2;
    po.repeats = 3;
    po.read_bytes = int64_t(512) << 20;
    PeakResult p = measure_peak(pool, po);
    const double fma = (a.threads == 1 ? p.fma_gflops_1t : p.fma_gflops_nt) * a.threads;
    const double bw = a.threads == 1 ? p.read_gbps_1t : p.read_gbps_nt;
    j["peak_fma_gflops"] = fma;
    j["peak_read_gbps"] = bw;
    if (a.mode == "prefill") j["fraction_of_peak"] = double(j["gflops"]) / fma;
    else j["fraction_of_peak"] = double(j["gbps"]) / bw;
  }
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s\n", j.dump(2).c_str());
  }
  return 0;
}

}  // namespace

void register_bench_attention(CLI::App& bench, CommandAction* action) {
  auto a = std::make_shared<AttnArgs>();
  auto* cmd = bench.add_subcommand("attention", "Time the attention backend on one layer shape");
  cmd->add_option("--mode", a->mode, "prefill | decode")->capture_default_str();
  cmd->add_option("--seq-len", a->seq_len, "Prefill: tokens of the sequence")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--context-len", a->context_len, "Decode: cached tokens per sequence")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--batch", a->batch, "Sequences")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--num-q-heads", a->num_q_heads, "Query heads")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1024)));
  cmd->add_option("--num-kv-heads", a->num_kv_heads, "KV heads")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1024)));
  cmd->add_option("--head-dim", a->head_dim, "Head dimension")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(512)));
  cmd->add_option("--cold-mib", a->cold_mib,
                  "Decode: layers of KV cache to cycle through, in MiB (>> L3 keeps it cold)")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--page-size", a->page_size, "KV page size in tokens")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(256)));
  cmd->add_option("--kv-cache-dtype", a->kv_dtype, "auto | f32 | bf16")->capture_default_str();
  cmd->add_option("--threads", a->threads, "Threads")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--repeats", a->repeats, "Timed runs (median reported)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--kernel", a->kernel, "flash | reference (the straightforward version)")
      ->capture_default_str();
  cmd->add_option("--bf16-math", a->bf16_math,
                  "bf16 cache: auto (dot where the CPU's bf16 dot unit outruns its f32 FMAs) | "
                  "dot (bf16 dot products for decode where the CPU has them) | "
                  "exact (f32 arithmetic)")->capture_default_str();
  cmd->add_flag("--non-causal", a->non_causal, "Prefill without the causal mask");
  cmd->add_flag("--compare", a->compare,
                "Also time flash on 1 thread and reference on 1 and --threads threads");
  cmd->add_option("--reference-repeats", a->reference_repeats, "Timed runs of the reference")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_flag("--measure-peak", a->measure_peak, "Add this machine's peaks and the fraction");
  cmd->add_flag("--json", a->json, "Print one JSON line");
  cmd->callback([a, action] { *action = [a] { return run_bench_attention(*a); }; });
}

}  // namespace cpinfer
