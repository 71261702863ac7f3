// `cpinfer plan`: which layout to run a model at a context length on a cluster. Calibrates
// this machine's per-core rates with short runs of the engine's own kernels on the model's
// shapes (model/layout_calibration.h), then predicts every valid (tp, pcp,
// dcp, interleave) with the cost model of model/layout_cost.h and recommends the layout that
// fits in memory and minimises TTFT + output_len x ITL (the time of one request). With
// --concurrency B the decode step, the KV and the memory check hold B sequences of
// --context-len tokens each, and each layout also reports how many such sequences fit.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/commands.h"
#include "cli/rank_setup.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "dist/launcher.h"
#include "model/layout_calibration.h"
#include "model/layout_cost.h"
#include "model/model_config.h"

namespace cpinfer {

namespace {

struct PlanArgs {
  std::string model, kv_dtype = "auto";
  int64_t context_len = 0, hosts = 1, cores_per_host = 0, block_size = 16, output_len = 256;
  int64_t concurrency = 1;
  double link_gbps = 25, memory_gib = 0, link_latency_us = 50;
  double gemm_gflops = 0, attn_gflops = 0, read_gbps = 0, local_gbps = 0, weight_read_gbps = 0;
  double lm_head_read_gbps = 0, weight_read_alone_gbps = 0;
  bool json = false, oversubscribe = false;
  int top = 15;
};

double host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0.0;
}

nlohmann::json estimate_json(const LayoutEstimate& e) {
  const LayoutChoice& l = e.layout;
  return {{"tp", l.tp}, {"pcp", l.pcp}, {"dcp", l.dcp}, {"interleave", l.interleave},
          {"threads_per_rank", l.threads_per_rank}, {"ranks", e.ranks},
          {"ranks_per_host", e.ranks_per_host}, {"ttft_s", e.ttft_s}, {"itl_s", e.itl_s},
          {"prefill_compute_s", e.prefill_compute_s}, {"prefill_comm_s", e.prefill_comm_s},
          {"decode_read_s", e.decode_read_s}, {"decode_comm_s", e.decode_comm_s},
          {"kv_bytes_per_rank", e.kv_bytes_per_rank},
          {"weight_bytes_per_rank", e.weight_bytes_per_rank},
          {"memory_bytes_per_host", e.memory_bytes_per_host},
          {"comm_bytes_per_step", e.comm_bytes_per_step},
          {"comm_bytes_decode_step", e.comm_bytes_decode_step},
          {"decode_tokens_per_s", e.decode_tokens_per_s},
          {"max_concurrency",
           e.max_concurrency < 0 ? nlohmann::json(nullptr) : nlohmann::json(e.max_concurrency)},
          {"fits", e.fits}};
}

std::string layout_name(const LayoutChoice& l) {
  std::string s = "tp " + std::to_string(l.tp) + " x pcp " + std::to_string(l.pcp);
  if (l.dcp > 1) s += " x dcp " + std::to_string(l.dcp);
  if (l.pcp * l.dcp > 1) s += ", interleave " + std::to_string(l.interleave);
  return s;
}

int run_plan(const PlanArgs& a) {
  CPI_CHECK(a.context_len >= 1, "--context-len must be >= 1, found {}", a.context_len);
  const ModelConfig c = load_model_config(a.model);
  // auto: the model's dtype, as serve and generate resolve it.
  const int64_t kv_bytes = int64_t(dtype_size(resolve_kv_dtype(a.kv_dtype, c.torch_dtype)));
  MachineSpec m;
  m.hosts = a.hosts;
  m.cores_per_host = a.cores_per_host > 0 ? a.cores_per_host : available_cpus();
  m.memory_bytes_per_host = a.memory_gib > 0 ? a.memory_gib * double(int64_t(1) << 30)
                                             : host_memory_bytes();
  m.link_gbps = a.link_gbps;
  m.link_latency_s = a.link_latency_us * 1e-6;
  m.oversubscribe = a.oversubscribe;
  // Every rate given on the command line: nothing to calibrate (projections with fixed
  // constants, scripts).
  const bool given = a.gemm_gflops > 0 && a.attn_gflops > 0 && a.read_gbps > 0 && a.local_gbps > 0;
  const std::vector<LayoutChoice> layouts = candidate_layouts(c, m, a.block_size);
  CPI_CHECK(!layouts.empty(), "no valid layout for {} hosts of {} cores and this model's {} q / "
            "{} KV heads", m.hosts, m.cores_per_host, c.num_q_heads, c.num_kv_heads);
  // The decode row counts the layouts need: rank 0's rows of the layers, every row of the
  // LM head (layout_cost.h).
  std::set<int64_t> decode_rows = {a.concurrency};
  for (const LayoutChoice& l : layouts) decode_rows.insert(decode_layer_rows(l, a.concurrency));
  LayoutCalibration cal;
  if (!given) {
    if (!a.json) {
      std::fprintf(stderr, "calibrating this machine's kernels (a few seconds)...\n");
      std::fflush(stderr);
    }
    cal = calibrate_layout_rates(c, kv_bytes, global_pool(), decode_rows);
  }
  m.gemm_gflops_per_core = a.gemm_gflops > 0 ? a.gemm_gflops : cal.gemm_gflops_per_core;
  m.attn_gflops_per_core = a.attn_gflops > 0 ? a.attn_gflops : cal.attn_gflops_per_core;
  m.read_gbps_per_core = a.read_gbps > 0 ? a.read_gbps : cal.read_gbps_per_core;
  // Projections that give every rate without this one keep the streaming rate for weights.
  m.weight_read_gbps_per_core = a.weight_read_gbps > 0 ? a.weight_read_gbps
                                : given                ? m.read_gbps_per_core
                                                       : cal.weight_read_gbps_per_core;
  m.lm_head_read_gbps_per_core = a.lm_head_read_gbps > 0 ? a.lm_head_read_gbps
                                 : given                 ? m.weight_read_gbps_per_core
                                                         : cal.lm_head_read_gbps_per_core;
  // The rates at several rows belong to the calibrated one-row rates: an override of a
  // one-row rate drops its pass's (the roofline from the given rate then applies). With
  // every rate given nothing was calibrated and both are empty.
  if (a.weight_read_gbps <= 0) m.weight_read_gbps_at_rows = cal.weight_read_gbps_at_rows;
  if (a.lm_head_read_gbps <= 0) m.lm_head_read_gbps_at_rows = cal.lm_head_read_gbps_at_rows;
  // The layers' one-thread-alone rate, likewise: given, or calibrated unless the all-busy
  // rate it goes with was overridden (0: none, the all-busy rate applies).
  m.weight_read_gbps_alone = a.weight_read_alone_gbps > 0 ? a.weight_read_alone_gbps
                             : a.weight_read_gbps > 0     ? 0.0
                                                          : cal.weight_read_gbps_alone;
  // MPI's shared-memory transport copies through a buffer: about half of one core's
  // streaming read rate per rank.
  m.local_gbps = a.local_gbps > 0 ? a.local_gbps : cal.read_gbps_1t / 2;

  std::vector<LayoutEstimate> est;
  for (const LayoutChoice& l : layouts)
    est.push_back(estimate_layout(c, l, m, a.context_len, kv_bytes, a.concurrency));
  auto score = [&](const LayoutEstimate& e) { return e.ttft_s + double(a.output_len) * e.itl_s; };
  std::stable_sort(est.begin(), est.end(), [&](const LayoutEstimate& x, const LayoutEstimate& y) {
    if (x.fits != y.fits) return x.fits;
    return score(x) < score(y);
  });
  const LayoutEstimate* best = est.front().fits ? &est.front() : nullptr;

  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["context_len"] = a.context_len;
    j["kv_cache_dtype"] = kv_bytes == 2 ? "bf16" : "f32";
    j["output_len"] = a.output_len;
    j["concurrency"] = a.concurrency;
    j["machine"] = {{"hosts", m.hosts}, {"cores_per_host", m.cores_per_host},
                    {"memory_bytes_per_host", m.memory_bytes_per_host},
                    {"link_gbps", m.link_gbps}, {"link_latency_s", m.link_latency_s},
                    {"local_gbps", m.local_gbps}, {"local_latency_s", m.local_latency_s},
                    {"gemm_gflops_per_core", m.gemm_gflops_per_core},
                    {"attention_gflops_per_core", m.attn_gflops_per_core},
                    {"read_gbps_per_core", m.read_gbps_per_core},
                    {"weight_read_gbps_per_core", m.weight_read_gbps_per_core},
                    {"lm_head_read_gbps_per_core", m.lm_head_read_gbps_per_core},
                    {"weight_read_gbps_alone", m.weight_read_gbps_alone}};
    if (given) j["calibration"] = nullptr;
    else j["calibration"] = {{"threads", cal.threads},
                        {"rounds", cal.rounds},
                        {"gemm_gflops_per_core", cal.gemm_gflops_per_core},
                        {"attention_gflops_per_core", cal.attn_gflops_per_core},
                        {"read_gbps_per_core", cal.read_gbps_per_core},
                        {"weight_read_gbps_per_core", cal.weight_read_gbps_per_core},
                        {"lm_head_read_gbps_per_core", cal.lm_head_read_gbps_per_core},
                        {"weight_read_gbps_alone", cal.weight_read_gbps_alone},
                        {"read_gbps_1t", cal.read_gbps_1t},
                        {"fma_gflops_1t", cal.fma_gflops_1t}};
    if (!given) {
      // The rates at more rows than one, as measured (before any override).
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& [r, gbps] : cal.weight_read_gbps_at_rows)
        rows.push_back({{"rows", r}, {"weight_read_gbps_per_core", gbps},
                        {"lm_head_read_gbps_per_core", cal.lm_head_read_gbps_at_rows.at(r)}});
      j["calibration"]["decode_rows"] = rows;
    }
    j["layouts"] = nlohmann::json::array();
    for (const LayoutEstimate& e : est) j["layouts"].push_back(estimate_json(e));
    j["recommended"] = best ? estimate_json(*best) : nlohmann::json(nullptr);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s at %lld tokens%s (KV %s), %lld host(s) x %lld cores, %.0f Gbit/s, %.1f GiB per host\n",
              a.model.c_str(), (long long)a.context_len,
              a.concurrency > 1
                  ? (" x " + std::to_string(a.concurrency) + " sequences decoding together").c_str()
                  : "",
              kv_bytes == 2 ? "bf16" : "f32",
              (long long)m.hosts, (long long)m.cores_per_host, m.link_gbps,
              m.memory_bytes_per_host / double(int64_t(1) << 30));
  std::printf("%s per core: GEMM %.1f GFLOP/s, attention %.1f GFLOP/s, read %.1f GB/s, "
              "decode layers %.1f GB/s, LM head %.1f GB/s; within a host %.1f GB/s per rank",
              given ? "given" : "calibrated", m.gemm_gflops_per_core, m.attn_gflops_per_core,
              m.read_gbps_per_core, m.weight_read_gbps_per_core, m.lm_head_read_gbps_per_core,
              m.local_gbps);
  if (m.weight_read_gbps_alone > 0)
    std::printf("; decode layers on one thread alone %.1f GB/s", m.weight_read_gbps_alone);
  std::printf("\n\n");
  std::printf("%-34s %8s %10s %10s %10s %12s %12s %9s %5s\n", "layout", "threads", "ttft_s",
              "itl_s", "decode t/s", "kv/rank GiB", "comm/step MB", "max seqs", "fits");
  // The interleave changes only how evenly the KV spreads (at most one unit): a layout that
  // differs from the row above only by it is not printed again.
  int shown = 0;
  size_t i = 0;
  for (; i < est.size() && shown < a.top; ++i) {
    const LayoutEstimate& e = est[i];
    if (i > 0) {
      const LayoutEstimate& p = est[i - 1];
      if (p.layout.tp == e.layout.tp && p.layout.pcp == e.layout.pcp &&
          p.layout.dcp == e.layout.dcp && p.ttft_s == e.ttft_s && p.itl_s == e.itl_s &&
          p.kv_bytes_per_rank == e.kv_bytes_per_rank)
        continue;
    }
    ++shown;
    const std::string max_seqs = e.max_concurrency < 0 ? "-" : std::to_string(e.max_concurrency);
    std::printf("%-34s %8lld %10.3f %10.4f %10.1f %12.3f %12.2f %9s %5s\n",
                layout_name(e.layout).c_str(), (long long)e.layout.threads_per_rank, e.ttft_s,
                e.itl_s, e.decode_tokens_per_s, e.kv_bytes_per_rank / double(int64_t(1) << 30),
                e.comm_bytes_per_step / 1e6, max_seqs.c_str(), e.fits ? "yes" : "no");
  }
  if (i < est.size()) std::printf("... %zu more (--top N, or --json for all)\n", est.size() - i);
  if (best)
    std::printf("\nrecommended: %s, %lld thread(s) per rank (TTFT %.3f s, ITL %.4f s)\n",
                layout_name(best->layout).c_str(), (long long)best->layout.threads_per_rank,
                best->ttft_s, best->itl_s);
  else
    std::printf("\nno layout fits in %.1f GiB per host\n", m.memory_bytes_per_host / double(int64_t(1) << 30));
  if (a.context_len > derived_max_model_len(c) && derived_max_model_len(c) > 0)
    std::printf("note: %lld tokens exceed the model's context length %lld\n",
                (long long)a.context_len, (long long)derived_max_model_len(c));
  return 0;
}

}  // namespace

void register_plan(CLI::App& app, CommandAction* action) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Predict TTFT, ITL, KV and communication of every valid layout and recommend one");
  cmd->add_option("--model", a->model, "Hugging Face model directory (config.json is enough)")
      ->required();
  cmd->add_option("--context-len", a->context_len, "Prompt tokens")->required()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  cmd->add_option("--hosts", a->hosts, "Hosts")->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--cores-per-host", a->cores_per_host, "Cores per host (default: this machine's)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--link-gbps", a->link_gbps, "Link between hosts, Gbit/s")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--link-latency-us", a->link_latency_us, "Latency per collective step between hosts, us")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--memory-gib", a->memory_gib, "Memory per host, GiB (default: this machine's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-cache-dtype", a->kv_dtype, "KV-cache storage: auto|f32|bf16")
      ->capture_default_str();
  cmd->add_option("--block-size", a->block_size, "KV page size (the largest interleave tried)")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 16));
  cmd->add_option("--output-len", a->output_len,
                  "Generated tokens the recommendation weighs: TTFT + output_len x ITL")
      ->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  cmd->add_option("--concurrency", a->concurrency,
                  "Sequences decoding together, each of --context-len tokens: the decode step "
                  "(ITL), the KV per rank and the memory check hold them all")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--gemm-gflops-per-core", a->gemm_gflops, "Override the calibrated GEMM rate")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--attention-gflops-per-core", a->attn_gflops,
                  "Override the calibrated attention rate")->check(CLI::PositiveNumber);
  cmd->add_option("--weight-read-gbps-per-core", a->weight_read_gbps,
                  "Override the calibrated decode GEMV rate over the weights (GB/s per core; "
                  "default with every other rate given: the read bandwidth); with "
                  "--concurrency, more rows than one then take the roofline of this rate and "
                  "the GEMM rate")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--lm-head-read-gbps-per-core", a->lm_head_read_gbps,
                  "Override the calibrated one-row LM head GEMV rate (GB/s per core; default "
                  "with every other rate given: the decode GEMV rate); with --concurrency, more "
                  "rows than one then take the roofline of this rate and the GEMM rate")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--weight-read-gbps-alone", a->weight_read_alone_gbps,
                  "Override the calibrated one-row decode GEMV rate of one thread with the other "
                  "cores idle (GB/s; on one host, a decode step with fewer decodes than PCP ranks "
                  "reads the layers on the busy ranks' cores at up to this rate)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--read-gbps-per-core", a->read_gbps, "Override the calibrated read bandwidth")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--local-gbps", a->local_gbps,
                  "Transfer rate between ranks of one host, GB/s (default: half a core's read rate)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--oversubscribe", a->oversubscribe,
                "Also consider more ranks than cores on one host (up to 2 per core)");
  cmd->add_option("--top", a->top, "Layouts printed (text output)")->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_flag("--json", a->json, "One JSON object: layouts, recommended, machine, calibration");
  cmd->callback([a, action] { *action = [a] { return run_plan(*a); }; });
}

}  // namespace cpinfer
