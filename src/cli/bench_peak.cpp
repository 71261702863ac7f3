// `cpinfer bench peak`: this machine's fp32 FMA GFLOP/s and DRAM read GB/s, per thread, as
// measured by this binary (src/kernels/peak.h), the denominators of every "fraction of
// peak" figure.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/peak.h"
#include "kernels/peak_units.h"

namespace cpinfer {

namespace {

struct PeakArgs {
  int threads = 0;
  double seconds = 0.3;
  int repeats = 5;
  int64_t read_mib = 1024;
  bool json = false;
};

int run_peak(const PeakArgs& a) {
  set_num_threads(a.threads > 0 ? a.threads : default_num_threads());
  PeakOptions o;
  o.seconds = a.seconds;
  o.repeats = a.repeats;
  o.read_bytes = a.read_mib << 20;
  PeakResult r = measure_peak(global_pool(), o);
  const std::vector<UnitPeak> units = measure_unit_peaks(o.seconds, o.repeats);
  if (a.json) {
    nlohmann::json j;
    j["isa"] = std::string(isa_name(r.isa));
    j["threads"] = r.threads;
    j["fma_gflops_per_thread"] = r.fma_gflops_1t;
    j["fma_gflops_per_thread_all_threads"] = r.fma_gflops_nt;
    j["read_gbps_per_thread"] = r.read_gbps_1t;
    j["read_gbps_all_threads"] = r.read_gbps_nt;
    j["read_gbps_per_thread_all_threads"] = r.read_gbps_nt / r.threads;
    j["repeats"] = o.repeats;
    // Every unit: present or not; G operations/s of one thread where measured (a
    // multiply-add counts 2), else null and the reason.
    for (const UnitPeak& u : units) {
      nlohmann::json e;
      e["present"] = u.present;
      e["instruction"] = u.instruction;
      e["gops_per_thread"] = u.measured ? nlohmann::json(u.gops_1t) : nlohmann::json(nullptr);
      if (!u.note.empty()) e["note"] = u.note;
      j["units"][u.name] = e;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("isa %s\n", std::string(isa_name(r.isa)).c_str());
    std::printf("fp32 FMA   1 thread : %8.1f GFLOP/s\n", r.fma_gflops_1t);
    std::printf("fp32 FMA %3d threads: %8.1f GFLOP/s per thread\n", r.threads, r.fma_gflops_nt);
    std::printf("DRAM read  1 thread : %8.1f GB/s\n", r.read_gbps_1t);
    std::printf("DRAM read %3d threads: %8.1f GB/s in all\n", r.threads, r.read_gbps_nt);
    for (const UnitPeak& u : units) {
      if (u.measured)
        std::printf("%-14s 1 thread : %8.1f G ops/s (%s)\n", u.name.c_str(), u.gops_1t,
                    u.instruction.c_str());
      else
        std::printf("%-14s %s\n", u.name.c_str(), u.note.c_str());
    }
  }
  return 0;
}

}  // namespace

void register_bench_peak(CLI::App& bench, CommandAction* action) {
  auto a = std::make_shared<PeakArgs>();
  auto* cmd = bench.add_subcommand("peak", "Measure fp32 FMA, bf16/fp16/int8 dot-product units and DRAM read peaks per thread");
  cmd->add_option("--threads", a->threads, "Threads for the all-threads figures (default: all)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--seconds", a->seconds, "Seconds per measurement")
      ->capture_default_str()->check(CLI::Range(0.01, 60.0));
  cmd->add_option("--repeats", a->repeats, "Measurements per figure (median reported)")
      ->capture_default_str()->check(CLI::Range(1, 100));
  cmd->add_option("--read-mib", a->read_mib, "DRAM test buffer in MiB (>> last-level cache)")
      ->capture_default_str()->check(CLI::Range(int64_t(64), int64_t(1) << 20));
  cmd->add_flag("--json", a->json, "Print one JSON line");
  cmd->callback([a, action] { *action = [a] { return run_peak(*a); }; });
}

}  // namespace cpinfer
