// `cpinfer generate`: one prompt through the model, text streamed to stdout; or several
// (--prompt-ids-file) one after another in the same process.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/rank_setup.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/generate.h"
#include "engine/model_runner.h"
#include "engine/step_executor.h"
#include "cp/cp_layout.h"
#include "dist/comm.h"
#include "dist/launcher.h"
#include "dist/parallel_layout.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace cpinfer {

namespace {

struct GenerateArgs {
  std::string model, prompt, prompt_ids, prompt_file, prompt_ids_file, prefill_chunks,
      logits_out, prompt_logits_out, kv_dtype = "auto", generation_config = "auto";
  int64_t max_tokens = 64, top_k = 0, prefill_chunk = 2048;
  float temperature = 0.f, top_p = 1.f, min_p = 0.f, repetition_penalty = 1.f,
        presence_penalty = 0.f, frequency_penalty = 0.f;
  uint64_t seed = 0;
  // Which of the sampling flags generation_config.json may default were given.
  bool given_temperature = false, given_top_p = false, given_top_k = false,
       given_min_p = false, given_repetition_penalty = false;
  int threads_per_rank = 0;
  std::string quantization = "none";
  bool json = false, ignore_eos = false;
  LayoutSpec layout;
};

// Whether the prompts are token ids (--prompt-ids, --prompt-ids-file): no tokenizer reads them.
bool prompts_are_ids(const GenerateArgs& a) {
  return !a.prompt_ids_file.empty() || !a.prompt_ids.empty();
}

// The prompts: one, or one per non-empty line of --prompt-ids-file. `tok` may be null when
// the prompts are ids.
std::vector<std::vector<int32_t>> read_prompts(const GenerateArgs& a, const Tokenizer* tok) {
  std::vector<std::vector<int32_t>> prompts;
  if (!a.prompt_ids_file.empty()) {
    std::istringstream in(read_text_file(a.prompt_ids_file, "--prompt-ids-file"));
    std::string line;
    for (int lineno = 1; std::getline(in, line); ++lineno) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      prompts.push_back(
          parse_id_list(line, fmt::format("--prompt-ids-file line {}", lineno)));
    }
    CPI_CHECK(!prompts.empty(), "--prompt-ids-file '{}' has no prompt (one id list a line)",
              a.prompt_ids_file);
  } else if (!a.prompt_ids.empty()) {
    prompts.push_back(parse_id_list(a.prompt_ids, "--prompt-ids"));
  } else if (!a.prompt_file.empty()) {
    prompts.push_back(tok->encode(read_text_file(a.prompt_file, "prompt file")));
  } else {
    prompts.push_back(tok->encode(a.prompt));
  }
  return prompts;
}

// The sampling parameters: the flags given; for those not given, the model's
// generation_config.json values under --generation-config auto, else the flags' defaults
// (greedy, no top_p / top_k / min_p, no penalty).
SamplingParams sampling_params(const GenerateArgs& a, const ModelConfig& c) {
  SamplingParams d;
  d.temperature = a.temperature;
  d.top_p = a.top_p;
  d.top_k = a.top_k;
  d.min_p = a.min_p;
  d.repetition_penalty = a.repetition_penalty;
  if (a.generation_config == "auto") {
    const SamplingParams f = with_generation_defaults(d, c.generation);
    if (!a.given_temperature) d.temperature = f.temperature;
    if (!a.given_top_p) d.top_p = f.top_p;
    if (!a.given_top_k) d.top_k = f.top_k;
    if (!a.given_min_p) d.min_p = f.min_p;
    if (!a.given_repetition_penalty) d.repetition_penalty = f.repetition_penalty;
  }
  d.presence_penalty = a.presence_penalty;
  d.frequency_penalty = a.frequency_penalty;
  d.seed = a.seed;
  return d;
}

// Every rank builds the same requests (the tokenizer is deterministic), so all ranks size
// their caches alike without a broadcast.
GenerateRequest build_request(const GenerateArgs& a, const SamplingParams& sampling,
                              std::vector<int32_t> prompt) {
  GenerateRequest req;
  req.prompt = std::move(prompt);
  CPI_CHECK(!req.prompt.empty(), "the prompt is empty: it encodes to zero tokens");
  req.max_tokens = a.max_tokens;
  req.sampling = sampling;
  req.ignore_eos = a.ignore_eos;
  req.keep_logits = !a.logits_out.empty();
  req.keep_prompt_logits = !a.prompt_logits_out.empty();
  req.prefill_chunk = a.prefill_chunk;
  validate_sampling(req.sampling);
  return req;
}

// Writes float32 little-endian values to `path`; `flag` names the option in errors.
void write_floats(const std::string& path, const std::vector<float>& v, const char* flag) {
  std::ofstream f(path, std::ios::binary);
  CPI_CHECK(f.good(), "cannot write {} file '{}'", flag, path);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  CPI_CHECK(f.good(), "writing {} file '{}' failed", flag, path);
}

// logits_path: --logits-out, or FILE.N for prompt N of --prompt-ids-file ("" = none);
// prompt_logits_path the same for --prompt-logits-out.
void print_outputs(const GenerateArgs& a, const Tokenizer& tok, const GenerateRequest& req,
                   const GenerateResult& res, const ModelRunner& runner, int threads,
                   const std::string& logits_path, const std::string& prompt_logits_path) {
  if (!logits_path.empty()) write_floats(logits_path, res.logits, "--logits-out");
  if (!prompt_logits_path.empty())
    write_floats(prompt_logits_path, res.prompt_logits, "--prompt-logits-out");
  CPI_LOG_INFO("{} tokens ({}); ttft {:.3f}s; decode {:.2f} tok/s", res.tokens.size(),
               res.finish_reason, res.ttft_s, res.decode_tokens_per_s());
  if (!a.json) return;
  const CpLayout& cp = runner.cp_layout();
  const int64_t total = int64_t(req.prompt.size() + res.tokens.size()) - 1;  // cached at the end
  nlohmann::json j;
  j["token_ids"] = res.tokens;
  j["text"] = tok.decode(res.tokens, /*skip_special_tokens=*/true);
  j["prompt_tokens"] = req.prompt.size();
  j["completion_tokens"] = res.tokens.size();
  j["finish_reason"] = res.finish_reason;
  j["ttft_s"] = res.ttft_s;
  j["decode_tokens_per_s"] = res.decode_tokens_per_s();
  j["prefill_tokens_per_s"] = res.ttft_s > 0 ? double(req.prompt.size()) / res.ttft_s : 0.0;
  j["load_s"] = runner.load_seconds();
  j["peak_rss_bytes"] = peak_rss_bytes();  // rank 0's
  j["rss_bytes"] = current_rss_bytes();     // rank 0's, at the end
  j["quantization"] = a.quantization;
  j["threads_per_rank"] = threads;
  j["layout"] = {{"tp", a.layout.tp}, {"pcp", a.layout.pcp}, {"dcp", a.layout.dcp},
                 {"interleave", a.layout.interleave}, {"block_size", a.layout.page_size}};
  // KV bytes rank 0 holds for this request at its end (rank 0's share is the largest).
  j["kv_bytes_per_rank"] = cp.local_len(total, 0) * runner.kv_bytes_per_local_token();
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// The body every rank runs (under run_distributed).
int run_generate(const GenerateArgs& a) {
  Comm& comm = Comm::world();
  const RankModel rm = setup_rank(a.model, a.layout, comm);
  const ParallelLayout& layout = rm.layout;
  ThreadPool& pool = global_pool();
  // Rank 0 decodes the output; another rank loads the tokenizer only to encode a text prompt
  // (a large tokenizer.json costs each rank ~0.4 s of CPU, most of a launch's start-up).
  std::optional<Tokenizer> tokenizer;
  if (comm.rank() == 0 || !prompts_are_ids(a)) tokenizer.emplace(load_model_tokenizer(a.model));
  const SamplingParams sampling = sampling_params(a, rm.config);
  std::vector<GenerateRequest> reqs;
  for (auto& prompt : read_prompts(a, tokenizer ? &*tokenizer : nullptr))
    reqs.push_back(build_request(a, sampling, std::move(prompt)));
  const bool several = !a.prompt_ids_file.empty();
  if (!a.prefill_chunks.empty()) {  // one per prompt (checked to come with --prompt-ids-file)
    std::vector<int64_t> chunks;
    std::stringstream ss(a.prefill_chunks);
    for (std::string item; std::getline(ss, item, ',');) {
      size_t used = 0;
      int64_t v = 0;
      try {
        v = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      CPI_CHECK(!item.empty() && used == item.size() && v >= 1 && v <= (int64_t(1) << 20),
                "--prefill-chunks: '{}' is not a chunk size (comma-separated integers in "
                "[1, 1048576], one per prompt, e.g. 1,7,256)", item);
      chunks.push_back(v);
    }
    CPI_CHECK(chunks.size() == reqs.size(),
              "--prefill-chunks has {} values for the {} prompts of --prompt-ids-file",
              chunks.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) reqs[i].prefill_chunk = chunks[i];
  }

  RunnerOptions ro;
  ro.page_size = a.layout.page_size;
  ro.kv_dtype = resolve_kv_dtype(a.kv_dtype, rm.config.torch_dtype);
  ro.quantization = parse_weight_quantization(a.quantization);
  // Room for the longest request; each one releases its pages when it ends.
  ro.max_cache_tokens = 0;
  for (const GenerateRequest& req : reqs)
    ro.max_cache_tokens = std::max(ro.max_cache_tokens, int64_t(req.prompt.size()) + req.max_tokens);
  ModelRunner runner(a.model, ro, pool, &layout, &comm);
  StepExecutor exec(runner, &comm);
  if (!exec.is_driver()) {
    exec.worker_loop();
    return 0;
  }
  const Tokenizer& tok = *tokenizer;  // rank 0 (the driver) always has it
  CPI_LOG_INFO("loaded {} ({} layers) in {:.2f}s; {} ranks (tp {} pcp {} dcp {}), {} threads "
               "per rank; {} prompt(s), the first {} tokens; KV cache {}",
               a.model, runner.config().num_layers, runner.load_seconds(), comm.size(),
               a.layout.tp, a.layout.pcp, a.layout.dcp, pool.size(), reqs.size(),
               reqs[0].prompt.size(), dtype_name(ro.kv_dtype));
  CPI_LOG_INFO("sampling ({}): {}, presence_penalty {}, frequency_penalty {}",
               a.generation_config == "auto"
                   ? "--generation-config auto: the model's generation_config.json for the "
                     "flags not given"
                   : "--generation-config vllm: the flags and their defaults",
               describe_sampling_defaults(sampling), sampling.presence_penalty,
               sampling.frequency_penalty);

  // Several prompts with --json: stdout is the JSON lines only (the text is in each line's
  // "text"), so that a script can read one line per prompt.
  const bool stream_text = !(several && a.json);
  for (size_t i = 0; i < reqs.size(); ++i) {
    StreamDecoder stream(tok, /*skip_special_tokens=*/true);
    GenerateResult res = generate(exec, reqs[i], pool, [&](int32_t id) {
      if (!stream_text) return;
      std::string piece = stream.push(id);
      if (!piece.empty()) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
    });
    if (stream_text) {
      std::string rest = stream.flush();
      std::fwrite(rest.data(), 1, rest.size(), stdout);
      std::fputc('\n', stdout);
    }
    std::string logits_path = a.logits_out, prompt_logits_path = a.prompt_logits_out;
    if (several && !logits_path.empty()) logits_path += fmt::format(".{}", i);
    if (several && !prompt_logits_path.empty()) prompt_logits_path += fmt::format(".{}", i);
    print_outputs(a, tok, reqs[i], res, runner, pool.size(), logits_path, prompt_logits_path);
    std::fflush(stdout);
  }
  exec.shutdown();
  return 0;
}

}  // namespace

void register_generate(CLI::App& app, CommandAction* action) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text for one prompt");
  cmd->add_option("--model", a->model, "Hugging Face model directory")->required();
  auto* p1 = cmd->add_option("--prompt", a->prompt, "Prompt text");
  auto* p2 = cmd->add_option("--prompt-ids", a->prompt_ids, "Prompt token ids, e.g. 1,2,3");
  auto* p3 = cmd->add_option("--prompt-file", a->prompt_file, "Read the prompt text from a file");
  auto* p4 = cmd->add_option(
      "--prompt-ids-file", a->prompt_ids_file,
      "Several prompts, one a line (token ids, e.g. 1,2,3), run one after another in this "
      "process, each from an empty KV cache; with --json stdout is one JSON line per prompt; "
      "--logits-out F writes prompt N's (from 0) to F.N");
  p1->excludes(p2, p3, p4);
  p2->excludes(p3, p4);
  p3->excludes(p4);
  cmd->add_option("--max-tokens", a->max_tokens, "Tokens to generate at most")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  auto* temperature =
      cmd->add_option("--temperature", a->temperature, "0 = greedy")->capture_default_str();
  auto* top_p = cmd->add_option("--top-p", a->top_p, "Nucleus sampling mass in (0, 1]")
                    ->capture_default_str();
  auto* top_k = cmd->add_option("--top-k", a->top_k, "Sample among the k most likely (0 = off)")
                    ->capture_default_str();
  auto* min_p = cmd->add_option("--min-p", a->min_p,
                                "Drop tokens less likely than this times the most likely, in "
                                "[0, 1] (0 = off)")
                    ->capture_default_str();
  auto* repetition = cmd->add_option("--repetition-penalty", a->repetition_penalty,
                                     "> 0: divide positive logits (multiply negative ones) of "
                                     "the tokens in the prompt and the output (1 = off)")
                         ->capture_default_str();
  cmd->add_option("--presence-penalty", a->presence_penalty,
                  "In [-2, 2]: subtracted from the logit of every token generated so far")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", a->frequency_penalty,
                  "In [-2, 2]: subtracted from a token's logit once per time it was generated")
      ->capture_default_str();
  cmd->add_option("--generation-config", a->generation_config,
                  "Defaults of --temperature, --top-p, --top-k, --min-p, --repetition-penalty "
                  "when not given: auto (the model's generation_config.json) or vllm (the "
                  "defaults shown here)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "vllm"}));
  cmd->add_option("--seed", a->seed, "Sampling seed")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print a JSON summary as the last stdout line");
  cmd->add_option("--logits-out", a->logits_out,
                  "Write the logits that chose each token (float32 LE, [steps, vocab])");
  cmd->add_option("--prompt-logits-out", a->prompt_logits_out,
                  "Write the next-token logits after every prompt position (float32 LE, "
                  "[prompt tokens, vocab]; scoring a given continuation)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Do not stop at EOS (benchmarks)");
  add_layout_flags(cmd, &a->layout, &a->threads_per_rank);
  cmd->add_option("--threads", a->threads_per_rank, "Alias of --threads-per-rank")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--kv-cache-dtype", a->kv_dtype,
                  "KV-cache storage: auto (the model's dtype: bf16 for a bfloat16 checkpoint, "
                  "else f32), f32, bf16")
      ->capture_default_str();
  add_quantization_flag(cmd, &a->quantization);
  add_bf16_math_flag(cmd);
  add_int8_math_flag(cmd);
  auto* chunk = cmd->add_option("--prefill-chunk", a->prefill_chunk, "Prompt tokens per prefill step")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  auto* chunks = cmd->add_option("--prefill-chunks", a->prefill_chunks,
                                 "With --prompt-ids-file: each prompt's --prefill-chunk, in "
                                 "file order, e.g. 1,7,256");
  chunks->excludes(p1, p2, p3, chunk);
  cmd->callback([a, action, p1, p2, p3, p4, temperature, top_p, top_k, min_p, repetition] {
    a->given_temperature = temperature->count() > 0;
    a->given_top_p = top_p->count() > 0;
    a->given_top_k = top_k->count() > 0;
    a->given_min_p = min_p->count() > 0;
    a->given_repetition_penalty = repetition->count() > 0;
    CPI_CHECK(p1->count() + p2->count() + p3->count() + p4->count() == 1,
              "generate needs exactly one of --prompt, --prompt-ids, --prompt-file, "
              "--prompt-ids-file");
    *action = [a] {
      return run_distributed(cli_args(), a->layout, a->threads_per_rank,
                             [a] { return run_generate(*a); },
                             [a] { check_model_layout(a->model, a->layout); });
    };
  });
}

}  // namespace cpinfer
