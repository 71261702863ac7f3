// Model cost figures (MFU / MBU denominators): the hand-worked qwen2.5-0.5b numbers, and the
// linear multiply-adds per token against the element count of the projection tensors of a
// real synthetic checkpoint (an independent count from the file).
#include <gtest/gtest.h>

#include "model/model_config.h"
#include "model/model_cost.h"
#include "model/safetensors.h"
#include "model/synthetic_model.h"
#include "support/test_models.h"

namespace cpinfer {
namespace {

ModelConfig qwen05() { return preset_config("qwen2.5-0.5b"); }  // bf16, 24 layers

TEST(ModelCost, Qwen05HandWorked) {
  const ModelConfig c = qwen05();
  // per layer: q 896*896 + k,v 2*896*128 + o 896*896 + gate/up/down 3*896*4864
  EXPECT_EQ(linear_macs_per_token(c), 24 * (896 * 896 * 2 + 2 * 896 * 128 + 3 * 896 * 4864));
  EXPECT_EQ(linear_macs_per_token(c), 357826560);
  // S = 512: 2 * 512 * 357826560 + 4 * 64 * (512 * 513 / 2) * 14 * 24 + 2 * 896 * 151936
  EXPECT_DOUBLE_EQ(prefill_flops(c, 512), 366414397440.0 + 11296309248.0 + 272269312.0);
  // decode: (linear + LM head + one embedding row) * 2 bytes + context * kv bytes
  EXPECT_DOUBLE_EQ(decode_bytes_per_token(c, 2, 1000, 12288),
                   (357826560.0 + 151936.0 * 896 + 896) * 2 + 1000.0 * 12288);
  EXPECT_EQ(weight_bytes_of(c), 2);
}

TEST(ModelCost, LinearMacsMatchTheCheckpointsTensors) {
  const std::string dir = testing::test_model("qwen2.5-0.5b", 2, DType::F32);
  const ModelConfig c = load_model_config(dir);
  SafetensorsStore st = SafetensorsStore::open(dir);
  int64_t elems = 0;
  for (const std::string& n : st.names())
    if (n.find("_proj.weight") != std::string::npos) elems += st.get(n).numel();
  EXPECT_EQ(linear_macs_per_token(c), elems);
  EXPECT_EQ(weight_bytes_of(c), 4);
}

}  // namespace
}  // namespace cpinfer
