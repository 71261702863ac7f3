#include "model/layout_calibration.h"

#include <algorithm>
#include <cmath>
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

// Median seconds of calls of f after one warm-up call: as many calls as fit in about
// `budget_s` seconds (as timed by the warm-up), at least 3 and at most 31. On a shared
// machine a rate measured over a few milliseconds can catch a slow moment; the median of
// many calls does not.
template <class F>
double time_median(double budget_s, F&& f) {
  const double w0 = steady_seconds();
  f();
  const double warm = std::max(steady_seconds() - w0, 1e-6);
  const int reps = int(std::clamp(budget_s / warm, 3.0, 31.0));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = steady_seconds();
    f();
    t.push_back(steady_seconds() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

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
// times over, and the activations of an M-row pass.
class LayerPass {
 public:
  LayerPass(const ModelConfig& c, int64_t M, int64_t copies, std::mt19937& rng)
      : c_(c), M_(M), H_(c.hidden_size), I_(c.intermediate_size),
        qd_(c.num_q_heads * c.head_dim), kvd_(c.num_kv_heads * c.head_dim),
        layer_elems_(H_ * (qd_ + 2 * kvd_) + qd_ * H_ + 3 * H_ * I_), copies_(copies),
        w_(layer_elems_ * copies, c.torch_dtype != "float32", rng) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    x_.resize(size_t(M * H_));
    for (float& v : x_) v = u(rng);
    h_.resize(size_t(M * H_));
    attn_.resize(size_t(M * qd_));
    for (float& v : attn_) v = u(rng);
    qkv_.resize(size_t(M * (qd_ + 2 * kvd_)));
    gu_.resize(size_t(M * 2 * I_));
    act_.resize(size_t(M * I_));
    norm_.assign(size_t(H_), 1.f);
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

  // Bytes of one copy of the layer's weights.
  double layer_bytes() const {
    return double(layer_elems_) * (c_.torch_dtype != "float32" ? 2.0 : 4.0);
  }
  int64_t copies() const { return copies_; }

  // The decoder's sequence for one layer over copy `i` (decoder.cpp): x += h, h = norm(x);
  // q|k|v with RoPE; o; x += h, h = norm(x); gate/up with SiLU; down.
  void run(int64_t i, ThreadPool& pool) {
    int64_t off = i * layer_elems_;
    auto take = [&](int64_t rows, int64_t cols) {
      const WeightView v = w_.view(off, rows, cols);
      off += rows * cols;
      return v;
    };
    const WeightView q = take(qd_, H_), k = take(kvd_, H_), v = take(kvd_, H_);
    const WeightView o = take(H_, qd_), gate = take(I_, H_), up = take(I_, H_),
                     down = take(H_, I_);
    const double eps = c_.rms_norm_eps;
    const int64_t ld = qd_ + 2 * kvd_;
    add_rms_norm(x_.data(), h_.data(), norm_.data(), DType::F32, M_, H_, eps, h_.data(), pool);
    const LinearPart parts[3] = {{q, nullptr, qkv_.data(), ld, true},
                                 {k, nullptr, qkv_.data() + qd_, ld, true},
                                 {v, nullptr, qkv_.data() + qd_ + kvd_, ld, false}};
    const RotaryEpilogue rope{cos_.data(), sin_.data(), c_.head_dim, eps};
    linear_fused(h_.data(), M_, H_, parts, pool, &rope);
    linear(attn_.data(), M_, qd_, o, nullptr, h_.data(), H_, pool);
    add_rms_norm(x_.data(), h_.data(), norm_.data(), DType::F32, M_, H_, eps, h_.data(), pool);
    linear_gate_up_silu(h_.data(), M_, H_, gate, up, gu_.data(), act_.data(), pool);
    linear(act_.data(), M_, I_, down, nullptr, h_.data(), H_, pool);
  }

 private:
  const ModelConfig& c_;
  int64_t M_, H_, I_, qd_, kvd_, layer_elems_, copies_;
  WeightBlock w_;
  std::vector<float> x_, h_, attn_, qkv_, gu_, act_, norm_, cos_, sin_;
};

}  // namespace

LayoutCalibration calibrate_layout_rates(const ModelConfig& c, int64_t kv_bytes,
                                         ThreadPool& pool, const std::set<int64_t>& decode_rows) {
  LayoutCalibration cal;
  cal.threads = int(pool.size());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t layer_macs = linear_macs_per_token(c) / c.num_layers;
  {
    const int64_t M = 2048;
    LayerPass pass(c, M, 1, rng);
    const double s = time_median(0.5, [&] { pass.run(0, pool); });
    cal.gemm_gflops_per_core = 2.0 * double(M * layer_macs) / s / 1e9 / cal.threads;
  }
  {
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
    const double s = time_median(0.3, [&] {
      run_attention(plan, q.data(), hq * D, layer, scale, o.data(), hq * D, lse.data(), ws, pool);
    });
    const double flops = 4.0 * double(D) * double(S) * double(S + 1) / 2 * double(hq);
    cal.attn_gflops_per_core = flops / s / 1e9 / cal.threads;
  }
  // The decode rates: one row (every layout's single decode), then each row count asked for.
  std::vector<int64_t> rows_list = {1};
  for (int64_t r : decode_rows)
    if (r > 1 && r <= kMaxCalibratedDecodeRows) rows_list.push_back(r);
  {
    // Enough copies of the layer that the set (>= 256 MiB) is far larger than the caches.
    const double target = double(int64_t(256) << 20);
    const double layer_bytes = double(layer_macs) * (c.torch_dtype != "float32" ? 2.0 : 4.0);
    const int64_t copies = std::max<int64_t>(2, int64_t(std::ceil(target / layer_bytes)));
    for (int64_t rows : rows_list) {
      LayerPass pass(c, rows, copies, rng);
      const double s = time_median(0.3, [&] {
        for (int64_t i = 0; i < pass.copies(); ++i) pass.run(i, pool);
      });
      const double gbps = pass.layer_bytes() * double(copies) / s / 1e9 / cal.threads;
      if (rows == 1) cal.weight_read_gbps_per_core = gbps;
      else cal.weight_read_gbps_at_rows[rows] = gbps;
    }
  }
  {
    const int64_t V = c.vocab_size, H = c.hidden_size;
    WeightBlock head(V * H, c.torch_dtype != "float32", rng);
    const WeightView w = head.view(0, V, H);
    const double bytes = double(V * H) * (c.torch_dtype != "float32" ? 2.0 : 4.0);
    for (int64_t rows : rows_list) {
      std::vector<float> x(size_t(rows * H)), y(size_t(rows * V));
      for (float& v : x) v = u(rng);
      const double s =
          time_median(0.2, [&] { linear(x.data(), rows, H, w, nullptr, y.data(), V, pool); });
      const double gbps = bytes / s / 1e9 / cal.threads;
      if (rows == 1) cal.lm_head_read_gbps_per_core = gbps;
      else cal.lm_head_read_gbps_at_rows[rows] = gbps;
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
