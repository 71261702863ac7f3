#include "model/weights.h"

#include <fmt/format.h>

#include <cstring>

#include "core/error.h"
#include "core/progress.h"

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

// Touches every page of a tensor so that loading, not the first forward pass, pays
// for reading it from disk; returns a checksum so the reads are not optimised away.
uint64_t touch(const TensorInfo& t) {
  uint64_t sum = 0;
  for (size_t off = 0; off < t.nbytes; off += 4096) sum += t.data[off];
  return sum;
}

}  // namespace

ModelWeights load_model_weights(const ModelConfig& c, const std::string& model_dir) {
  CPI_CHECK(!c.mlp_bias, "config.json sets mlp_bias=true, which cpinfer does not support");
  ModelWeights w;
  w.store = std::make_shared<SafetensorsStore>(SafetensorsStore::open(model_dir));
  const SafetensorsStore& st = *w.store;
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size, V = c.vocab_size;
  const int64_t qd = c.num_q_heads * D, kvd = c.num_kv_heads * D;
  ProgressBar bar("loading weights", uint64_t(st.total_bytes()));
  volatile uint64_t sink = 0;
  auto mat = [&](const std::string& name, std::vector<int64_t> shape) {
    const TensorInfo& t = st.get_checked(name, shape);
    sink = sink + touch(t);
    bar.advance(t.nbytes);
    return view_of(t);
  };
  auto vec = [&](const std::string& name, int64_t n) {
    const TensorInfo& t = st.get_checked(name, {n});
    bar.advance(t.nbytes);
    return widen(t);
  };
  w.embed = mat("model.embed_tokens.weight", {V, H});
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed;
  } else {
    w.lm_head = mat("lm_head.weight", {V, H});
  }
  w.final_norm = vec("model.norm.weight", H);
  const bool bias = c.attention_bias;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::string p = fmt::format("model.layers.{}.", l);
    LayerWeights L;
    L.input_norm = vec(p + "input_layernorm.weight", H);
    L.post_attention_norm = vec(p + "post_attention_layernorm.weight", H);
    L.q = mat(p + "self_attn.q_proj.weight", {qd, H});
    L.k = mat(p + "self_attn.k_proj.weight", {kvd, H});
    L.v = mat(p + "self_attn.v_proj.weight", {kvd, H});
    L.o = mat(p + "self_attn.o_proj.weight", {H, qd});
    if (bias) {
      L.q_bias = vec(p + "self_attn.q_proj.bias", qd);
      L.k_bias = vec(p + "self_attn.k_proj.bias", kvd);
      L.v_bias = vec(p + "self_attn.v_proj.bias", kvd);
    }
    L.gate = mat(p + "mlp.gate_proj.weight", {I, H});
    L.up = mat(p + "mlp.up_proj.weight", {I, H});
    L.down = mat(p + "mlp.down_proj.weight", {H, I});
    w.layers.push_back(std::move(L));
  }
  bar.finish();
  return w;
}

}  // namespace cpinfer
