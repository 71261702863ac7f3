// `cpinfer bench latency`: one request of --input-len random prompt tokens and
// --output-len generated tokens, repeated --num-iters times (after --warmup runs) under any
// layout, like `vllm bench latency`. Prints one JSON line with medians:
//   ttft_s        start of the prefill -> first token sampled (rank 0)
//   itl_s         inter-token latency: one decode step, sampling included
//   comm_s        time rank 0 spent inside collectives during the prefill
//   comm_decode_s time rank 0 spent inside collectives per decode step
//   kv_gather_s   time of the PCP K/V gathers of the prefill (all layers); with overlap
//                 they run beside the attention over each rank's own rows, and
//                 kv_gather_exposed_s is the part rank 0 waited for; comm_exposed_s =
//                 comm_s minus the hidden part (comm_exposed_share_prefill: / ttft_s)
//   comm_bytes    bytes rank 0 received from other ranks, by traffic kind (kv_gather,
//                 query_gather, dcp_combine, pcp_combine, hidden_gather, logits_gather,
//                 tp_all_reduce, control) and in total: "prefill" for the prompt's step,
//                 "decode" per decode step (mean); textbook algorithm volumes as defined in
//                 docs/context-parallel.md §11 (comm_bytes_model: the same from its formulas)
//   kv_bytes_per_rank  K/V bytes one rank holds for this request at its end (rank 0's
//                 share, the largest: up to one interleave unit over L / W)
//   kv_bytes_without_cp  the same rank's figure with W = 1 (same TP), for the ratio
//   mfu           prefill: model FLOPs (linear layers, causal attention, LM head of the last
//                 token; model_cost.h) / (ttft_s x the peak of the cores used on mfu_unit,
//                 the unit the linear layers ran on: bf16_dot, int8_vnni512 (Q8_0 weights
//                 on int8 dot products; 2 operations per multiply-add) or fp32_fma);
//                 cores used = min(ranks x threads per rank, CPUs), the per-core peak is
//                 measured by this binary after the timed runs (as `bench peak`)
//   phases        with --profile: per phase of the forward pass, rank 0's mean ms per
//                 prefill / per decode token, its share of the step, and busy_threads (pool
//                 threads' time in tasks / wall time: 2.0 = both threads busy throughout)
//   mbu           decode: bytes read per token (weights once, K/V of the mean context) /
//                 (itl_s x the DRAM read bandwidth of rank 0's threads): on one rank the
//                 median of 3 short samples taken right after each timed iteration
//                 (peak_read_gbps_min / _max give their spread), with more ranks measured
//                 after the run
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "cli/rank_setup.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "cp/cp_layout.h"
#include "dist/comm.h"
#include "dist/launcher.h"
#include "engine/step_executor.h"
#include "core/phase_profile.h"
#include "kernels/linear.h"
#include "kernels/peak.h"
#include "kernels/peak_units.h"
#include "kernels/sampling.h"
#include "model/comm_volume.h"
#include "model/model_cost.h"

namespace cpinfer {

namespace {

struct LatencyArgs {
  std::string model, kv_dtype = "f32";
  int64_t input_len = 512, output_len = 32;
  int num_iters = 3, warmup = 1, threads_per_rank = 0;
  uint64_t seed = 0;
  bool json = false, profile = false, no_overlap_comm = false;
  std::string overlap_comm = "auto";
  std::string quantization = "none";
  std::string timeline;
  LayoutSpec layout;
};

// Per-phase totals of the timed iterations (core/phase_profile.h), prefill and decode apart.
struct PhaseTotals {
  PhaseTable prefill{}, decode{};
  int64_t decode_steps = 0, prefills = 0;
  // Wall time of the same profiled steps: the denominator of each phase's share, so that the
  // shares of disjoint phases sum to at most 1 even when one step is an outlier (a median step
  // time would not match the phases' means).
  double prefill_s = 0, decode_s = 0;
};

void add_into(PhaseTable& into, const PhaseTable& t) {
  for (int i = 0; i < kNumPhases; ++i) {
    into[size_t(i)].wall_s += t[size_t(i)].wall_s;
    into[size_t(i)].busy_thread_s += t[size_t(i)].busy_thread_s;
    into[size_t(i)].calls += t[size_t(i)].calls;
  }
}

// [{phase, ms (mean per prefill or per decode token), share, busy_threads}], where share =
// the phase's wall time / the wall time of all profiled steps, and busy_threads = pool threads'
// time in tasks / wall time (2.0: both threads busy throughout).
nlohmann::json phases_json(const PhaseTable& t, int64_t per, double total_step_s) {
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < kNumPhases; ++i) {
    const PhaseStats& s = t[size_t(i)];
    if (s.calls == 0) continue;
    const double wall = s.wall_s / double(std::max<int64_t>(per, 1));
    out.push_back({{"phase", phase_name(Phase(i))},
                   {"ms", 1e3 * wall},
                   {"share", total_step_s > 0 ? s.wall_s / total_step_s : 0.0},
                   {"busy_threads", s.wall_s > 0 ? s.busy_thread_s / s.wall_s : 0.0}});
  }
  return out;
}

// Bytes received per traffic kind (Comm::stats(Traffic).recv_bytes).
using TrafficBytes = std::array<double, kNumTraffic>;

TrafficBytes traffic_bytes(const Comm& comm) {
  TrafficBytes b{};
  for (int i = 0; i < kNumTraffic; ++i) b[size_t(i)] = double(comm.stats(Traffic(i)).recv_bytes);
  return b;
}

nlohmann::json traffic_json(const TrafficBytes& b) {
  nlohmann::json j = nlohmann::json::object();
  double total = 0;
  for (int i = 0; i < kNumTraffic; ++i) {
    j[std::string(traffic_name(Traffic(i)))] = b[size_t(i)];
    total += b[size_t(i)];
  }
  j["total"] = total;
  return j;
}

struct IterTimes {
  double ttft = 0, comm_prefill = 0;
  std::vector<double> itl, comm_decode;
  TrafficBytes bytes_prefill{}, bytes_decode{};  // decode: mean per step
  StepAttention::OverlapStats overlap;            // the prefill's PCP K/V gathers
  std::vector<StepAttention::LayerTimes> timeline;
  double t0 = 0;                                  // the prefill's start (steady clock)
};

// One request through the executor (rank 0), timing each step.
IterTimes run_once(StepExecutor& exec, const std::vector<int32_t>& prompt, int64_t output_len,
                   Comm& comm, PhaseTotals* prof) {
  ThreadPool& pool = global_pool();
  const int64_t V = exec.runner().config().vocab_size;
  IterTimes t;
  StepPlan plan;
  plan.seqs = {{0, int64_t(prompt.size()), 0}};
  plan.tokens = prompt;
  comm.reset_stats();
  if (prof) take_phase_profile();
  double t0 = steady_seconds();
  int32_t tok = argmax(exec.run(plan).data(), V, pool);
  t.ttft = steady_seconds() - t0;
  if (prof) {
    add_into(prof->prefill, take_phase_profile());
    prof->prefills += 1;
    prof->prefill_s += t.ttft;
  }
  t.comm_prefill = comm.stats().seconds;
  t.bytes_prefill = traffic_bytes(comm);
  t.t0 = t0;
  t.overlap = exec.runner().attention().take_overlap_stats();
  t.timeline = exec.runner().attention().layer_times();
  for (int64_t i = 1; i < output_len; ++i) {
    plan.seqs[0].begin += plan.seqs[0].num_tokens;
    plan.seqs[0].num_tokens = 1;
    plan.tokens = {tok};
    comm.reset_stats();
    double s = steady_seconds();
    tok = argmax(exec.run(plan).data(), V, pool);
    t.itl.push_back(steady_seconds() - s);
    t.comm_decode.push_back(comm.stats().seconds);
    const TrafficBytes b = traffic_bytes(comm);
    for (int k = 0; k < kNumTraffic; ++k)
      t.bytes_decode[size_t(k)] += b[size_t(k)] / double(output_len - 1);
  }
  if (prof) {
    add_into(prof->decode, take_phase_profile());
    prof->decode_steps += output_len - 1;
    for (double x : t.itl) prof->decode_s += x;
  }
  StepPlan rel;
  rel.kind = StepPlan::Kind::Pages;
  rel.page_ops.push_back({PageOp::ReleaseSeq, -1, 0, -1, -1, 0, 0});
  exec.run(rel);
  return t;
}

int run_latency(const LatencyArgs& a) {
  Comm& comm = Comm::world();
  const RankModel rm = setup_rank(a.model, a.layout, comm);
  const ModelConfig& config = rm.config;
  const ParallelLayout& layout = rm.layout;
  RunnerOptions ro;
  ro.page_size = a.layout.page_size;
  ro.kv_dtype = resolve_kv_dtype(a.kv_dtype, config.torch_dtype);
  ro.quantization = parse_weight_quantization(a.quantization);
  ro.max_cache_tokens = a.input_len + a.output_len;
  ro.overlap_comm = a.no_overlap_comm ? OverlapMode::Off : parse_overlap_mode(a.overlap_comm);
  ModelRunner runner(a.model, ro, global_pool(), &layout, &comm);
  StepExecutor exec(runner, &comm);
  if (!exec.is_driver()) {
    exec.worker_loop();
    return 0;
  }
  Rng rng(a.seed);
  std::vector<double> ttft, itl, comm_p, comm_d, read_gbps;
  TrafficBytes bytes_prefill{}, bytes_decode{};  // of the last timed iteration
  std::vector<double> gather_s, exposed_s;
  IterTimes last;
  PhaseTotals prof;
  set_phase_profiling(a.profile);
  // On one rank the read bandwidth is sampled right after every timed iteration (the same
  // time window as the decode it divides: this VM's bandwidth drifts between ~32 and ~51
  // GB/s over minutes); with more ranks, after the run, when the other ranks have left.
  std::unique_ptr<ReadProbe> probe;
  if (comm.size() == 1) probe = std::make_unique<ReadProbe>(int64_t(512) << 20, global_pool());
  for (int it = 0; it < a.warmup + a.num_iters; ++it) {
    std::vector<int32_t> prompt(static_cast<size_t>(a.input_len));
    for (auto& t : prompt) t = int32_t(rng.next() % uint64_t(std::min<int64_t>(config.vocab_size, 151643)));
    IterTimes t = run_once(exec, prompt, a.output_len, comm,
                           a.profile && it >= a.warmup ? &prof : nullptr);
    if (it < a.warmup) continue;
    ttft.push_back(t.ttft);
    comm_p.push_back(t.comm_prefill);
    itl.insert(itl.end(), t.itl.begin(), t.itl.end());
    comm_d.insert(comm_d.end(), t.comm_decode.begin(), t.comm_decode.end());
    bytes_prefill = t.bytes_prefill;
    bytes_decode = t.bytes_decode;
    gather_s.push_back(t.overlap.gather_s);
    exposed_s.push_back(t.overlap.exposed_s);
    last = t;
    if (probe)
      for (int r = 0; r < 3; ++r) read_gbps.push_back(probe->measure(0.1));
    CPI_LOG_INFO("iteration {}: ttft {:.3f}s, median itl {:.4f}s", it - a.warmup, t.ttft,
                 median(t.itl));
  }
  probe.reset();
  exec.shutdown();
  // The machine's peaks, measured now that the other ranks are idle.
  PeakOptions po;
  po.seconds = 0.2;
  po.repeats = 3;
  po.read_bytes = int64_t(512) << 20;
  const PeakResult peak = measure_peak(global_pool(), po);
  if (read_gbps.empty()) read_gbps.push_back(peak.read_gbps_nt);
  const int64_t cores = std::min<int64_t>(int64_t(comm.size()) * global_pool().size(),
                                          available_cpus());
  const double flops = prefill_flops(config, a.input_len);
  const int64_t kv_elem = int64_t(dtype_size(ro.kv_dtype));
  const int64_t kv_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim * kv_elem;
  // Mean context over the timed decode steps: input_len + 1 ... input_len + output_len - 1.
  const int64_t mean_context = a.input_len + a.output_len / 2;
  // Q8_0 (converted at load, or a GGUF file's own blocks): 34 bytes per 32 weights.
  const bool q8 = runner.q8_weights();
  const double weight_bytes = q8
                                  ? double(kQ8BlockBytes) / double(kQ8BlockElems)
                                  : double(weight_bytes_of(config));
  const double bytes = decode_bytes_per_token(config, weight_bytes, mean_context, kv_token);
  const CpLayout& cp = runner.cp_layout();
  const int64_t cached = a.input_len + a.output_len - 1;
  nlohmann::json j;
  j["model"] = a.model;
  j["input_len"] = a.input_len;
  j["output_len"] = a.output_len;
  j["num_iters"] = a.num_iters;
  j["layout"] = {{"tp", a.layout.tp}, {"pcp", a.layout.pcp}, {"dcp", a.layout.dcp},
                 {"interleave", a.layout.interleave}, {"block_size", a.layout.page_size}};
  j["world_size"] = comm.size();
  j["threads_per_rank"] = global_pool().size();
  j["ttft_s"] = median(ttft);
  j["itl_s"] = median(itl);
  j["prefill_tokens_per_s"] = double(a.input_len) / median(ttft);
  j["decode_tokens_per_s"] = itl.empty() ? 0.0 : 1.0 / median(itl);
  j["comm_s"] = median(comm_p);
  j["comm_share_prefill"] = median(comm_p) / median(ttft);
  j["comm_decode_s"] = median(comm_d);
  j["comm_share_decode"] = itl.empty() ? 0.0 : median(comm_d) / median(itl);
  // The PCP K/V gather runs beside the attention over each rank's own rows: its time is in
  // comm_s, but only the part rank 0 waited for is exposed.
  const bool overlapped = runner.attention().overlap() && a.layout.pcp > 1;
  j["overlap_comm"] = overlapped;
  j["kv_gather_s"] = median(gather_s);
  j["kv_gather_exposed_s"] = median(exposed_s);
  j["comm_exposed_s"] = median(comm_p) - (median(gather_s) - median(exposed_s));
  j["comm_exposed_share_prefill"] = j["comm_exposed_s"].get<double>() / median(ttft);
  j["comm_bytes"] = {{"prefill", traffic_json(bytes_prefill)},
                     {"decode", traffic_json(bytes_decode)}};
  // The same from the formulas (model/comm_volume.h; control traffic is not modelled).
  const CommModelLayout cml{a.layout.tp, a.layout.pcp, a.layout.dcp, kv_elem};
  j["comm_bytes_model"] = {{"prefill", traffic_json(prefill_comm_bytes(config, cml, a.input_len))},
                           {"decode", traffic_json(decode_comm_bytes(config, cml))}};
  j["kv_bytes_per_rank"] = cp.local_len(cached, 0) * runner.kv_bytes_per_local_token();
  // What this rank would hold with the same TP but no context parallelism (W = 1).
  j["kv_bytes_without_cp"] = cached * runner.kv_bytes_per_local_token();
  j["kv_cache_dtype"] = ro.kv_dtype == DType::BF16 ? "bf16" : "f32";  // auto resolved
  j["quantization"] = a.quantization;
  j["weights_q8_0"] = q8;  // the weights the kernels read (a Q8_0 GGUF file: true, "none")
  // With Q8_0 weights: whether the activations were quantized to int8 (Int8Math) or met the
  // weights in f32.
  j["int8_math_used"] = !q8 ? "none" : linear_uses_int8_dot(DType::Q8_0) ? "dot" : "exact";
  j["prefill_flops"] = flops;
  j["decode_bytes_per_token"] = bytes;
  j["peak_fma_gflops_per_core"] = peak.fma_gflops_1t;
  j["peak_read_gbps"] = median(read_gbps);
  j["peak_read_gbps_min"] = *std::min_element(read_gbps.begin(), read_gbps.end());
  j["peak_read_gbps_max"] = *std::max_element(read_gbps.begin(), read_gbps.end());
  j["cores_used"] = cores;
  // The unit whose peak mfu divides by: the one the prefill's linear layers (most of its
  // FLOPs) run on (linear_prefill_unit: bf16 dot products, int8 dot products or fp32 FMA).
  // `bench peak` lists all units.
  std::string unit = "fp32_fma";
  double unit_peak = peak.fma_gflops_1t;
  const std::string_view dot_unit = linear_prefill_unit(
      q8 ? DType::Q8_0 : config.torch_dtype == "bfloat16" ? DType::BF16 : DType::F32);
  if (dot_unit != "fp32_fma") {
    for (const UnitPeak& u : measure_unit_peaks(po.seconds, po.repeats))
      if (u.name == dot_unit && u.measured) {
        unit = u.name;
        unit_peak = u.gops_1t;
      }
  }
  j["peak_unit_gflops_per_core"] = unit_peak;
  j["mfu"] = flops / (median(ttft) * unit_peak * 1e9 * double(cores));
  j["mfu_unit"] = unit;
  j["mbu"] = itl.empty() ? 0.0 : bytes / (median(itl) * median(read_gbps) * 1e9);
  j["peak_rss_bytes"] = peak_rss_bytes();  // rank 0's
  j["rss_bytes"] = current_rss_bytes();     // rank 0's, after the timed requests
  if (a.profile) {
    // Per-phase wall time of rank 0 (mean per prefill / per decode token) and busy threads.
    j["phases"] = {{"prefill", phases_json(prof.prefill, prof.prefills, prof.prefill_s)},
                   {"decode", phases_json(prof.decode, prof.decode_steps, prof.decode_s)}};
  }
  if (!a.timeline.empty()) {
    // Milliseconds from the start of the last timed prefill, per layer.
    nlohmann::json tl = nlohmann::json::array();
    const double ms = 1e3;
    for (size_t l = 0; l < last.timeline.size() && a.layout.pcp > 1; ++l) {
      const StepAttention::LayerTimes& x = last.timeline[l];
      tl.push_back({{"layer", l}, {"gather_start_ms", ms * (x.gather_start - last.t0)},
                    {"gather_end_ms", ms * (x.gather_end - last.t0)},
                    {"local_attention_end_ms", ms * (x.local_end - last.t0)},
                    {"wait_end_ms", ms * (x.wait_end - last.t0)}});
    }
    std::ofstream f(a.timeline);
    CPI_CHECK(f.good(), "cannot write --timeline file '{}'", a.timeline);
    f << nlohmann::json{{"ttft_ms", 1e3 * last.ttft}, {"overlap_comm", overlapped},
                        {"layout", j["layout"]}, {"input_len", a.input_len}, {"layers", tl}}
             .dump(1)
      << "\n";
  }
  if (a.json) std::printf("%s\n", j.dump().c_str());
  else std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace

void register_bench_latency(CLI::App& bench, CommandAction* action) {
  auto a = std::make_shared<LatencyArgs>();
  auto* cmd = bench.add_subcommand("latency", "Time to first token and inter-token latency");
  cmd->add_option("--model", a->model, "Hugging Face model directory")->required();
  cmd->add_option("--input-len", a->input_len, "Prompt tokens")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 22));
  cmd->add_option("--output-len", a->output_len, "Generated tokens")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 22));
  cmd->add_option("--num-iters", a->num_iters, "Timed requests")->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--warmup", a->warmup, "Untimed requests first")->capture_default_str()
      ->check(CLI::Range(0, 100));
  cmd->add_option("--seed", a->seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_option("--kv-cache-dtype", a->kv_dtype,
                  "KV-cache storage: f32, bf16 or auto (the model's dtype, as serve)")
      ->capture_default_str();
  add_quantization_flag(cmd, &a->quantization);
  add_bf16_math_flag(cmd);
  add_int8_math_flag(cmd);
  cmd->add_flag("--json", a->json, "One JSON line");
  cmd->add_option("--overlap-comm", a->overlap_comm,
                  "Under PCP, run the K/V gather beside the attention over each rank's own "
                  "tokens: auto (when the PCP group spans hosts), on, off")
      ->capture_default_str()->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_flag("--no-overlap-comm", a->no_overlap_comm, "The same as --overlap-comm off");
  cmd->add_option("--timeline", a->timeline,
                  "Write rank 0's per-layer timeline of the PCP K/V gather in the last timed "
                  "prefill to this file (JSON)");
  cmd->add_flag("--profile", a->profile,
                "Also report rank 0's time per phase (embedding, norms, linear layers, "
                "attention, collectives, LM head, sampling) and its busy pool threads");
  add_layout_flags(cmd, &a->layout, &a->threads_per_rank);
  cmd->callback([a, action] {
    *action = [a] {
      return run_distributed(cli_args(), a->layout, a->threads_per_rank,
                             [a] { return run_latency(*a); },
                             [a] { check_model_layout(a->model, a->layout); });
    };
  });
}

}  // namespace cpinfer
