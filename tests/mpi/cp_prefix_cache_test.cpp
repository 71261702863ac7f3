// Prefix caching through the real engine under a context-parallel layout, run by mpiexec
// (tests/cli/mpi_cp_prefix_cache_test.sh). Rank 0 runs the same requests, one scenario after
// another, on three engines: one rank without caching (the reference), one rank with
// caching, and the layout with caching (the workers follow its plans). Every answer must
// equal the reference (greedy tokens, logits within 1e-3); the layout must find exactly the
// cached tokens one rank finds; each scenario's hit must be what the prompts share.
// Scenarios: a repeated prompt; the prompt extended by 1 and by 500 tokens; two prompts
// sharing 1000 tokens then diverging inside a block; a prefix left by a cancelled request;
// prefixes left by requests preempted under a small pool. At the end every rank's pool holds
// exactly the pages the scheduler's account says (free + cached), and none once the cache
// is cleared.
// One rank's answers are the same on every layout: with --references FILE, a run that finds
// no FILE computes them (and checks the cached engine against the uncached one) and writes
// them there; a run that finds FILE reads them instead of running the two single-rank
// engines again (tests/cli/mpi_cp_prefix_cache_test.sh: the first layout writes, the others
// read).
//   usage: cp_prefix_cache_test --tp N --pcp M --dcp K --interleave I [--block-size B]
//          [--references FILE]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "dist/comm.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/step_executor.h"
#include "kernels/sampling.h"
#include "support/mpi_layout.h"
#include "support/nan_max.h"
#include "tokenizer/tokenizer.h"

using namespace cpinfer;

namespace {

std::vector<int32_t> ids(int64_t n, uint32_t seed) {
  std::vector<int32_t> v;
  uint32_t x = seed * 2654435761u + 7;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(int32_t((x = x * 1664525u + 1013904223u) % testing::kMpiTestPromptIds));
  return v;
}
std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Answer {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  int64_t cached = 0;
  std::string finish;
};

struct Request {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 6;
  int64_t cancel_after = 0;  // > 0: the client goes away after this many tokens
};

// Submits a group of requests at once and waits for all of them.
std::vector<Answer> run_group(Engine& e, const std::vector<Request>& reqs) {
  auto ch = std::make_shared<OutputChannel>();
  for (size_t i = 0; i < reqs.size(); ++i) {
    RequestParams p;
    p.prompt = reqs[i].prompt;
    p.max_tokens = reqs[i].max_tokens;
    p.random_seed = false;
    p.ignore_eos = true;
    p.keep_logits = true;
    e.submit(p, ch, int32_t(i));
  }
  std::vector<Answer> out(reqs.size());
  size_t finished = 0;
  RequestEvent ev;
  while (finished < reqs.size()) {
    if (!ch->pop(&ev, 300.0)) fail("no event for 300 s");
    Answer& a = out[size_t(ev.index)];
    a.tokens.insert(a.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
    if (!ev.logits.empty()) a.logits.push_back(ev.logits);
    a.cached = ev.cached_tokens;
    if (ev.finished) {
      a.finish = ev.finish_reason;
      ++finished;
    }
    const Request& r = reqs[size_t(ev.index)];
    if (r.cancel_after > 0 && int64_t(a.tokens.size()) >= r.cancel_after && !ev.finished) {
      ch->cancel();  // one channel per group: a cancelling scenario has one request
    }
  }
  return out;
}

// Waits until the engine is idle and its pools were audited after the last change.
EngineMetrics idle(Engine& e) {
  for (int i = 0; i < 6000; ++i) {
    EngineMetrics m = e.metrics();
    bool done = m.running == 0 && m.waiting == 0;
    for (size_t r = 0; done && r < m.kv_used_pages.size(); ++r)
      done = m.kv_used_pages[r] == 0 &&
             m.kv_audited_free_pages[r] == m.kv_pages_per_rank - m.kv_cached_pages[r];
    if (done) return m;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return e.metrics();
}

// One rank's side of every comparison, in scenario, group, request order: the uncached
// engine's answers and the cached engine's hits.
struct Reference {
  int64_t block_size = 0, vocab = 0;
  std::vector<Answer> want;
  std::vector<int64_t> one_cached;
  uint64_t one_hits = 0, one_preemptions = 0;
};

std::string string_flag(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], name)) return argv[i + 1];
  return "";
}

template <class T>
void put(std::FILE* f, const T* p, size_t n) {
  if (n && std::fwrite(p, sizeof(T), n, f) != n) fail("short write of the references");
}
template <class T>
void get(std::FILE* f, T* p, size_t n) {
  if (n && std::fread(p, sizeof(T), n, f) != n) fail("short read of the references");
}
template <class T>
void put_vec(std::FILE* f, const std::vector<T>& v) {
  const uint64_t n = v.size();
  put(f, &n, 1);
  put(f, v.data(), v.size());
}
template <class T>
std::vector<T> get_vec(std::FILE* f) {
  uint64_t n = 0;
  get(f, &n, 1);
  if (n > (uint64_t(1) << 32)) fail("corrupt references");
  std::vector<T> v(n);
  get(f, v.data(), v.size());
  return v;
}

// Written to FILE.tmp, then renamed: a reader sees a whole file or none.
void save(const Reference& r, const std::string& path) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("cannot write {}", tmp);
  const int64_t head[3] = {r.block_size, r.vocab, int64_t(r.want.size())};
  put(f, head, 3);
  for (const Answer& a : r.want) {
    put_vec(f, a.tokens);
    const uint64_t rows = a.logits.size();
    put(f, &rows, 1);
    for (const auto& row : a.logits) put_vec(f, row);
    put(f, &a.cached, 1);
    put_vec(f, std::vector<char>(a.finish.begin(), a.finish.end()));
  }
  put_vec(f, r.one_cached);
  const uint64_t tail[2] = {r.one_hits, r.one_preemptions};
  put(f, tail, 2);
  if (std::fclose(f) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0)
    fail("cannot write {}", path);
}

bool load(Reference* r, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  int64_t head[3];
  get(f, head, 3);
  r->block_size = head[0];
  r->vocab = head[1];
  r->want.resize(size_t(head[2]));
  for (Answer& a : r->want) {
    a.tokens = get_vec<int32_t>(f);
    uint64_t rows = 0;
    get(f, &rows, 1);
    a.logits.resize(rows);
    for (auto& row : a.logits) row = get_vec<float>(f);
    get(f, &a.cached, 1);
    const auto finish = get_vec<char>(f);
    a.finish.assign(finish.begin(), finish.end());
  }
  r->one_cached = get_vec<int64_t>(f);
  uint64_t tail[2];
  get(f, tail, 2);
  r->one_hits = tail[0];
  r->one_preemptions = tail[1];
  std::fclose(f);
  return true;
}

struct Scenario {
  std::string name;
  std::vector<std::vector<Request>> groups;  // run one after another
  // For each group, each request: the fewest cached tokens it must report.
  std::vector<std::vector<int64_t>> min_cached;
};

std::vector<Scenario> scenarios(int64_t B) {
  const auto A = ids(300, 1), D = ids(1000, 2);
  const int64_t a_blocks = 300 / B * B;  // the whole blocks of A
  std::vector<Scenario> s;
  s.push_back({"repeated prompt", {{{A}}, {{A}}}, {{0}, {a_blocks - (300 % B == 0 ? B : 0)}}});
  s.push_back({"extended by 1 and by 500", {{{cat(A, ids(1, 3))}}, {{cat(A, ids(500, 4))}}},
               {{a_blocks}, {a_blocks}}});
  s.push_back({"sharing 1000 then diverging mid-block",
               {{{cat(D, ids(50, 5))}}, {{cat(D, ids(60, 6))}}},
               {{0}, {1000 / B * B}}});
  const auto C = ids(400, 7);
  s.push_back({"prefix of a cancelled request",
               {{{C, 200, 3}}, {{cat(C, ids(20, 8))}}},
               {{0}, {400 / B * B}}});
  std::vector<Request> crowd;
  for (uint32_t i = 0; i < 3; ++i) crowd.push_back({ids(300, 20 + i), 100});
  std::vector<Request> again;
  for (uint32_t i = 0; i < 3; ++i) again.push_back({cat(ids(300, 20 + i), ids(5, 30 + i)), 4});
  // Under this pool's pressure LRU eviction may take any one of them: at least one hits
  // (checked on the group's sum below).
  s.push_back({"prefixes of preempted requests", {crowd, again}, {{0, 0, 0}, {0, 0, 0}}});
  return s;
}

struct Checker {
  int failures = 0, compared = 0;
  double worst = 0;
  void answers(const Answer& want, const Answer& got, int64_t V, const std::string& what) {
    ++compared;
    if (want.tokens != got.tokens || want.logits.size() != got.logits.size()) {
      std::printf("FAIL %s: greedy tokens differ\n", what.c_str());
      ++failures;
      return;
    }
    double m = 0;
    for (size_t t = 0; t < want.logits.size(); ++t)
      for (int64_t v = 0; v < V; ++v) {
        const double d = std::abs(double(want.logits[t][size_t(v)]) - double(got.logits[t][size_t(v)]));
        cpinfer::testing::keep_max(m, d);
      }
    worst = std::max(worst, m);
    if (!(m <= 1e-3)) {
      std::printf("FAIL %s: max |dlogit| %.3g\n", what.c_str(), m);
      ++failures;
    }
  }
  void expect(bool ok, const std::string& what) {
    if (!ok) {
      std::printf("FAIL %s\n", what.c_str());
      ++failures;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  Comm& comm = Comm::world();
  const LayoutSpec spec = testing::layout_from_flags(argc, argv);
  int32_t failures = 0;
  try {
    const testing::MpiModel m = testing::mpi_tiny_model(spec, comm);
    const int64_t B = spec.page_size;
    // A pool of ~1100 tokens for the layout: every scenario fits alone, the three 400-token
    // requests of the crowd do not fit together (preemption).
    const int64_t W = spec.pcp * spec.dcp;
    RunnerOptions ro;
    ro.page_size = B;
    ro.num_pages = (1100 / W + B - 1) / B + 2;
    ModelRunner runner(m.dir, ro, global_pool(), &m.layout, &comm);
    StepExecutor cp_exec(runner, &comm);
    if (!cp_exec.is_driver()) {
      cp_exec.worker_loop();
    } else {
      const Tokenizer tok = Tokenizer::from_file(m.dir + "/tokenizer.json");
      const int64_t V = m.config.vocab_size;
      const std::string ref_file = string_flag(argc, argv, "--references");
      Reference refs;
      const bool loaded = !ref_file.empty() && load(&refs, ref_file);
      if (loaded && (refs.block_size != B || refs.vocab != V)) fail("{}: other sizes", ref_file);
      refs.block_size = B;
      refs.vocab = V;
      EngineOptions off, on;
      off.scheduler.max_num_batched_tokens = on.scheduler.max_num_batched_tokens = 256;
      off.prefix_cache.enabled = false;
      on.prefix_cache.enabled = true;
      // One rank without and with caching: only when the references are not read from a file.
      RunnerOptions one_ro = ro;
      one_ro.num_pages = 4096 / B;  // the references never preempt
      std::unique_ptr<ModelRunner> ref_runner, one_runner;
      std::unique_ptr<StepExecutor> ref_exec, one_exec;
      std::unique_ptr<Engine> ref, one;
      std::thread ref_loop, one_loop;
      if (!loaded) {
        ref_runner = std::make_unique<ModelRunner>(m.dir, one_ro, global_pool());
        one_runner = std::make_unique<ModelRunner>(m.dir, one_ro, global_pool());
        ref_exec = std::make_unique<StepExecutor>(*ref_runner, nullptr);
        one_exec = std::make_unique<StepExecutor>(*one_runner, nullptr);
        ref = std::make_unique<Engine>(*ref_exec, tok, off, global_pool());
        one = std::make_unique<Engine>(*one_exec, tok, on, global_pool());
        ref_loop = std::thread([&] { ref->run(); });
        one_loop = std::thread([&] { one->run(); });
      }
      Engine cp(cp_exec, tok, on, global_pool());
      Checker check;
      std::thread client([&] {
        try {
          size_t k = 0;  // the first request of the group, counted over all groups
          for (const Scenario& sc : scenarios(B)) {
            for (size_t g = 0; g < sc.groups.size(); ++g) {
              const size_t n = sc.groups[g].size();
              std::vector<Answer> want;
              std::vector<int64_t> one_cached;
              if (loaded) {
                if (k + n > refs.want.size()) fail("{}: too few answers", ref_file);
                want.assign(std::make_move_iterator(refs.want.begin() + long(k)),
                            std::make_move_iterator(refs.want.begin() + long(k + n)));
                one_cached.assign(refs.one_cached.begin() + long(k),
                                  refs.one_cached.begin() + long(k + n));
              } else {
                want = run_group(*ref, sc.groups[g]);
                const auto got_one = run_group(*one, sc.groups[g]);
                for (size_t i = 0; i < n; ++i) {
                  one_cached.push_back(got_one[i].cached);
                  if (sc.groups[g][i].cancel_after > 0) continue;
                  check.answers(want[i], got_one[i], V,
                                sc.name + ", group " + std::to_string(g) + ", request " +
                                    std::to_string(i) + " (one rank, cached)");
                }
                refs.one_cached.insert(refs.one_cached.end(), one_cached.begin(),
                                       one_cached.end());
              }
              k += n;
              const auto got_cp = run_group(cp, sc.groups[g]);
              for (size_t i = 0; i < want.size(); ++i) {
                const std::string what = sc.name + ", group " + std::to_string(g) +
                                         ", request " + std::to_string(i);
                if (sc.groups[g][i].cancel_after > 0) {  // answers up to the cancel
                  check.expect(got_cp[i].finish == "abort", what + ": cancelled");
                  continue;
                }
                check.answers(want[i], got_cp[i], V, what + " (layout, cached)");
                check.expect(want[i].cached == 0, what + ": caching off reports no cached tokens");
                check.expect(got_cp[i].cached == one_cached[i] ||
                                 sc.name == "prefixes of preempted requests",
                             what + ": layout hit " + std::to_string(got_cp[i].cached) +
                                 " tokens, one rank " + std::to_string(one_cached[i]));
                check.expect(got_cp[i].cached >= sc.min_cached[g][i],
                             what + ": hit " + std::to_string(got_cp[i].cached) +
                                 " tokens, want >= " + std::to_string(sc.min_cached[g][i]));
              }
              if (sc.name == "prefixes of preempted requests" && g == 1) {
                int64_t sum = 0;
                for (const Answer& a : got_cp) sum += a.cached;
                check.expect(sum >= B, sc.name + ": the follow-ups hit " + std::to_string(sum) +
                                           " tokens, want >= " + std::to_string(B));
              }
              if (!loaded)
                for (Answer& a : want) refs.want.push_back(std::move(a));
              idle(cp);
            }
          }
          if (loaded && k != refs.want.size())
            fail("{}: more answers than requests", ref_file);
          const EngineMetrics mc = idle(cp);
          if (!loaded) {
            const EngineMetrics mo = idle(*one);
            refs.one_hits = mo.prefix_cache_hits;
            refs.one_preemptions = mo.preemptions;
          }
          check.expect(mc.preemptions > 0, "the small pool preempted requests");
          check.expect(mc.prefix_cache_hits == refs.one_hits ||
                           mc.preemptions != refs.one_preemptions,
                       "the layout's hit counter equals one rank's");
          check.expect(mc.kv_audit_mismatches == 0, "no audit mismatch");
          for (size_t r = 0; r < mc.kv_used_pages.size(); ++r)
            check.expect(mc.kv_used_pages[r] == 0 &&
                             mc.kv_audited_free_pages[r] + mc.kv_cached_pages[r] ==
                                 mc.kv_pages_per_rank,
                         "rank " + std::to_string(r) + ": free + cached = the pool");
          std::printf("%s cp_prefix_cache_test tp %d pcp %d dcp %d interleave %d: %d answers "
                      "compared, worst |dlogit| %.3g, hits %llu of %llu prompt tokens (one "
                      "rank %llu), %llu preemptions\n",
                      check.failures ? "FAIL" : "ok  ", spec.tp, spec.pcp, spec.dcp,
                      spec.interleave, check.compared, check.worst,
                      (unsigned long long)mc.prefix_cache_hits,
                      (unsigned long long)mc.prefix_cache_queries,
                      (unsigned long long)refs.one_hits,
                      (unsigned long long)mc.preemptions);
        } catch (const std::exception& e) {
          std::printf("FAIL client: %s\n", e.what());
          ++check.failures;
        }
        if (ref) ref->stop();
        if (one) one->stop();
        cp.stop();
      });
      cp.run();
      client.join();
      if (ref_loop.joinable()) ref_loop.join();
      if (one_loop.joinable()) one_loop.join();
      failures = check.failures;
      // The references of a run that computed them and found nothing wrong with them.
      if (!loaded && !ref_file.empty() && check.failures == 0) save(refs, ref_file);
      cp_exec.shutdown();
    }
    // Each rank's own pool after the engine ended: every page free but the cached ones,
    // which the audit above matched against rank 0's account.
    if (runner.page_pool().num_free() > runner.page_pool().num_pages()) ++failures;
  } catch (const std::exception& e) {
    comm.abort_job(e.what(), 2);
  }
  comm.all_reduce_sum(&failures, 1, DType::I32, Group::World);
  return failures ? 1 : 0;
}
