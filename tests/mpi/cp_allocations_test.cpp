// Heap allocations of a forward step under a context-parallel layout, run by mpiexec
// (tests/cli/mpi_cp_allocations_test.sh): every rank calls ModelRunner::step with the same
// sequences, as its StepExecutor would, and counts operator new around it. Once the
// buffers have grown to a step's shape, a decode step and a chunk step (cached context + new
// tokens) allocate nothing on any rank, except a sequence's page list growing when a token
// opens a page; the decode steps alternate between full logits and argmax-only rows (the
// pairs gathered instead of the logits). MPI's own C allocations are not counted (they are
// not operator new).
//   usage: cp_allocations_test --tp N --pcp M --dcp K --interleave I
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "dist/comm.h"
#include "dist/parallel_layout.h"
#include "engine/model_runner.h"
#include "support/counting_new.h"
#include "support/mpi_layout.h"

using namespace cpinfer;

namespace {

}  // namespace

int main(int argc, char** argv) {
  Comm& comm = Comm::world();
  const LayoutSpec spec = testing::layout_from_flags(argc, argv);
  int32_t failures = 0;
  try {
    const testing::MpiModel m = testing::mpi_tiny_model(spec, comm);
    const std::string& dir = m.dir;
    const ParallelLayout& layout = m.layout;
    RunnerOptions ro;
    ro.page_size = spec.page_size;
    ro.max_cache_tokens = 8192;
    ModelRunner runner(dir, ro, global_pool(), &layout, &comm);
    std::vector<int32_t> toks(2000);
    for (size_t i = 0; i < toks.size(); ++i)
      toks[i] = int32_t((i * 7919) % testing::kMpiTestPromptIds);
    // Two sequences with context; a chunk of 96 tokens on one while the other decodes. The
    // only allocation allowed: a sequence's page list growing (its capacity changes).
    SequenceState a, b, warm_a, warm_b;
    auto prefill = [&](SequenceState& s, int64_t n) {
      runner.step({SequenceStep{&s, toks.data(), n}});
    };
    prefill(a, 300);
    prefill(b, 200);
    prefill(warm_a, 300);
    prefill(warm_b, 200);
    const std::vector<SequenceStep> warm_step{{&warm_a, toks.data(), 96}, {&warm_b, toks.data(), 1}};
    runner.step(warm_step);  // sizes every buffer for this shape
    const std::vector<SequenceStep> step{{&a, toks.data(), 96}, {&b, toks.data(), 1}};
    const size_t cap_a0 = a.pages.capacity(), cap_b0 = b.pages.capacity();
    int64_t before = g_news.load();
    runner.step(step);
    const int64_t chunk_news = g_news.load() - before;
    const int64_t chunk_growth = (a.pages.capacity() != cap_a0) + (b.pages.capacity() != cap_b0);
    // Decodes: allowed one allocation when a sequence's page list grows (capacity doubles).
    int64_t decode_news = 0, growth = 0;
    const std::vector<SequenceStep> dec{{&a, toks.data(), 1}, {&b, toks.data(), 1}};
    const std::vector<SequenceStep> dec_argmax{{&a, toks.data(), 1, false, RowUse::Argmax},
                                               {&b, toks.data(), 1, false, RowUse::Argmax}};
    runner.step(dec);
    runner.step(dec_argmax);
    for (int i = 0; i < 40; ++i) {
      const size_t cap_a = a.pages.capacity(), cap_b = b.pages.capacity();
      before = g_news.load();
      runner.step(i % 2 ? dec_argmax : dec);
      decode_news += g_news.load() - before;
      growth += (a.pages.capacity() != cap_a) + (b.pages.capacity() != cap_b);
    }
    const bool ok = chunk_news <= chunk_growth && decode_news <= growth;
    std::printf("%s rank %d (tp %d pcp %d dcp %d I %d): chunk step %lld allocations (page lists "
                "grew %lld times), 40 decode steps %lld (page lists grew %lld times)\n",
                ok ? "ok  " : "FAIL", comm.rank(), spec.tp, spec.pcp, spec.dcp, spec.interleave,
                (long long)chunk_news, (long long)chunk_growth, (long long)decode_news,
                (long long)growth);
    if (!ok) failures = 1;
  } catch (const std::exception& e) {
    comm.abort_job(e.what(), 2);
  }
  comm.all_reduce_sum(&failures, 1, DType::I32, Group::World);
  return failures ? 1 : 0;
}
