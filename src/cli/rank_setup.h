// The start every model command (generate, serve, bench latency) makes on each rank.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "core/dtype.h"
#include "dist/comm.h"
#include "dist/parallel_layout.h"
#include "model/model_config.h"

namespace cpinfer {

struct RankModel {
  ModelConfig config;
  ParallelLayout layout;
};

// Checks that the model directory exists, loads its config.json, validates the layout
// against the model's heads and splits `comm` into this rank's TP / PCP / DCP groups.
RankModel setup_rank(const std::string& model_dir, const LayoutSpec& spec, Comm& comm);

// Before any rank starts: the model directory exists, its config.json loads, and the
// layout suits its heads (validate_layout). Throws Error naming the problem.
void check_model_layout(const std::string& model_dir, const LayoutSpec& spec);

// --kv-cache-dtype, the one place it is resolved: f32 -> F32, bf16 -> BF16, auto -> the
// model's dtype as vLLM: BF16 for a "bfloat16" checkpoint (config.json torch_dtype), F32
// otherwise ("float32"; "float16", which the cache cannot store, keeps its precision in
// F32; "" when there is no model). Anything else is an Error.
DType resolve_kv_dtype(const std::string& flag, const std::string& model_dtype);

// --quantization none|int8 on a model command (CLI11 refuses other values at parse time,
// before any rank starts).
void add_quantization_flag(CLI::App* cmd, std::string* value);

// --bf16-math auto|dot|exact on a model command: sets the process-wide choice
// (set_bf16_math, core/cpu_features.h) while the command line is parsed, on every rank.
void add_bf16_math_flag(CLI::App* cmd);

// --int8-math auto|dot|exact on a model command: sets the process-wide choice for Q8_0
// weights (set_int8_math, core/cpu_features.h) while the command line is parsed, on every rank.
void add_int8_math_flag(CLI::App* cmd);

}  // namespace cpinfer
