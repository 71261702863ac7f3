// The start of every tests/mpi program that runs a model under a layout: the layout from
// its flags (--tp N --pcp M --dcp K --interleave I --block-size B), the `tiny` test model
// (2 layers, f32, its vocabulary cut to kMpiTestVocab ids) and this rank's ParallelLayout
// with the communicator split by it.
#pragma once
#include <cstdlib>
#include <cstring>
#include <string>

#include "dist/comm.h"
#include "dist/parallel_layout.h"
#include "model/model_config.h"
#include "support/test_models.h"

namespace cpinfer::testing {

inline int int_flag(int argc, char** argv, const char* name, int def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], name)) return std::atoi(argv[i + 1]);
  return def;
}

inline LayoutSpec layout_from_flags(int argc, char** argv) {
  LayoutSpec spec;
  spec.tp = int_flag(argc, argv, "--tp", 1);
  spec.pcp = int_flag(argc, argv, "--pcp", 1);
  spec.dcp = int_flag(argc, argv, "--dcp", 1);
  spec.interleave = int_flag(argc, argv, "--interleave", 1);
  spec.page_size = int_flag(argc, argv, "--block-size", 16);
  return spec;
}

// The tests compare layouts with one rank on the same model, which any vocabulary does; the
// real 151936 ids would make every step mostly LM head. Prime: TP splits it unevenly.
constexpr int64_t kMpiTestVocab = 4099;
// Prompt ids stay below the cut's special tokens (the top 26 ids for Qwen's tokenizer).
constexpr uint32_t kMpiTestPromptIds = uint32_t(kMpiTestVocab - 256);

struct MpiModel {
  std::string dir;
  ModelConfig config;
  ParallelLayout layout;
};

// Collective: every rank calls it.
inline MpiModel mpi_tiny_model(const LayoutSpec& spec, Comm& comm) {
  const std::string dir = test_model("tiny", 2, DType::F32, 5, kMpiTestVocab);
  ModelConfig cfg = load_model_config(dir);
  MpiModel m{dir, cfg, ParallelLayout(spec, cfg.num_q_heads, cfg.num_kv_heads, comm.rank())};
  comm.set_layout(m.layout);
  return m;
}

}  // namespace cpinfer::testing
