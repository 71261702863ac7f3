// Mixed batches under a context-parallel layout, run by mpiexec (tests/cli/mpi_cp_batch_test.sh):
// four requests of different lengths admitted in the same step, decodes of all of them
// together, then a new prefill admitted alongside running decodes. Rank 0 runs the same
// steps on a single-rank engine and checks logits within 1e-3 and equal greedy choices.
//   usage: cp_batch_test --tp N --pcp M --dcp K --interleave I [--block-size B]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "dist/comm.h"
#include "dist/parallel_layout.h"
#include "engine/model_runner.h"
#include "engine/step_executor.h"
#include "kernels/sampling.h"
#include "support/test_models.h"

using namespace cpinfer;

namespace {

int flag(int argc, char** argv, const char* name, int def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], name)) return std::atoi(argv[i + 1]);
  return def;
}

std::vector<int32_t> prompt(int64_t n, uint32_t seed) {
  std::vector<int32_t> v;
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) v.push_back(int32_t((x = x * 1664525u + 1013904223u) % 151000u));
  return v;
}

struct Checker {
  int failures = 0;
  double worst = 0;
  void compare(const std::vector<float>& base, const std::vector<float>& cp, int64_t V,
               const std::string& what) {
    if (base.size() != cp.size()) {
      std::printf("FAIL %s: %zu vs %zu logits\n", what.c_str(), base.size(), cp.size());
      ++failures;
      return;
    }
    double m = 0;
    for (size_t i = 0; i < base.size(); ++i) {
      double d = std::abs(double(base[i]) - double(cp[i]));
      if (!(d <= m)) m = d;
    }
    worst = std::max(worst, m);
    bool argmax_ok = true;
    for (size_t r = 0; r * size_t(V) < base.size(); ++r) {
      ThreadPool& pool = global_pool();
      if (argmax(base.data() + r * V, V, pool) != argmax(cp.data() + r * V, V, pool)) argmax_ok = false;
    }
    if (!(m <= 1e-3) || !argmax_ok) {
      std::printf("FAIL %s: max |dlogit| %.3g, greedy %s\n", what.c_str(), m,
                  argmax_ok ? "equal" : "DIFFERENT");
      ++failures;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  Comm& comm = Comm::world();
  LayoutSpec spec;
  spec.tp = flag(argc, argv, "--tp", 1);
  spec.pcp = flag(argc, argv, "--pcp", 1);
  spec.dcp = flag(argc, argv, "--dcp", 1);
  spec.interleave = flag(argc, argv, "--interleave", 1);
  spec.page_size = flag(argc, argv, "--block-size", 16);
  int32_t failures = 0;
  try {
    const std::string dir = testing::test_model("tiny", 2, DType::F32, 5);
    ModelConfig cfg = load_model_config(dir);
    ParallelLayout layout(spec, cfg.num_q_heads, cfg.num_kv_heads, comm.rank());
    comm.set_layout(layout);
    RunnerOptions ro;
    ro.page_size = spec.page_size;
    ro.max_cache_tokens = 4096;
    ModelRunner runner(dir, ro, global_pool(), &layout, &comm);
    StepExecutor exec(runner, &comm);
    if (!exec.is_driver()) {
      exec.worker_loop();
    } else {
      ModelRunner base_runner(dir, ro, global_pool());
      StepExecutor base(base_runner, nullptr);
      const int64_t V = cfg.vocab_size, P = spec.pcp;
      Checker check;
      // Step 1: four prefills of mixed lengths in one step.
      std::vector<int64_t> lens{300, 1, 77, 2 * P + 1};
      StepPlan plan;
      for (size_t i = 0; i < lens.size(); ++i) {
        auto p = prompt(lens[i], uint32_t(i));
        plan.seqs.push_back({int64_t(i), lens[i], 0});
        plan.tokens.insert(plan.tokens.end(), p.begin(), p.end());
      }
      std::vector<float> want = base.run(plan);
      check.compare(want, exec.run(plan), V, "4 prefills in one step");
      auto decode_all = [&](int64_t nseq, const std::vector<float>& logits, const std::string& what) {
        StepPlan d;
        for (int64_t s = 0; s < nseq; ++s) {
          d.seqs.push_back({s, 1, 0});
          d.tokens.push_back(argmax(logits.data() + s * V, V, global_pool()));
        }
        std::vector<float> w = base.run(d);
        check.compare(w, exec.run(d), V, what);
        return w;
      };
      for (int k = 0; k < 6; ++k) want = decode_all(4, want, "decode step " + std::to_string(k));
      // A new prefill admitted with the four running decodes in the same step.
      StepPlan mixed;
      for (int64_t s = 0; s < 4; ++s) {
        mixed.seqs.push_back({s, 1, 0});
        mixed.tokens.push_back(argmax(want.data() + s * V, V, global_pool()));
      }
      auto p = prompt(33, 99);
      mixed.seqs.push_back({4, 33, 0});
      mixed.tokens.insert(mixed.tokens.end(), p.begin(), p.end());
      want = base.run(mixed);
      check.compare(want, exec.run(mixed), V, "prefill + 4 decodes in one step");
      for (int k = 0; k < 4; ++k) want = decode_all(5, want, "5 decodes, step " + std::to_string(k));
      StepPlan rel;
      rel.kind = StepPlan::Kind::Release;
      for (int64_t s = 0; s < 5; ++s) rel.seqs.push_back({s, 0, 0});
      exec.run(rel);
      exec.shutdown();
      std::printf("%s cp_batch_test tp %d pcp %d dcp %d interleave %d: worst |dlogit| %.3g\n",
                  check.failures ? "FAIL" : "ok  ", spec.tp, spec.pcp, spec.dcp, spec.interleave,
                  check.worst);
      failures = check.failures;
    }
    // Workers check their own pools too: every page back after the release.
    if (runner.page_pool().num_free() != runner.page_pool().num_pages()) {
      std::printf("FAIL pages leaked on rank %d\n", comm.rank());
      failures += 1;
    }
  } catch (const std::exception& e) {
    comm.abort_job(e.what(), 2);
  }
  comm.all_reduce_sum(&failures, 1, DType::I32, Group::World);
  return failures ? 1 : 0;
}
