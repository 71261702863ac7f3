// Mixed batches under a context-parallel layout, run by mpiexec (tests/cli/mpi_cp_batch_test.sh):
// four requests of different lengths admitted in the same step, decodes of all of them
// together, then a new prefill admitted alongside running decodes. Rank 0 runs the same
// steps on a single-rank engine and checks logits within 1e-3 and equal greedy choices.
// Then chunked prefill over the sharded cache: two long prompts prefilled chunk by chunk
// (128 and 100 tokens a step, the second admitted two steps later) while six sequences
// decode in the same steps; every sequence's logits must equal that sequence run alone on
// one rank (whole prompt, then the same tokens one by one). Every page is back on every
// rank at the end. Last, argmax-only steps (greedy rows: each rank sends each row's best id,
// not its logits): the ids must equal the argmax of the same layout's logits for identical
// sequences run as full steps, bit for bit, and the single-rank engine's greedy choices.
// Every step of 4 or 5 decodes also checks rank 0's bytes per traffic kind against
// decode_comm_bytes (the formulas of docs/context-parallel.md §11 for a batch of decodes).
//   usage: cp_batch_test --tp N --pcp M --dcp K --interleave I [--block-size B]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "dist/comm.h"
#include "dist/parallel_layout.h"
#include "engine/model_runner.h"
#include "engine/step_executor.h"
#include "kernels/sampling.h"
#include "model/comm_volume.h"
#include "support/mpi_layout.h"
#include "support/nan_max.h"

using namespace cpinfer;

namespace {

// Runs hand-built plans on one executor, filling in each sequence's cached length (the
// plan's `begin`), which the executor checks.
struct Tracked {
  StepExecutor& exec;
  std::map<int64_t, int64_t> cached;
  const std::vector<float>& run(StepPlan p) {
    for (StepPlan::Seq& s : p.seqs) {
      s.begin = cached[s.id];
      cached[s.id] += s.num_tokens;
    }
    for (const PageOp& o : p.page_ops)
      if (o.kind == PageOp::ReleaseSeq) cached.erase(o.seq);
    return exec.run(p);
  }
};

StepPlan release_plan(const std::vector<int64_t>& ids) {
  StepPlan rel;
  rel.kind = StepPlan::Kind::Pages;
  for (int64_t id : ids) rel.page_ops.push_back({PageOp::ReleaseSeq, -1, id, -1, -1, 0, 0});
  return rel;
}

std::vector<int32_t> prompt(int64_t n, uint32_t seed) {
  std::vector<int32_t> v;
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(int32_t((x = x * 1664525u + 1013904223u) % testing::kMpiTestPromptIds));
  return v;
}

struct Checker {
  int failures = 0, compared = 0;
  double worst = 0;
  void compare(const std::vector<float>& base, const std::vector<float>& cp, int64_t V,
               const std::string& what) {
    ++compared;
    if (base.size() != cp.size()) {
      std::printf("FAIL %s: %zu vs %zu logits\n", what.c_str(), base.size(), cp.size());
      ++failures;
      return;
    }
    double m = 0;
    for (size_t i = 0; i < base.size(); ++i) {
      double d = std::abs(double(base[i]) - double(cp[i]));
      cpinfer::testing::keep_max(m, d);
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

// Token k generated for sequence `seq` (teacher-forced: the same on both sides).
int32_t forced_token(int64_t seq, int64_t k) {
  return int32_t((seq * 7919 + k * 104729) % testing::kMpiTestPromptIds);
}

// Logits of one sequence run alone on `base` from a fresh id: the whole prompt in one step,
// then `decodes` forced tokens one per step. Returns, per position of the last token of
// each step, the logits row: key = position (prompt end: prompt.size() - 1).
std::map<int64_t, std::vector<float>> alone(Tracked& base, int64_t seq,
                                            const std::vector<int32_t>& prompt, int decodes,
                                            int64_t V) {
  std::map<int64_t, std::vector<float>> out;
  StepPlan p;
  p.seqs.push_back({1000 + seq, int64_t(prompt.size()), 0});
  p.tokens = prompt;
  out[int64_t(prompt.size()) - 1] = base.run(p);
  for (int k = 0; k < decodes; ++k) {
    StepPlan d;
    d.seqs.push_back({1000 + seq, 1, 0});
    d.tokens.push_back(forced_token(seq, k));
    out[int64_t(prompt.size()) + k] = base.run(d);
  }
  base.run(release_plan({1000 + seq}));
  for (auto& [pos, l] : out) CPI_ASSERT(int64_t(l.size()) == V);
  return out;
}

void chunked_prefill_beside_decodes(Tracked& exec, Tracked& base, int64_t V,
                                    Checker& check) {
  struct Seq {
    int64_t id;
    std::vector<int32_t> prompt;
    int64_t chunk, start_step, done = 0, generated = 0;
    std::map<int64_t, std::vector<float>> got;  // position -> logits
  };
  std::vector<Seq> seqs;
  for (int64_t i = 0; i < 6; ++i) seqs.push_back({10 + i, prompt(20 + 7 * i, uint32_t(10 + i)), 0, 0});
  seqs.push_back({20, prompt(700, 20), 128, 1});
  seqs.push_back({21, prompt(517, 21), 100, 3});
  // Step 0: the six short prompts in one step; then every step decodes the running ones and
  // adds the next chunk of each long prompt that has started.
  for (int64_t step = 0;; ++step) {
    StepPlan plan;
    std::vector<Seq*> in_step;
    for (Seq& s : seqs) {
      const int64_t n = int64_t(s.prompt.size());
      if (s.done < n) {
        if (step < s.start_step) continue;
        const int64_t take = s.chunk > 0 ? std::min(s.chunk, n - s.done) : n;
        // A chunk that is not the prompt's last wants no row (as the engine plans it).
        const RowUse use = s.done + take < n ? RowUse::None : RowUse::Logits;
        plan.seqs.push_back({s.id, take, 0, use});
        plan.tokens.insert(plan.tokens.end(), s.prompt.begin() + s.done, s.prompt.begin() + s.done + take);
        s.done += take;
      } else {
        if (s.generated >= 4 + (s.chunk > 0 ? 0 : 8)) continue;
        plan.seqs.push_back({s.id, 1, 0});
        plan.tokens.push_back(forced_token(s.id, s.generated));
        ++s.generated;
      }
      in_step.push_back(&s);
    }
    if (plan.seqs.empty()) break;
    const std::vector<float>& l = exec.run(plan);
    int64_t rows = 0;  // mid chunks have no row: row r is the r-th sequence with one
    for (size_t i = 0; i < in_step.size(); ++i) {
      Seq& s = *in_step[i];
      const int64_t pos = s.done + s.generated - 1;  // the step's last token
      if (plan.seqs[i].row_use == RowUse::None) continue;
      if (int64_t(l.size()) >= (rows + 1) * V)
        s.got[pos].assign(l.begin() + rows * V, l.begin() + (rows + 1) * V);
      ++rows;
    }
    ++check.compared;
    if (int64_t(l.size()) != rows * V) {
      std::printf("FAIL chunked step %lld: %zu logits, want %lld rows\n", (long long)step,
                  l.size(), (long long)rows);
      ++check.failures;
    }
  }
  std::vector<int64_t> ids;
  for (Seq& s : seqs) {
    ids.push_back(s.id);
    const auto want = alone(base, s.id, s.prompt, int(s.generated), V);
    if (want.size() != s.got.size()) {
      std::printf("FAIL seq %lld: %zu logit rows, want %zu\n", (long long)s.id, s.got.size(),
                  want.size());
      ++check.failures;
      continue;
    }
    for (const auto& [pos, w] : want)
      check.compare(w, s.got[pos], V,
                    "chunked: seq " + std::to_string(s.id) + " position " + std::to_string(pos));
  }
  exec.run(release_plan(ids));
}

// Argmax-only steps against full ones on the same layout: sequences 30.. (argmax only) and
// 40.. (full logits) have the same prompts and tokens, so the same rows in the same step
// shapes; the argmax step's ids must be the argmax of the full step's rows exactly (same
// values, ties to the lowest id), and the single-rank engine's choice. Then a step that mixes
// an argmax-only row with a full one returns the logits of both and no ids.
void argmax_only_steps(Tracked& exec, Tracked& base, int64_t V, int64_t P, Checker& check) {
  const std::vector<int64_t> lens{50, 1, 2 * P + 1, 130};
  const int64_t n = int64_t(lens.size());
  auto step = [&](int64_t first_id, bool argmax_only, const std::vector<std::vector<int32_t>>& toks) {
    StepPlan p;
    for (int64_t i = 0; i < n; ++i) {
      p.seqs.push_back({first_id + i, int64_t(toks[size_t(i)].size()), 0,
                        argmax_only ? RowUse::Argmax : RowUse::Logits});
      p.tokens.insert(p.tokens.end(), toks[size_t(i)].begin(), toks[size_t(i)].end());
    }
    return p;
  };
  std::vector<std::vector<int32_t>> toks;
  for (int64_t i = 0; i < n; ++i) toks.push_back(prompt(lens[size_t(i)], uint32_t(50 + i)));
  for (int k = 0; k < 4; ++k) {  // the prefills, then three decode steps
    const std::string what = k == 0 ? "argmax-only prefill step" : "argmax-only decode step " + std::to_string(k);
    ++check.compared;
    const size_t logits_returned = exec.run(step(30, true, toks)).size();
    const std::vector<int32_t> ids = exec.exec.argmax_ids();
    const std::vector<float> full = exec.run(step(40, false, toks));
    const std::vector<float> one_rank = base.run(step(40, false, toks));
    if (logits_returned != 0 || int64_t(ids.size()) != n || exec.exec.argmax_ids().size() != 0 ||
        int64_t(full.size()) != n * V) {
      std::printf("FAIL %s: %zu logits and %zu ids returned, then %zu logits\n", what.c_str(),
                  logits_returned, ids.size(), full.size());
      ++check.failures;
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int32_t want = argmax(full.data() + i * V, V, global_pool());
      const int32_t single = argmax(one_rank.data() + i * V, V, global_pool());
      if (ids[size_t(i)] != want || want != single) {
        std::printf("FAIL %s, row %lld: argmax-only id %d, the full step's argmax %d, one rank's %d\n",
                    what.c_str(), (long long)i, ids[size_t(i)], want, single);
        ++check.failures;
      }
      toks[size_t(i)] = {want};
    }
  }
  // Mixed: one argmax-only row beside a full one -> logits for both, no ids.
  StepPlan mixed = step(30, true, toks);
  mixed.seqs[1].row_use = RowUse::Logits;
  ++check.compared;
  const size_t got = exec.run(mixed).size();
  if (int64_t(got) != n * V || !exec.exec.argmax_ids().empty()) {
    std::printf("FAIL mixed argmax-only and full rows: %zu logits (want %lld), %zu ids\n", got,
                (long long)(n * V), exec.exec.argmax_ids().size());
    ++check.failures;
  }
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(30 + i), ids.push_back(40 + i);
  exec.run(release_plan(ids));
  base.run(release_plan(ids));
}

// Prompt chunks whose rows nobody reads (RowUse::None) have no row: a step of only such
// chunks returns no logits and no ids; beside an argmax row it returns that row's id alone;
// the rows that follow are the single-rank engine's. Prompts of 90 (seq 60) and 45 (seq 61).
void rowless_chunks(Tracked& exec, Tracked& base, int64_t V, Checker& check) {
  const std::vector<int32_t> a = prompt(90, 60), b = prompt(45, 61);
  auto part = [](const std::vector<int32_t>& t, int64_t from, int64_t n) {
    return std::vector<int32_t>(t.begin() + from, t.begin() + from + n);
  };
  auto step = [](std::vector<std::pair<StepPlan::Seq, std::vector<int32_t>>> seqs) {
    StepPlan p;
    for (auto& [s, t] : seqs) {
      s.num_tokens = int64_t(t.size());
      p.seqs.push_back(s);
      p.tokens.insert(p.tokens.end(), t.begin(), t.end());
    }
    return p;
  };
  const auto want_a = alone(base, 60, a, 1, V), want_b = alone(base, 61, b, 0, V);
  auto fail = [&](const char* what, size_t logits, size_t ids) {
    std::printf("FAIL rowless chunks, %s: %zu logits, %zu ids\n", what, logits, ids);
    ++check.failures;
  };
  check.compared += 2;
  // Step A: both first chunks, no rows.
  size_t got = exec.run(step({{{60, 0, 0, RowUse::None}, part(a, 0, 50)},
                              {{61, 0, 0, RowUse::None}, part(b, 0, 20)}})).size();
  if (got != 0 || !exec.exec.argmax_ids().empty())
    fail("two mid chunks", got, exec.exec.argmax_ids().size());
  // Step B: seq 60's last chunk (argmax only) beside seq 61's second chunk (no row).
  got = exec.run(step({{{60, 0, 0, RowUse::Argmax}, part(a, 50, 40)},
                       {{61, 0, 0, RowUse::None}, part(b, 20, 13)}})).size();
  const std::vector<int32_t> ids = exec.exec.argmax_ids();
  const int32_t want_id = argmax(want_a.at(89).data(), V, global_pool());
  if (got != 0 || ids.size() != 1 || ids[0] != want_id) {
    fail("a last chunk beside a mid chunk", got, ids.size());
    if (ids.size() == 1) std::printf("  id %d, one rank's argmax %d\n", ids[0], want_id);
  }
  // Step C: seq 60 decodes one token, seq 61's last chunk: two full rows.
  const std::vector<float> l = exec.run(step({{{60, 0, 0, RowUse::Logits}, {forced_token(60, 0)}},
                                              {{61, 0, 0, RowUse::Logits}, part(b, 33, 12)}}));
  if (int64_t(l.size()) != 2 * V) {
    fail("a decode beside a last chunk", l.size(), exec.exec.argmax_ids().size());
  } else {
    check.compare(want_a.at(90), std::vector<float>(l.begin(), l.begin() + V), V,
                  "rowless chunks: seq 60 decode");
    check.compare(want_b.at(44), std::vector<float>(l.begin() + V, l.end()), V,
                  "rowless chunks: seq 61 prompt end");
  }
  exec.run(release_plan({60, 61}));
}

}  // namespace

int main(int argc, char** argv) {
  Comm& comm = Comm::world();
  const LayoutSpec spec = testing::layout_from_flags(argc, argv);
  int32_t failures = 0;
  try {
    const testing::MpiModel m = testing::mpi_tiny_model(spec, comm);
    const std::string& dir = m.dir;
    const ModelConfig& cfg = m.config;
    const ParallelLayout& layout = m.layout;
    RunnerOptions ro;
    ro.page_size = spec.page_size;
    ro.max_cache_tokens = 4096;
    ModelRunner runner(dir, ro, global_pool(), &layout, &comm);
    StepExecutor cp_exec(runner, &comm);
    if (!cp_exec.is_driver()) {
      cp_exec.worker_loop();
    } else {
      ModelRunner base_runner(dir, ro, global_pool());
      StepExecutor base_exec(base_runner, nullptr);
      Tracked base{base_exec, {}}, exec{cp_exec, {}};
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
      // A step of nseq decodes; rank 0's traffic of that step must be what
      // decode_comm_bytes says for nseq decodes (docs/context-parallel.md §11), kind by kind.
      const CommModelLayout cml{spec.tp, spec.pcp, spec.dcp, 4};
      auto decode_all = [&](int64_t nseq, const std::vector<float>& logits, const std::string& what) {
        StepPlan d;
        for (int64_t s = 0; s < nseq; ++s) {
          d.seqs.push_back({s, 1, 0});
          d.tokens.push_back(argmax(logits.data() + s * V, V, global_pool()));
        }
        std::vector<float> w = base.run(d);
        comm.reset_stats();
        check.compare(w, exec.run(d), V, what);
        const TrafficVolume want_bytes = decode_comm_bytes(cfg, cml, nseq);
        for (int t = 0; t < kNumTraffic; ++t) {
          if (Traffic(t) == Traffic::Control) continue;
          const double got = double(comm.stats(Traffic(t)).recv_bytes);
          if (got != want_bytes[size_t(t)]) {
            std::printf("FAIL %s: %s bytes %.0f, the model says %.0f\n", what.c_str(),
                        std::string(traffic_name(Traffic(t))).c_str(), got, want_bytes[size_t(t)]);
            ++check.failures;
          }
        }
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
      const StepPlan rel = release_plan({0, 1, 2, 3, 4});
      exec.run(rel);
      base.run(rel);
      chunked_prefill_beside_decodes(exec, base, V, check);
      argmax_only_steps(exec, base, V, P, check);
      rowless_chunks(exec, base, V, check);
      cp_exec.shutdown();
      std::printf("%s cp_batch_test tp %d pcp %d dcp %d interleave %d: %d steps and sequences "
                  "compared, worst |dlogit| %.3g\n",
                  check.failures ? "FAIL" : "ok  ", spec.tp, spec.pcp, spec.dcp, spec.interleave,
                  check.compared, check.worst);
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
