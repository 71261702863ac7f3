// The communication-volume formulas (model/comm_volume.h, docs/context-parallel.md §11) on
// hand-worked cases; tests/cli/comm_bytes_test.sh checks them against the bytes the
// collectives really move.
#include <gtest/gtest.h>

#include "model/comm_volume.h"
#include "model/synthetic_model.h"

namespace cpinfer {
namespace {

ModelConfig tiny2() {  // make-model --preset tiny --num-layers 2: H 512, 16 q / 2 KV heads of 32
  ModelConfig c = preset_config("tiny");
  c.num_layers = 2;
  return c;
}

double at(const TrafficVolume& v, Traffic t) { return v[size_t(t)]; }

TEST(CommVolume, OneRankMovesNothing) {
  EXPECT_EQ(total_bytes(prefill_comm_bytes(tiny2(), {1, 1, 1, 4}, 777)), 0.0);
  EXPECT_EQ(total_bytes(decode_comm_bytes(tiny2(), {1, 1, 1, 4})), 0.0);
}

TEST(CommVolume, DocsExamplePrefillTp2Pcp2) {
  // n 1000, c 250: rank 0 holds 0-249 and 750-999 (500 real rows, the other 500 arrive).
  const TrafficVolume f32 = prefill_comm_bytes(tiny2(), {2, 2, 1, 4}, 1000);
  EXPECT_EQ(at(f32, Traffic::KvGather), 2.0 * 500 * 2 * 1 * 32 * 4);
  EXPECT_EQ(at(f32, Traffic::HiddenGather), 0.0);
  EXPECT_EQ(at(f32, Traffic::LogitsGather), 4.0 * (151936 - 37984));
  EXPECT_EQ(at(f32, Traffic::TpAllReduce), 4.0 * (2 * 1 * 500 * 512 * 4 / 2));
  EXPECT_EQ(at(f32, Traffic::QueryGather) + at(f32, Traffic::DcpCombine) +
                at(f32, Traffic::PcpCombine) + at(f32, Traffic::Control), 0.0);
  // A bf16 cache ships half the K/V bytes; nothing else changes.
  const TrafficVolume bf = prefill_comm_bytes(tiny2(), {2, 2, 1, 2}, 1000);
  EXPECT_EQ(at(bf, Traffic::KvGather), at(f32, Traffic::KvGather) / 2);
  EXPECT_EQ(total_bytes(bf), total_bytes(f32) - at(f32, Traffic::KvGather) / 2);
}

TEST(CommVolume, PadsAndTheLastTokensHolder) {
  // pcp 2, n 5: padded 8, c 2; rank 0 holds 0, 1 and pads 6, 7 (2 real rows), rank 1 holds
  // 2, 3, 4 and pad 5. Token 4 is in chunk 2, rank 1's tail: its hidden row (512 floats)
  // comes to rank 0.
  const TrafficVolume v = prefill_comm_bytes(tiny2(), {1, 2, 1, 4}, 5);
  EXPECT_EQ(at(v, Traffic::KvGather), 2.0 * 3 * 2 * 2 * 32 * 4);  // tp 1: both KV heads
  EXPECT_EQ(at(v, Traffic::HiddenGather), 512.0 * 4);
  EXPECT_EQ(at(v, Traffic::LogitsGather), 4.0 * (151936 - 75968));
  EXPECT_EQ(at(v, Traffic::TpAllReduce), 0.0);
  // pcp 3, n 301: padded 306, c 51; rank 0: chunk 0 (0-50) and chunk 5 (255-305: 255-300
  // real, 46 rows) -> 97 real rows; 204 arrive. Token 300 is rank 0's own.
  const TrafficVolume p3 = prefill_comm_bytes(tiny2(), {1, 3, 1, 4}, 301);
  EXPECT_EQ(at(p3, Traffic::KvGather), 2.0 * 204 * 2 * 2 * 32 * 4);
  EXPECT_EQ(at(p3, Traffic::HiddenGather), 0.0);
}

TEST(CommVolume, DecodeTp4Pcp2Dcp2) {
  // hq 4 q heads per rank, one KV head; per layer a DCP Q gather of 1 x 4 x 32 floats and one
  // (O, LSE) all-to-all each over DCP and PCP of 4 x 33 floats.
  const TrafficVolume v = decode_comm_bytes(tiny2(), {4, 2, 2, 2});
  EXPECT_EQ(at(v, Traffic::QueryGather), 2.0 * 4 * 32 * 4);
  EXPECT_EQ(at(v, Traffic::DcpCombine), 2.0 * 4 * 33 * 4);
  EXPECT_EQ(at(v, Traffic::PcpCombine), 2.0 * 4 * 33 * 4);
  EXPECT_EQ(at(v, Traffic::LogitsGather), 4.0 * (151936 - 18992));
  EXPECT_EQ(at(v, Traffic::TpAllReduce), 4.0 * (2 * 3 * 512 * 4 / 4));
  EXPECT_EQ(at(v, Traffic::KvGather) + at(v, Traffic::HiddenGather), 0.0);
}

TEST(CommVolume, DecodeBatchUnderPcp) {
  // pcp 2, 5 decodes: rank 0 runs decodes 0, 2, 4 (3), rank 1 decodes 1, 3. Per layer rank 0
  // receives rank 1's 2 rows of q | k | v (16 + 2 + 2 heads of 32 floats) and one (O, LSE)
  // block of 3 rows (the larger rank's count) x 16 heads x 33 floats; then the 2 final hidden
  // rows of rank 1's decodes and the other half of 5 rows' logits.
  const TrafficVolume v = decode_comm_bytes(tiny2(), {1, 2, 1, 4}, 5);
  EXPECT_EQ(at(v, Traffic::QueryGather), 2.0 * 2 * 20 * 32 * 4);
  EXPECT_EQ(at(v, Traffic::PcpCombine), 2.0 * 3 * 16 * 33 * 4);
  EXPECT_EQ(at(v, Traffic::HiddenGather), 2.0 * 512 * 4);
  EXPECT_EQ(at(v, Traffic::LogitsGather), 5.0 * (151936 - 75968) * 4);
  EXPECT_EQ(at(v, Traffic::KvGather) + at(v, Traffic::DcpCombine) + at(v, Traffic::TpAllReduce),
            0.0);
  // One decode is rank 0's: nothing arrives but the combine's and the logits' shares.
  const TrafficVolume one = decode_comm_bytes(tiny2(), {1, 2, 1, 4}, 1);
  EXPECT_EQ(at(one, Traffic::QueryGather) + at(one, Traffic::HiddenGather), 0.0);
  EXPECT_EQ(at(one, Traffic::PcpCombine), 2.0 * 16 * 33 * 4);
}

}  // namespace
}  // namespace cpinfer
