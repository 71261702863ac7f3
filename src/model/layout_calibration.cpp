#include "model/layout_calibration.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "attention/kv_cache.h"
#include "core/dtype.h"
#include "core/clock.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/linear_fused.h"
#include "kernels/peak.h"
#include "model/model_cost.h"

namespace cpinfer {

namespace {

// Random values in [-scale, scale) of the model's weight dtype.
class WeightBlock {
 public:
  WeightBlock(int64_t elems, bool bf, std::mt19937& rng) : bf_(bf) {
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    if (bf) {
      b_.resize(size_t(elems));
      for (bf16& v : b_) v = bf16(u(rng));
    } else {
      f_.resize(size_t(elems));
      for (float& v : f_) v = u(rng);
    }
  }
  // The [rows, cols] matrix starting at element `offset`.
  WeightView view(int64_t offset, int64_t rows, int64_t cols) const {
    WeightView w;
    w.rows = rows;
    w.cols = cols;
    w.ld = cols;
    w.dtype = bf_ ? DType::BF16 : DType::F32;
    w.data = bf_ ? static_cast<const void*>(b_.data() + offset)
                 : static_cast<const void*>(f_.data() + offset);
    return w;
  }

 private:
  bool bf_;
  std::vector<bf16> b_;
  std::vector<float> f_;
};

// One decoder layer's weights (q, k, v, o, gate, up, down: the model's full shapes), `copies`
// times over, laid out from the start of a WeightBlock of at least copies * elems elements.
class LayerWeightCopies {
 public:
  LayerWeightCopies(const ModelConfig& c, int64_t copies, const WeightBlock& block)
      : H(c.hidden_size), I(c.intermediate_size), qd(c.num_q_heads * c.head_dim),
        kvd(c.num_kv_heads * c.head_dim), elems(layer_elems(c)), copies(copies),
        bytes_per_elem(c.torch_dtype != "float32" ? 2.0 : 4.0), w(block) {}
  static int64_t layer_elems(const ModelConfig& c) {
    const int64_t H = c.hidden_size, qd = c.num_q_heads * c.head_dim,
                  kvd = c.num_kv_heads * c.head_dim;
    return H * (qd + 2 * kvd) + qd * H + 3 * H * c.intermediate_size;
  }
  // Bytes of one copy of the layer's weights.
  double layer_bytes() const { return double(elems) * bytes_per_elem; }

  const int64_t H, I, qd, kvd, elems, copies;
  const double bytes_per_elem;
  const WeightBlock& w;
};

// The activations of an M-row pass over a LayerWeightCopies.
class LayerPass {
 public:
  LayerPass(const ModelConfig& c, const LayerWeightCopies& lw, int64_t M, std::mt19937& rng)
      : c_(c), lw_(lw), M_(M) {
    const int64_t H = lw.H, qd = lw.qd, kvd = lw.kvd, I = lw.I;
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    x_.resize(size_t(M * H));
    for (float& v : x_) v = u(rng);
    h_.resize(size_t(M * H));
    attn_.resize(size_t(M * qd));
    for (float& v : attn_) v = u(rng);
    qkv_.resize(size_t(M * (qd + 2 * kvd)));
    gu_.resize(size_t(M * 2 * I));
    act_.resize(size_t(M * I));
    norm_.assign(size_t(H), 1.f);
    const int64_t half = c.head_dim / 2;
    std::vector<int32_t> pos(static_cast<size_t>(M));
    for (int64_t i = 0; i < M; ++i) pos[size_t(i)] = int32_t(i);
    std::vector<double> inv_freq(static_cast<size_t>(half));
    for (int64_t j = 0; j < half; ++j)
      inv_freq[size_t(j)] = std::pow(c.rope_theta, -2.0 * double(j) / double(c.head_dim));
    cos_.resize(size_t(M * half));
    sin_.resize(size_t(M * half));
    rope_tables(pos.data(), M, inv_freq.data(), half, cos_.data(), sin_.data());
  }

  // The decoder's sequence for one layer over copy `i` (decoder.cpp): x += h, h = norm(x);
  // q|k|v with RoPE; o; x += h, h = norm(x); gate/up with SiLU; down.
  void run(int64_t i, ThreadPool& pool) {
    const int64_t H = lw_.H, qd = lw_.qd, kvd = lw_.kvd, I = lw_.I;
    int64_t off = i * lw_.elems;
    auto take = [&](int64_t rows, int64_t cols) {
      const WeightView v = lw_.w.view(off, rows, cols);
      off += rows * cols;
      return v;
    };
    const WeightView q = take(qd, H), k = take(kvd, H), v = take(kvd, H);
    const WeightView o = take(H, qd), gate = take(I, H), up = take(I, H), down = take(H, I);
    const double eps = c_.rms_norm_eps;
    const int64_t ld = qd + 2 * kvd;
    add_rms_norm(x_.data(), h_.data(), norm_.data(), DType::F32, M_, H, eps, h_.data(), pool);
    const LinearPart parts[3] = {{q, nullptr, qkv_.data(), ld, true},
                                 {k, nullptr, qkv_.data() + qd, ld, true},
                                 {v, nullptr, qkv_.data() + qd + kvd, ld, false}};
    const RotaryEpilogue rope{cos_.data(), sin_.data(), c_.head_dim, eps};
    linear_fused(h_.data(), M_, H, parts, pool, &rope);
    linear(attn_.data(), M_, qd, o, nullptr, h_.data(), H, pool);
    add_rms_norm(x_.data(), h_.data(), norm_.data(), DType::F32, M_, H, eps, h_.data(), pool);
    linear_gate_up_silu(h_.data(), M_, H, gate, up, gu_.data(), act_.data(), pool);
    linear(act_.data(), M_, I, down, nullptr, h_.data(), H, pool);
  }
  // Every copy once, as a decode step streams every layer.
  void run_all(ThreadPool& pool) {
    for (int64_t i = 0; i < lw_.copies; ++i) run(i, pool);
  }

 private:
  const ModelConfig& c_;
  const LayerWeightCopies& lw_;
  int64_t M_;
  std::vector<float> x_, h_, attn_, qkv_, gu_, act_, norm_, cos_, sin_;
};

}  // namespace

// Each call's warm-up once (its first round), then round r times every call before round
// r + 1 starts; each result is the median of its rounds' medians.
std::vector<double> time_interleaved_rounds(const std::vector<TimedCall>& calls, int rounds) {
  std::vector<std::vector<double>> t(calls.size());
  std::vector<double> warm(calls.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < calls.size(); ++i) {
      if (r == 0) {
        const double w0 = steady_seconds();
        calls[i].fn();
        warm[i] = std::max(steady_seconds() - w0, 1e-6);
      }
      // As many calls as fit in this round's share of the budget: at least one (a call
      // slower than its budget is timed once per round, rounds times in all).
      const int reps = int(std::clamp(calls[i].budget_s / rounds / warm[i], 1.0, 31.0));
      std::vector<double> x;
      for (int k = 0; k < reps; ++k) {
        const double t0 = steady_seconds();
        calls[i].fn();
        x.push_back(steady_seconds() - t0);
      }
      std::sort(x.begin(), x.end());
      t[i].push_back(x[x.size() / 2]);
    }
  std::vector<double> out;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    out.push_back(v[v.size() / 2]);
  }
  return out;
}

LayoutCalibration calibrate_layout_rates(const ModelConfig& c, int64_t kv_bytes,
                                         ThreadPool& pool, const std::set<int64_t>& decode_rows) {
  LayoutCalibration cal;
  cal.threads = int(pool.size());
  cal.rounds = kCalibrationRounds;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t layer_macs = linear_macs_per_token(c) / c.num_layers;
  const bool bf = c.torch_dtype != "float32";
  {  // freed before the read bandwidth's own buffer is allocated
    // Every measurement below is one call of one list, timed in rounds interleaved over the
    // whole calibration (time_interleaved_rounds), so its rounds lie seconds apart.
    std::vector<TimedCall> calls;

    // The layer's weights, copied until the set (>= 256 MiB) is far larger than the caches: the
    // decode passes stream every copy, as a decode step streams every layer; the prefill pass
    // runs over the first. The LM head's [vocab, hidden] matrix (far larger than the caches)
    // is a view of the same random block, which holds max(copies x layer, vocab x hidden)
    // elements: the larger of the two, not both.
    const double target = double(int64_t(256) << 20);
    const double layer_bytes = double(layer_macs) * (bf ? 2.0 : 4.0);
    const int64_t copies = std::max<int64_t>(2, int64_t(std::ceil(target / layer_bytes)));
    const int64_t V = c.vocab_size, H = c.hidden_size;
    const WeightBlock block(
        std::max(copies * LayerWeightCopies::layer_elems(c), V * H), bf, rng);
    const LayerWeightCopies weights(c, copies, block);

    // Prefill: the layer on 2048 rows (call 0) and causal attention over a 2048-token paged
    // cache (call 1).
    const int64_t M = 2048;
    LayerPass prefill(c, weights, M, rng);
    calls.push_back({0.5, [&] { prefill.run(0, pool); }});
    const int64_t S = 2048, D = c.head_dim, hq = c.num_q_heads / c.num_kv_heads, P = 16;
    KvCacheShape shape;
    shape.num_layers = 1;
    shape.num_pages = S / P;
    shape.page_size = P;
    shape.num_kv_heads = 1;
    shape.head_dim = D;
    shape.dtype = kv_bytes == 2 ? DType::BF16 : DType::F32;
    KvCache cache(shape);
    std::vector<float> q(size_t(S * hq * D)), kv(size_t(S * D)), o(size_t(S * hq * D)),
        lse(size_t(S * hq));
    for (float& x : q) x = u(rng);
    for (float& x : kv) x = u(rng);
    std::vector<int64_t> slots(static_cast<size_t>(S));
    for (int64_t i = 0; i < S; ++i) slots[size_t(i)] = i;
    cache.append(0, kv.data(), kv.data(), D, slots.data(), S);
    std::vector<int32_t> pages(size_t(S / P));
    for (int64_t i = 0; i < S / P; ++i) pages[size_t(i)] = int32_t(i);
    const int64_t q_indptr[2] = {0, S}, kv_lens[1] = {S};
    const int32_t page_indptr[2] = {0, int32_t(S / P)};
    AttentionBatch batch;
    batch.num_seqs = 1;
    batch.q_indptr = q_indptr;
    batch.kv_lens = kv_lens;
    batch.page_indptr = page_indptr;
    batch.page_indices = pages.data();
    batch.causal = true;
    const PagedKv layer = cache.layer(0);
    AttentionPlan plan = plan_attention(paged_problem(batch, hq, layer, int(pool.size())));
    AttentionWorkspace ws;
    ws.reserve(plan);
    const float scale = 1.f / std::sqrt(float(D));
    calls.push_back({0.3, [&] {
                       run_attention(plan, q.data(), hq * D, layer, scale, o.data(), hq * D,
                                     lse.data(), ws, pool);
                     }});

    // Decode: one row (every layout's single decode), then each row count asked for: the layer
    // over every copy (calls 2 .. n + 1), and the LM head (calls n + 2 .. 2n + 1).
    std::vector<int64_t> rows_list = {1};
    for (int64_t r : decode_rows)
      if (r > 1 && r <= kMaxCalibratedDecodeRows) rows_list.push_back(r);
    const size_t n = rows_list.size();
    std::vector<std::unique_ptr<LayerPass>> passes;
    for (int64_t rows : rows_list) {
      passes.push_back(std::make_unique<LayerPass>(c, weights, rows, rng));
      LayerPass* pass = passes.back().get();
      calls.push_back({0.3, [&pool, pass] { pass->run_all(pool); }});
    }
    // The one-row pass again on one thread, the other cores idle (call 2n + 2, last).
    std::unique_ptr<ThreadPool> solo;
    if (pool.size() > 1) solo = std::make_unique<ThreadPool>(1);
    const WeightView head_w = block.view(0, V, H);
    std::vector<std::vector<float>> xs(n), ys(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t rows = rows_list[i];
      xs[i].resize(size_t(rows * H));
      for (float& v : xs[i]) v = u(rng);
      ys[i].resize(size_t(rows * V));
      const float* x = xs[i].data();
      float* y = ys[i].data();
      calls.push_back({0.2, [&pool, &head_w, x, y, rows, H, V] {
                         linear(x, rows, H, head_w, nullptr, y, V, pool);
                       }});
    }

    if (solo) {
      LayerPass* pass = passes.front().get();
      ThreadPool* one = solo.get();
      calls.push_back({0.3, [one, pass] { pass->run_all(*one); }});
    }
    const std::vector<double> s = time_interleaved_rounds(calls);
    if (solo)
      cal.weight_read_gbps_alone = weights.layer_bytes() * double(copies) / s.back() / 1e9;
    cal.gemm_gflops_per_core = 2.0 * double(M * layer_macs) / s[0] / 1e9 / cal.threads;
    const double attn_flops = 4.0 * double(D) * double(S) * double(S + 1) / 2 * double(hq);
    cal.attn_gflops_per_core = attn_flops / s[1] / 1e9 / cal.threads;
    const double head_bytes = double(V * H) * (bf ? 2.0 : 4.0);
    for (size_t i = 0; i < n; ++i) {
      const double layer_gbps =
          weights.layer_bytes() * double(copies) / s[2 + i] / 1e9 / cal.threads;
      const double head_gbps = head_bytes / s[2 + n + i] / 1e9 / cal.threads;
      if (rows_list[i] == 1) {
        cal.weight_read_gbps_per_core = layer_gbps;
        cal.lm_head_read_gbps_per_core = head_gbps;
      } else {
        cal.weight_read_gbps_at_rows[rows_list[i]] = layer_gbps;
        cal.lm_head_read_gbps_at_rows[rows_list[i]] = head_gbps;
      }
    }
  }
  PeakOptions po;
  po.seconds = 0.1;
  po.repeats = 3;
  po.read_bytes = int64_t(256) << 20;
  const PeakResult peak = measure_peak(pool, po);
  cal.read_gbps_per_core = peak.read_gbps_nt / cal.threads;
  cal.read_gbps_1t = peak.read_gbps_1t;
  cal.fma_gflops_1t = peak.fma_gflops_1t;
  return cal;
}

}  // namespace cpinfer
