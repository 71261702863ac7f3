#include "model/weight_quantization.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "kernels/quantize.h"

namespace cpinfer {

WeightQuantization parse_weight_quantization(const std::string& s) {
  if (s == "none") return WeightQuantization::None;
  if (s == "int8") return WeightQuantization::Int8;
  fail("--quantization '{}' is not one of none, int8", s);
}

const char* weight_quantization_name(WeightQuantization q) {
  return q == WeightQuantization::Int8 ? "int8" : "none";
}

namespace {

// dst[0:n] = the n elements at src (F32, BF16 or F16) as f32.
void widen_row(const uint8_t* src, DType dt, int64_t n, float* dst) {
  if (dt == DType::F32) {
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = dt == DType::BF16 ? bits_to_float(uint32_t(h) << 16) : float(f16::from_bits(h));
  }
}

// A Q8_0 copy of `v` (rows x cols, contiguous: ld = cols) stored in w.converted; the
// original's mapped pages are released. col_begin: the first column of the checkpoint's
// tensor that v holds (a tensor-parallel column shard starts past 0). `name` is for errors.
WeightView to_q8_0(ModelWeights& w, const WeightView& v, int64_t col_begin,
                   const std::string& name, ThreadPool& pool, QuantizationReport& report) {
  if (v.dtype == DType::Q8_0) {  // a GGUF file's Q8_0 weights: already there
    if (v.ld == v.cols) return v;
    // A tensor-parallel column window: contiguous, as load_model_weights does unconverted.
    const WeightView copy = contiguous_copy(w, v);
    release_mapped_pages(v.data, size_t(v.rows * dtype_bytes(v.dtype, v.ld)));
    return copy;
  }
  CPI_CHECK(v.cols % kQ8BlockElems == 0 && col_begin % kQ8BlockElems == 0,
            "--quantization int8: this rank holds columns [{}, {}) of tensor {}, which are not "
            "whole blocks of {} input features (choose another tensor-parallel size or no "
            "quantization)", col_begin, col_begin + v.cols, name, kQ8BlockElems);
  const int64_t row_bytes = dtype_bytes(DType::Q8_0, v.cols);
  std::vector<uint8_t>& out = w.converted.emplace_back(size_t(v.rows * row_bytes));
  const auto* src = static_cast<const uint8_t*>(v.data);
  const int64_t src_ld_bytes = dtype_bytes(v.dtype, v.ld);
  pool.parallel_for(v.rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(size_t(v.cols));
    for (int64_t r = r0; r < r1; ++r) {
      widen_row(src + r * src_ld_bytes, v.dtype, v.cols, row.data());
      quantize_row_q8_0(row.data(), v.cols, out.data() + r * row_bytes);
    }
  });
  release_mapped_pages(v.data, size_t(v.rows * src_ld_bytes));
  report.tensors += 1;
  report.source_bytes += v.rows * dtype_bytes(v.dtype, v.cols);
  report.quantized_bytes += v.rows * row_bytes;
  return WeightView{out.data(), DType::Q8_0, v.rows, v.cols, v.cols};
}

}  // namespace

QuantizationReport quantize_weights_q8_0(ModelWeights& w, const ModelConfig& c,
                                         ThreadPool& pool) {
  const auto t0 = std::chrono::steady_clock::now();
  QuantizationReport report;
  const bool tied = c.tie_word_embeddings;
  w.embed = to_q8_0(w, w.embed, 0, "model.embed_tokens.weight", pool, report);
  if (tied) {  // the LM head: this rank's vocab rows of the quantized embedding
    const int64_t row_bytes = dtype_bytes(DType::Q8_0, w.embed.ld);
    w.lm_head.data = static_cast<const uint8_t*>(w.embed.data) + w.shard.vocab_begin * row_bytes;
    w.lm_head.dtype = DType::Q8_0;
    w.lm_head.ld = w.embed.ld;
  } else {
    w.lm_head = to_q8_0(w, w.lm_head, 0, "lm_head.weight", pool, report);
  }
  const int64_t o_begin = w.shard.q_head_begin * c.head_dim, down_begin = w.shard.ffn_begin;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights& L = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    L.q = to_q8_0(w, L.q, 0, p + "self_attn.q_proj.weight", pool, report);
    L.k = to_q8_0(w, L.k, 0, p + "self_attn.k_proj.weight", pool, report);
    L.v = to_q8_0(w, L.v, 0, p + "self_attn.v_proj.weight", pool, report);
    L.o = to_q8_0(w, L.o, o_begin, p + "self_attn.o_proj.weight", pool, report);
    L.gate = to_q8_0(w, L.gate, 0, p + "mlp.gate_proj.weight", pool, report);
    L.up = to_q8_0(w, L.up, 0, p + "mlp.up_proj.weight", pool, report);
    L.down = to_q8_0(w, L.down, down_begin, p + "mlp.down_proj.weight", pool, report);
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace cpinfer
