// Fuzz target: config.json parsing (parse_model_config). An accepted config must satisfy the
// invariants the rest of the engine relies on, and must survive model_config_to_json and a
// second parse unchanged (that is what make-model writes).
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuzz_common.h"
#include "model/model_config.h"

using namespace cpinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::as_text(data, size));
  ModelConfig c;
  try {
    c = parse_model_config(text, "config.json");
  } catch (const Error&) {
    return 0;  // rejected with a message
  }
  FUZZ_CHECK(c.hidden_size > 0 && c.intermediate_size > 0 && c.num_layers > 0 &&
                 c.num_q_heads > 0 && c.num_kv_heads > 0 && c.head_dim > 0 &&
                 c.vocab_size > 0 && c.max_position_embeddings > 0,
             "a size is not positive");
  FUZZ_CHECK(c.num_q_heads % c.num_kv_heads == 0 && c.head_dim % 2 == 0, "heads / head_dim");
  FUZZ_CHECK(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0, "rms_norm_eps %g",
             c.rms_norm_eps);
  FUZZ_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 0, "rope_theta %g", c.rope_theta);
  FUZZ_CHECK(std::isfinite(c.rope_scaling.factor) && std::isfinite(c.rope_scaling.low_freq_factor) &&
                 std::isfinite(c.rope_scaling.high_freq_factor),
             "rope_scaling factors must be finite");
  for (int32_t id : c.eos_token_ids) FUZZ_CHECK(id >= 0 && id < c.vocab_size, "eos id %d", id);
  if (c.bos_token_id) FUZZ_CHECK(*c.bos_token_id >= 0 && *c.bos_token_id < c.vocab_size, "bos id");

  // Round trip through what make-model writes.
  const std::string again = model_config_to_json(c).dump();
  ModelConfig d;
  try {
    d = parse_model_config(again, "config.json (written back)");
  } catch (const Error& e) {
    FUZZ_CHECK(false, "an accepted config does not parse after model_config_to_json: %s\n%s",
               e.what(), again.c_str());
  }
  FUZZ_CHECK(d.arch == c.arch && d.hidden_size == c.hidden_size &&
                 d.intermediate_size == c.intermediate_size && d.num_layers == c.num_layers &&
                 d.num_q_heads == c.num_q_heads && d.num_kv_heads == c.num_kv_heads &&
                 d.head_dim == c.head_dim && d.vocab_size == c.vocab_size &&
                 d.max_position_embeddings == c.max_position_embeddings &&
                 d.eos_token_ids == c.eos_token_ids && d.bos_token_id == c.bos_token_id &&
                 d.tie_word_embeddings == c.tie_word_embeddings &&
                 d.rope_scaling.type == c.rope_scaling.type,
             "the written-back config differs: %s", again.c_str());
  return 0;
}
