// Heap allocations of a forward step (ModelRunner::step: batch building, the attention plan,
// every layer, the LM head) on one rank: none per layer and none per token. Counted through
// a replaced operator new, so this file is its own test executable.
#include <gtest/gtest.h>

#include <vector>

#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "attention/sequence_state.h"
#include "support/counting_new.h"
#include "support/test_models.h"

namespace cpinfer {
namespace {

std::vector<int32_t> ids(int64_t n, int32_t salt) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(int32_t(100 + (i * 7919 + salt) % 3900));
  return v;
}

// Allocations of ModelRunner::step for one sequence: a second prefill of `prompt` tokens
// on a new sequence (the first one sized the buffers), then `steps` decode steps after two
// warm-up decodes. The step lists are built before counting.
struct Counts {
  int64_t prefill_again = 0;
  std::vector<int64_t> decode;  // per decode step
  std::vector<bool> new_page;   // the step's token starts a new KV page
};

// alternate: decode steps alternate between full logits and argmax-only rows (as `serve`
// runs them when greedy and sampled requests come and go).
Counts count_steps(int num_layers, int64_t prompt, int steps, bool alternate = false) {
  RunnerOptions ro;
  ro.max_cache_tokens = 2 * (prompt + steps + 4);
  // The vocabulary cut to 4099 ids: what is counted does not depend on its size.
  ModelRunner runner(testing::test_model("tiny", num_layers, DType::F32, 1, 4099), ro,
                     global_pool());
  Counts c;
  const std::vector<int32_t> p = ids(prompt, num_layers);
  SequenceState warm, seq;
  runner.step({SequenceStep{&warm, p.data(), prompt}});  // sizes the prefill buffers
  const std::vector<SequenceStep> prefill{SequenceStep{&seq, p.data(), prompt}};
  int64_t before = g_news.load();
  runner.step(prefill);
  c.prefill_again = g_news.load() - before;
  int32_t tok = 7;
  const std::vector<SequenceStep> decode{SequenceStep{&seq, &tok, 1}};
  const std::vector<SequenceStep> decode_argmax{SequenceStep{&seq, &tok, 1, false, RowUse::Argmax}};
  for (int i = 0; i < steps + 2; ++i) {
    const bool new_page = seq.num_cached % ro.page_size == 0;
    const std::vector<SequenceStep>& step = alternate && i % 2 ? decode_argmax : decode;
    before = g_news.load();
    runner.step(step);
    if (i >= 2) {
      c.decode.push_back(g_news.load() - before);
      c.new_page.push_back(new_page);
    }
    tok = int32_t(100 + i);
  }
  return c;
}

// A decode step allocates nothing, with 2 or 4 layers, except when its token opens a new
// KV page and the sequence's page list must grow (capacity doubling: at most once, and not
// at every page). A prefill allocates only the new sequence's page list, once, whatever its
// length. So nothing per layer and nothing per token.
TEST(ForwardAllocations, NonePerLayerNorPerToken) {
  for (int layers : {2, 4}) {
    const Counts c = count_steps(layers, 40, 60);  // positions 42-101: pages 3 to 6 open
    EXPECT_EQ(c.prefill_again, 1) << layers << " layers, prefill of 40 tokens";
    int64_t at_new_pages = 0;
    for (size_t i = 0; i < c.decode.size(); ++i) {
      EXPECT_LE(c.decode[i], c.new_page[i] ? 1 : 0) << layers << " layers, decode step " << i;
      at_new_pages += c.decode[i];
    }
    EXPECT_LE(at_new_pages, 2) << "4 new pages from 3: the page list grows to 6, then 12";
  }
  EXPECT_EQ(count_steps(2, 300, 1).prefill_again, 1) << "prefill of 300 tokens";
}

// The same with decode steps alternating between full logits and argmax-only rows: the
// argmax buffers keep their capacity across the full steps and the logits theirs.
TEST(ForwardAllocations, ArgmaxOnlyStepsAllocateNothingEither) {
  const Counts c = count_steps(2, 40, 60, /*alternate=*/true);
  int64_t at_new_pages = 0;
  for (size_t i = 0; i < c.decode.size(); ++i) {
    EXPECT_LE(c.decode[i], c.new_page[i] ? 1 : 0) << "decode step " << i;
    at_new_pages += c.decode[i];
  }
  EXPECT_LE(at_new_pages, 2);
}

}  // namespace
}  // namespace cpinfer
