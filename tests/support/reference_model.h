// A float64 reference forward pass of the Qwen2 / Qwen3 / Llama decoder (Qwen3's per-head
// q/k norm; rope_scaling linear, llama3 and yarn), written plainly and sharing no code with
// the engine's kernels, model or attention: the test oracle.
// Weights come from the same safetensors files (widened to double on the fly).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cpinfer::testing {

class ReferenceModel {
 public:
  explicit ReferenceModel(const std::string& model_dir);
  ~ReferenceModel();

  // Full causal forward over tokens[0..n) at positions 0..n-1; returns the logits
  // [rows.size(), vocab] of the requested positions.
  std::vector<double> logits(const std::vector<int32_t>& tokens,
                             const std::vector<int64_t>& rows) const;
  int64_t vocab_size() const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace cpinfer::testing
