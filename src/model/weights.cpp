#include "model/weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/progress.h"
#include "model/gguf_model.h"

namespace cpinfer {

namespace {

WeightView view_of(const TensorInfo& t) {
  WeightView w;
  w.data = t.data;
  w.dtype = t.dtype;
  w.rows = t.shape.size() == 2 ? t.shape[0] : 1;
  w.cols = t.shape.empty() ? 1 : t.shape.back();
  w.ld = w.cols;
  return w;
}

std::vector<float> widen(const TensorInfo& t) {
  std::vector<float> out(size_t(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case DType::F32: { float f; std::memcpy(&f, t.data + 4 * i, 4); out[i] = f; break; }
      case DType::BF16: { uint16_t b; std::memcpy(&b, t.data + 2 * i, 2); out[i] = float(bf16::from_bits(b)); break; }
      case DType::F16: { uint16_t b; std::memcpy(&b, t.data + 2 * i, 2); out[i] = float(f16::from_bits(b)); break; }
      default: fail("tensor '{}' has dtype {}; expected F32, BF16 or F16", t.name, dtype_name(t.dtype));
    }
  }
  return out;
}

// Elements of x[0, n) whose exponent bits are all ones (NaN or Inf): `mask` is the
// exponent field of the type (f32 0x7F800000, bf16 0x7F80, f16 0x7C00). Branch-free so
// that it vectorises (SSE2 at the baseline: 8 u16 or 4 u32 per instruction).
template <typename U>
size_t count_non_finite(const U* x, size_t n, U mask) {
  size_t bad = 0;
  // Counters as wide as the elements (one compare + one subtract per vector), emptied
  // before they can wrap.
  constexpr size_t kBlock = 32768;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    U c = 0;
    for (size_t i = b; i < e; ++i) c += U((x[i] & mask) == mask);
    bad += c;
  }
  return bad;
}

// Reads every element of a view (its rows, only the columns in the view), which is how
// loading, not the first forward pass, pays for reading the shard from disk, and throws
// an Error naming the tensor and the first NaN or Inf it holds: a corrupt checkpoint is
// refused at load time instead of answering garbage. Costs one pass over memory: about
// 80 ms on one core for qwen2.5-0.5b's 0.99 GB of bf16 (page cache warm).
// Q8_0 (GGUF files): the f16 scale of every block is checked; int8 values are finite.
void scan_finite_q8_0(const WeightView& w, const TensorInfo& t) {
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  const int64_t blocks = w.cols / kQ8BlockElems;
  for (int64_t r = 0; r < w.rows; ++r) {
    const uint8_t* row = base + dtype_bytes(DType::Q8_0, w.ld) * r;
    for (int64_t b = 0; b < blocks; ++b) {
      uint16_t d;
      std::memcpy(&d, row + b * kQ8BlockBytes, 2);
      if ((d & 0x7C00) == 0x7C00)
        fail("tensor '{}' in {} has a non-finite Q8_0 scale in row {}, block {}; the file is "
             "corrupt", t.name, t.file, r, b);
    }
  }
}

void scan_finite(const WeightView& w, const TensorInfo& t) {
  if (w.dtype == DType::Q8_0) return scan_finite_q8_0(w, t);
  const size_t es = dtype_size(w.dtype);
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  const size_t n = size_t(w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    const uint8_t* row = base + size_t(r * w.ld) * es;
    size_t bad = 0;
    switch (w.dtype) {
      case DType::F32: bad = count_non_finite(reinterpret_cast<const uint32_t*>(row), n, uint32_t(0x7F800000)); break;
      case DType::BF16: bad = count_non_finite(reinterpret_cast<const uint16_t*>(row), n, uint16_t(0x7F80)); break;
      case DType::F16: bad = count_non_finite(reinterpret_cast<const uint16_t*>(row), n, uint16_t(0x7C00)); break;
      default: fail("tensor '{}' has dtype {}; expected F32, BF16 or F16", t.name, dtype_name(w.dtype));
    }
    if (bad == 0) continue;
    for (size_t c = 0; c < n; ++c) {
      float v = 0;
      switch (w.dtype) {
        case DType::F32: std::memcpy(&v, row + 4 * c, 4); break;
        case DType::BF16: { uint16_t b; std::memcpy(&b, row + 2 * c, 2); v = float(bf16::from_bits(b)); break; }
        default: { uint16_t b; std::memcpy(&b, row + 2 * c, 2); v = float(f16::from_bits(b)); break; }
      }
      if (!std::isfinite(v))
        fail("tensor '{}' in {} holds {} non-finite value(s) in row {}, the first ({}) at "
             "column {}; the checkpoint is corrupt", t.name, t.file, bad, r, v, c);
    }
  }
}

// Rows [begin, begin + n) of a [rows, cols] matrix view.
WeightView row_slice(WeightView w, int64_t begin, int64_t n) {
  CPI_ASSERT(begin >= 0 && begin + n <= w.rows);
  w.data = static_cast<const uint8_t*>(w.data) + begin * dtype_bytes(w.dtype, w.ld);
  w.rows = n;
  return w;
}

// Columns [begin, begin + n): the same rows, a narrower window (ld unchanged). Q8_0: begin
// and n must be whole blocks of 32 (an Error naming `name` otherwise).
WeightView col_slice(WeightView w, int64_t begin, int64_t n, const std::string& name) {
  CPI_ASSERT(begin >= 0 && begin + n <= w.cols);
  CPI_CHECK(w.dtype != DType::Q8_0 || (begin % kQ8BlockElems == 0 && n % kQ8BlockElems == 0),
            "tensor '{}' is Q8_0 and this rank holds its columns [{}, {}), which are not whole "
            "blocks of {} (choose another tensor-parallel size)", name, begin, begin + n,
            kQ8BlockElems);
  w.data = static_cast<const uint8_t*>(w.data) + dtype_bytes(w.dtype, begin);
  w.cols = n;
  return w;
}

std::vector<float> slice(const std::vector<float>& v, int64_t begin, int64_t n) {
  return std::vector<float>(v.begin() + begin, v.begin() + begin + n);
}

}  // namespace

WeightView contiguous_copy(ModelWeights& w, const WeightView& v) {
  CPI_ASSERT(v.ld >= v.cols);
  const int64_t row_bytes = dtype_bytes(v.dtype, v.cols), src_ld = dtype_bytes(v.dtype, v.ld);
  std::vector<uint8_t>& out = w.converted.emplace_back(size_t(v.rows * row_bytes));
  const auto* src = static_cast<const uint8_t*>(v.data);
  for (int64_t r = 0; r < v.rows; ++r)
    std::memcpy(out.data() + r * row_bytes, src + r * src_ld, size_t(row_bytes));
  return WeightView{out.data(), v.dtype, v.rows, v.cols, v.cols};
}

ShardSpec full_shard(const ModelConfig& c) {
  return ShardSpec{0, c.num_q_heads, 0, c.num_kv_heads, 0, c.intermediate_size, 0, c.vocab_size};
}

std::pair<int64_t, int64_t> even_split(int64_t n, int64_t parts, int64_t part) {
  const int64_t base = n / parts, extra = n % parts;
  return {part * base + std::min(part, extra), base + (part < extra ? 1 : 0)};
}

ShardSpec tp_shard(const ModelConfig& c, const ParallelLayout& layout) {
  const int64_t tp = layout.spec().tp, r = layout.tp_rank();
  CPI_CHECK(c.intermediate_size % tp == 0,
            "tensor-parallel-size {} does not divide intermediate_size {}", tp,
            c.intermediate_size);
  ShardSpec s;
  s.q_head_begin = layout.q_head_begin();
  s.num_q_heads = layout.num_local_q_heads();
  s.kv_head_begin = layout.kv_head_begin();
  s.num_kv_heads = layout.num_local_kv_heads();
  s.ffn_size = c.intermediate_size / tp;
  s.ffn_begin = r * s.ffn_size;
  std::tie(s.vocab_begin, s.vocab_size) = even_split(c.vocab_size, tp, r);
  return s;
}

ModelWeights load_model_weights(const ModelConfig& c, const std::string& model_dir,
                                const ShardSpec& shard, bool release_checked) {
  CPI_CHECK(!c.mlp_bias, "config.json sets mlp_bias=true, which cpinfer does not support");
  ModelWeights w;
  w.shard = shard;
  const ShardSpec& sh = shard;
  if (const std::string gguf = find_gguf_model(model_dir); !gguf.empty())
    w.store = std::make_shared<SafetensorsStore>(gguf_weight_store(open_gguf(gguf), c));
  else
    w.store = std::make_shared<SafetensorsStore>(SafetensorsStore::open(model_dir));
  const SafetensorsStore& st = *w.store;
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size, V = c.vocab_size;
  const int64_t qd = c.num_q_heads * D, kvd = c.num_kv_heads * D;
  ProgressBar bar("loading weights", uint64_t(st.total_bytes()));
  const TensorInfo* last = nullptr;  // the tensor of the latest mat(), for held()'s errors
  auto mat = [&](const std::string& name, std::vector<int64_t> shape) {
    const TensorInfo& t = st.get_checked(name, shape);
    bar.advance(t.nbytes);
    last = &t;
    return view_of(t);
  };
  auto held = [&](WeightView v) {  // the part this rank keeps, read in now and checked
    scan_finite(v, *last);
    const size_t span = size_t(v.rows * dtype_bytes(v.dtype, v.ld));
    if (release_checked) {
      if (last->mapped) release_mapped_pages(v.data, span);
    } else if (v.ld != v.cols) {  // a column window: its own contiguous copy (see the header)
      const WeightView copy = contiguous_copy(w, v);
      if (last->mapped) release_mapped_pages(v.data, span);
      return copy;
    }
    return v;
  };
  auto vec = [&](const std::string& name, int64_t n) {
    const TensorInfo& t = st.get_checked(name, {n});
    bar.advance(t.nbytes);
    std::vector<float> out = widen(t);
    for (size_t i = 0; i < out.size(); ++i)
      CPI_CHECK(std::isfinite(out[i]), "tensor '{}' in {} holds a non-finite value ({}) at "
                "element {}; the checkpoint is corrupt", t.name, t.file, out[i], i);
    return out;
  };
  w.embed = held(mat("model.embed_tokens.weight", {V, H}));
  WeightView head = c.tie_word_embeddings ? w.embed : mat("lm_head.weight", {V, H});
  // Tied: the rows were read and checked with the embedding.
  w.lm_head = c.tie_word_embeddings ? row_slice(head, sh.vocab_begin, sh.vocab_size)
                                    : held(row_slice(head, sh.vocab_begin, sh.vocab_size));
  // Local extents: q/k/v rows and o columns by head, gate/up rows and down columns by FFN.
  const int64_t q0 = sh.q_head_begin * D, nq = sh.num_q_heads * D;
  const int64_t k0 = sh.kv_head_begin * D, nk = sh.num_kv_heads * D;
  const int64_t f0 = sh.ffn_begin, nf = sh.ffn_size;
  w.final_norm = vec("model.norm.weight", H);
  const bool bias = c.attention_bias;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::string p = fmt::format("model.layers.{}.", l);
    LayerWeights L;
    L.input_norm = vec(p + "input_layernorm.weight", H);
    L.post_attention_norm = vec(p + "post_attention_layernorm.weight", H);
    L.q = held(row_slice(mat(p + "self_attn.q_proj.weight", {qd, H}), q0, nq));
    L.k = held(row_slice(mat(p + "self_attn.k_proj.weight", {kvd, H}), k0, nk));
    L.v = held(row_slice(mat(p + "self_attn.v_proj.weight", {kvd, H}), k0, nk));
    L.o = held(col_slice(mat(p + "self_attn.o_proj.weight", {H, qd}), q0, nq, p + "self_attn.o_proj.weight"));
    if (bias) {
      L.q_bias = slice(vec(p + "self_attn.q_proj.bias", qd), q0, nq);
      L.k_bias = slice(vec(p + "self_attn.k_proj.bias", kvd), k0, nk);
      L.v_bias = slice(vec(p + "self_attn.v_proj.bias", kvd), k0, nk);
    }
    if (c.qk_norm) {  // one [D] weight shared by every head: each TP rank holds all of it
      L.q_norm = vec(p + "self_attn.q_norm.weight", D);
      L.k_norm = vec(p + "self_attn.k_norm.weight", D);
    }
    L.gate = held(row_slice(mat(p + "mlp.gate_proj.weight", {I, H}), f0, nf));
    L.up = held(row_slice(mat(p + "mlp.up_proj.weight", {I, H}), f0, nf));
    L.down = held(col_slice(mat(p + "mlp.down_proj.weight", {H, I}), f0, nf, p + "mlp.down_proj.weight"));
    w.layers.push_back(std::move(L));
  }
  bar.finish();
  return w;
}

}  // namespace cpinfer
