#include "model/model_cost.h"

namespace cpinfer {

int64_t linear_macs_per_token(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t q = c.num_q_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t per_layer = H * q + 2 * H * kv + q * H + 3 * H * I;
  return per_layer * c.num_layers;
}

double prefill_flops(const ModelConfig& c, int64_t S) {
  const double s = double(S);
  const double linear = 2.0 * s * double(linear_macs_per_token(c));
  const double pairs = s * (s + 1) / 2;  // causal query-key pairs, the diagonal included
  const double attention = 4.0 * double(c.head_dim) * pairs * double(c.num_q_heads) *
                           double(c.num_layers);
  const double lm_head = 2.0 * double(c.hidden_size) * double(c.vocab_size);
  return linear + attention + lm_head;
}

double decode_bytes_per_token(const ModelConfig& c, double weight_bytes, int64_t context,
                              int64_t kv_bytes_per_token) {
  const double weights = double(linear_macs_per_token(c) + c.vocab_size * c.hidden_size +
                                c.hidden_size) *
                         weight_bytes;
  return weights + double(context) * double(kv_bytes_per_token);
}

int64_t weight_bytes_of(const ModelConfig& c) { return c.torch_dtype == "float32" ? 4 : 2; }

}  // namespace cpinfer
