// `cpinfer serve`: the OpenAI-compatible server under any layout, like `vllm serve`.
// Every rank loads its shard; rank 0 runs the HTTP server and the engine loop (its main
// thread drives the steps), the other ranks execute the steps rank 0 broadcasts.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "chat/chat_template.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/rank_setup.h"
#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "dist/comm.h"
#include "dist/launcher.h"
#include "dist/watchdog.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/step_executor.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "server/api_server.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace cpinfer {

namespace {

struct ServeArgs {
  std::string model, model_positional, kv_dtype = "auto", generation_config = "auto";
  bool no_overlap_comm = false;
  std::string overlap_comm = "auto";
  std::string quantization = "none";
  std::string chat_template;  // --chat-template FILE (or inline)
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  ServerOptions server;
  int64_t max_model_len = 0, max_num_batched_tokens = 2048, max_num_seqs = 256,
          num_kv_blocks = 0;
  double kv_cache_space_gib = 1.0;
  double step_time_target_ms = 0;
  bool chunked_prefill = true, batched_tokens_given = false, prefix_caching = true;
  int threads_per_rank = 0;
  LayoutSpec layout;
  WatchdogOptions watchdog;
};

// What the prefix cache's block hashes are salted with: everything besides the token ids
// that changes the KV of a block (the model's config.json, the KV-cache dtype, the weight
// quantization).
uint64_t prefix_cache_salt(const std::string& model_dir, DType kv_dtype,
                           const std::string& quantization) {
  std::ifstream f(model_dir + "/config.json", std::ios::binary);
  std::string config((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return uint64_t(std::hash<std::string>{}(config + '\0' + std::string(dtype_name(kv_dtype)) +
                                           '\0' + quantization));
}

// Pages per rank: --num-kv-blocks, or --kv-cache-space GiB of K and V on each rank.
int64_t pool_pages(const ServeArgs& a, const ModelConfig& c, const ParallelLayout& layout,
                   DType kv_dtype) {
  if (a.num_kv_blocks > 0) return a.num_kv_blocks;
  const int64_t kv_heads = tp_shard(c, layout).num_kv_heads;
  const int64_t bytes_per_token =
      2 * c.num_layers * kv_heads * c.head_dim * int64_t(dtype_size(kv_dtype));
  const int64_t pages = int64_t(a.kv_cache_space_gib * double(int64_t(1) << 30)) /
                        (bytes_per_token * a.layout.page_size);
  CPI_CHECK(pages >= 1, "--kv-cache-space {} GiB holds no page of {} tokens", a.kv_cache_space_gib,
            a.layout.page_size);
  return pages;
}

// SIGINT / SIGTERM end the engine loop (rank 0) gracefully: the handler only sets a flag
// (async-signal-safe), a watcher thread passes it on. The other ranks ignore the signals
// (mpirun forwards them to every rank) and leave when rank 0 sends Shutdown.
std::atomic<bool> g_stop_signal{false};
extern "C" void on_stop_signal(int) { g_stop_signal.store(true); }

void install_stop_handler(bool driver) {
  struct sigaction sa {};
  sa.sa_handler = driver ? on_stop_signal : SIG_IGN;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// The loss of a rank (dist/watchdog.h: it died, is unreachable or stopped responding), on rank 0's watchdog thread: new requests and
// /health answer 503 naming the rank, requests in flight get the error, then the process
// exits without any collective (the engine thread may be blocked in one for good). The other
// ranks exit when they see rank 0 go; mpirun, seeing a rank die, ends the job too.
std::atomic<Engine*> g_engine{nullptr};
[[noreturn]] void on_rank_lost(int rank, const std::string& what) {
  const std::string why = fmt::format("rank {} {}; shutting down", rank, what);
  std::fprintf(stderr, "cpinfer: %s\n", why.c_str());
  std::fflush(stderr);
  if (Engine* e = g_engine.load()) {
    e->fail(why);
    // Let the HTTP threads write the errors: until every call in flight has ended (at most
    // 3 s), and at least 1 s, so that /health answers 503 meanwhile.
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    while (clock::now() - t0 < std::chrono::seconds(3) &&
           (clock::now() - t0 < std::chrono::seconds(1) || e->num_live_channels() > 0))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "cpinfer: rank 0: exiting after the loss of rank %d\n", rank);
  std::fflush(stderr);
  std::_Exit(1);
}

void watch_stop_signal(Engine& engine) {
  std::thread([&engine] {
    while (!g_stop_signal.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CPI_LOG_INFO("signal received: shutting down");
    engine.stop();
  }).detach();
}

int run_serve(ServeArgs a) {
  if (a.model.empty()) a.model = a.model_positional;
  Comm& comm = Comm::world();
  const RankModel rm = setup_rank(a.model, a.layout, comm);
  const ModelConfig& config = rm.config;
  const ParallelLayout& layout = rm.layout;
  ThreadPool& pool = global_pool();

  RunnerOptions ro;
  ro.page_size = a.layout.page_size;
  ro.kv_dtype = resolve_kv_dtype(a.kv_dtype, config.torch_dtype);
  ro.quantization = parse_weight_quantization(a.quantization);
  ro.num_pages = pool_pages(a, config, layout, ro.kv_dtype);
  ro.overlap_comm = a.no_overlap_comm ? OverlapMode::Off : parse_overlap_mode(a.overlap_comm);
  ModelRunner runner(a.model, ro, pool, &layout, &comm);
  StepExecutor exec(runner, &comm);
  install_stop_handler(exec.is_driver());
  start_rank_watchdog(comm, a.watchdog, on_rank_lost);  // collective; nothing for a world of one
  if (!exec.is_driver()) {
    exec.worker_loop();
    disarm_rank_watchdog();  // Shutdown received: rank 0 is about to leave normally
    return 0;
  }
  signal(SIGPIPE, SIG_IGN);  // a client that goes away must not end the server

  Tokenizer tok = load_model_tokenizer(a.model);
  std::unique_ptr<ChatTemplate> chat;
  if (!a.chat_template.empty())
    chat = std::make_unique<ChatTemplate>(load_user_chat_template(a.chat_template, a.model));
  else
    chat = load_model_chat_template(a.model);
  if (!chat)
    CPI_LOG_WARN("{} has no chat template: /v1/chat/completions will answer 400", a.model);

  EngineOptions eo;
  eo.max_model_len = a.max_model_len;
  eo.scheduler.max_num_seqs = a.max_num_seqs;
  eo.scheduler.chunked_prefill = a.chunked_prefill;
  eo.scheduler.max_num_batched_tokens = a.max_num_batched_tokens;
  eo.scheduler.step_time_target_s = a.step_time_target_ms / 1000.0;
  eo.prefix_cache.enabled = a.prefix_caching;
  eo.prefix_cache.salt = prefix_cache_salt(a.model, ro.kv_dtype, a.quantization);
  if (!eo.scheduler.chunked_prefill && !a.batched_tokens_given) {
    // Every prompt must fit in one step: the budget grows to the max model length.
    const int64_t capacity = ro.num_pages * ro.page_size * runner.cp_layout().world();
    const int64_t len = a.max_model_len > 0
                            ? a.max_model_len
                            : std::min<int64_t>(derived_max_model_len(config), capacity);
    eo.scheduler.max_num_batched_tokens = std::max(eo.scheduler.max_num_batched_tokens, len);
  }
  Engine engine(exec, tok, eo, pool);
  g_engine.store(&engine);
  struct ForgetEngine {
    ~ForgetEngine() { g_engine.store(nullptr); }
  } forget_engine;

  a.server.model_dir = a.model;
  if (a.enable_auto_tool_choice) a.server.tool_call_format = tool_call_format(a.tool_call_parser);
  else if (!a.tool_call_parser.empty())
    CPI_LOG_WARN("--tool-call-parser {} without --enable-auto-tool-choice: tool calls are not "
                 "parsed (requests with tool_choice \"auto\" get 400)", a.tool_call_parser);
  if (a.server.served_model_name.empty()) a.server.served_model_name = a.model;
  a.server.http_threads = int(std::max<int64_t>(64, a.max_num_seqs + 16));
  a.server.sampling_defaults = a.generation_config == "auto"
                                   ? with_generation_defaults(openai_sampling_defaults(),
                                                              config.generation)
                                   : openai_sampling_defaults();
  CPI_LOG_INFO("sampling defaults of requests that omit them ({}): {}",
               a.generation_config == "auto"
                   ? "--generation-config auto: the model's generation_config.json over OpenAI's"
                   : "--generation-config vllm: OpenAI's",
               describe_sampling_defaults(a.server.sampling_defaults));
  ApiServer server(engine, tok, chat.get(), a.server);
  const int port = server.bind();
  watch_stop_signal(engine);
  server.start();
  CPI_LOG_INFO("serving '{}' ({} layers; {} ranks: tp {} pcp {} dcp {}; {} threads per rank); "
               "max model len {}, KV {} pages of {} tokens per rank ({}), max {} tokens and {} "
               "sequences per step, chunked prefill {}, prefix caching {}",
               a.server.served_model_name, config.num_layers, comm.size(), a.layout.tp,
               a.layout.pcp, a.layout.dcp, pool.size(), engine.options().max_model_len,
               ro.num_pages, ro.page_size, dtype_name(ro.kv_dtype),
               engine.options().scheduler.max_num_batched_tokens,
               engine.options().scheduler.max_num_seqs,
               engine.options().scheduler.chunked_prefill ? "on" : "off",
               engine.options().prefix_cache.enabled ? "on" : "off");
  std::printf("cpinfer serve: listening on http://%s:%d\n", a.server.host.c_str(), port);
  std::fflush(stdout);
  engine.run();
  // After a rank's death the watchdog thread ends the process: no collective from here.
  while (!engine.failure().empty()) std::this_thread::sleep_for(std::chrono::seconds(1));
  server.stop();
  exec.shutdown();
  disarm_rank_watchdog();  // the other ranks leave from now on
  CPI_LOG_INFO("server stopped");
  return 0;
}

}  // namespace

void register_serve(CLI::App& app, CommandAction* action) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (like `vllm serve`)");
  cmd->add_option("model_dir", a->model_positional, "Hugging Face model directory");
  cmd->add_option("--model", a->model, "Hugging Face model directory (or give it positionally)");
  cmd->add_option("--host", a->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", a->server.port, "Port (0: any free port, printed at start)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", a->server.api_key,
                  "Require `Authorization: Bearer KEY` on /v1/*, /tokenize and /detokenize");
  cmd->add_option("--served-model-name", a->server.served_model_name,
                  "The model name in the API (default: the --model path)");
  cmd->add_option("--max-model-len", a->max_model_len,
                  "Prompt + completion tokens per request (default: the model's "
                  "max_position_embeddings (times rope_scaling.factor for yarn and linear "
                  "scaling, as vLLM), capped by the KV cache)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  auto* mbt = cmd->add_option("--max-num-batched-tokens", a->max_num_batched_tokens,
                              "Token budget of one engine step")
                  ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--max-num-seqs", a->max_num_seqs, "Requests running at once")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 16));
  cmd->add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", a->chunked_prefill,
                "Split long prompts over steps, sharing --max-num-batched-tokens with the "
                "running decodes (default on, under every layout)");
  cmd->add_option("--step-time-target-ms", a->step_time_target_ms,
                  "While requests decode, cap each step's prompt tokens so the step takes about "
                  "MS milliseconds (the running streams' inter-token latency while long prompts "
                  "are prefilled chunk by chunk); the cap adapts to measured step times. 0: off "
                  "(--max-num-batched-tokens alone)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e6));
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", a->prefix_caching,
                "Reuse the KV cache of earlier requests' common prompt prefixes, in blocks of "
                "--block-size tokens, under every layout (default on)");
  cmd->add_option("--kv-cache-space", a->kv_cache_space_gib,
                  "GiB of KV cache per rank (like VLLM_CPU_KVCACHE_SPACE)")
      ->capture_default_str()->check(CLI::Range(1e-6, 1e6));
  cmd->add_option("--num-kv-blocks", a->num_kv_blocks,
                  "KV-cache pages per rank (overrides --kv-cache-space)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd->add_option("--overlap-comm", a->overlap_comm,
                  "Under PCP, run the K/V gather beside the attention over each rank's own "
                  "tokens: auto (when the PCP group spans hosts), on, off")
      ->capture_default_str()->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_flag("--no-overlap-comm", a->no_overlap_comm, "The same as --overlap-comm off");
  cmd->add_option("--kv-cache-dtype", a->kv_dtype,
                  "KV-cache storage: auto (the model's dtype: bf16 for a bfloat16 checkpoint, "
                  "else f32), f32, bf16")
      ->capture_default_str();
  add_quantization_flag(cmd, &a->quantization);
  add_bf16_math_flag(cmd);
  add_int8_math_flag(cmd);
  cmd->add_option("--generation-config", a->generation_config,
                  "Sampling defaults of requests that omit them: auto (the model's "
                  "generation_config.json: temperature, top_p, top_k, min_p, "
                  "repetition_penalty) or vllm (OpenAI's: temperature 1, nothing else)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "vllm"}));
  cmd->add_option("--chat-template", a->chat_template,
                  "Jinja chat template file for /v1/chat/completions, instead of the model's "
                  "tokenizer_config.json one (or the template itself, as vLLM takes it)");
  cmd->add_flag("--enable-auto-tool-choice", a->enable_auto_tool_choice,
                "Chat requests with tools (tool_choice \"auto\", the default with tools) get "
                "the model's tool calls parsed into message.tool_calls; needs "
                "--tool-call-parser");
  cmd->add_option("--tool-call-parser", a->tool_call_parser,
                  "How the model writes tool calls: hermes (Qwen2.5, Qwen3: <tool_call> "
                  "blocks) or llama3_json (Llama 3: a JSON object)")
      ->check(CLI::IsMember({"hermes", "llama3_json"}));
  cmd->add_option("--max-request-body-bytes", a->server.max_body_bytes,
                  "Larger request bodies are refused with 413")
      ->capture_default_str();
  cmd->add_option("--http-keep-alive-timeout", a->server.http_keep_alive_timeout_s,
                  "Seconds an idle keep-alive connection stays open (longer than clients keep "
                  "theirs, so none reuses a connection being closed)")
      ->capture_default_str()->check(CLI::Range(1, 3600));
  cmd->add_option("--watchdog-address", a->watchdog.address,
                  "Multi-rank jobs: rank 0's address (IPv4 or interface name) for the private "
                  "rank-liveness channel (default: loopback on one host, else the MPI TCP "
                  "interface; see docs/multi-node.md)");
  cmd->add_option("--watchdog-port", a->watchdog.port,
                  "Multi-rank jobs: that channel's TCP port (0: any free port)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--watchdog-timeout", a->watchdog.heartbeat_timeout_s,
                  "Multi-rank jobs: seconds without a heartbeat after which a rank whose process "
                  "is stopped or starved is declared lost and the job ends (0: never)")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  add_layout_flags(cmd, &a->layout, &a->threads_per_rank);
  cmd->add_option("--threads", a->threads_per_rank, "Alias of --threads-per-rank")
      ->check(CLI::Range(1, 1024));
  cmd->callback([a, action, mbt] {
    CPI_CHECK(a->model.empty() != a->model_positional.empty(),
              "serve needs the model directory: `cpinfer serve DIR` or `cpinfer serve --model DIR`");
    a->batched_tokens_given = mbt->count() > 0;
    CPI_CHECK(!a->enable_auto_tool_choice || !a->tool_call_parser.empty(),
              "--enable-auto-tool-choice needs --tool-call-parser (hermes or llama3_json)");
    CPI_CHECK(a->step_time_target_ms == 0 || a->chunked_prefill,
              "--step-time-target-ms sizes prompt chunks: it needs chunked prefill (drop "
              "--no-enable-chunked-prefill)");
    *action = [a] {
      return run_distributed(cli_args(), a->layout, a->threads_per_rank,
                             [a] { return run_serve(*a); },
                             [a] {
                               const std::string& dir = a->model.empty() ? a->model_positional : a->model;
                               check_model_layout(dir, a->layout);
                               // A bad --chat-template is refused before any rank starts.
                               if (!a->chat_template.empty()) load_user_chat_template(a->chat_template, dir);
                             });
    };
  });
}

}  // namespace cpinfer
