// `cpinfer tokenize`: text -> ids (or ids -> text) with a model's tokenizer.json, printed as
// one JSON object per line. --lines encodes each input line on its own (golden tests);
// several --text-file are encoded one after another in one process (one tokenizer load).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace cpinfer {
namespace {

struct TokenizeArgs {
  std::string model_dir, tokenizer_path, text, decode_ids;
  std::vector<std::string> text_files;
  bool lines = false, skip_special = false, add_special = false;
};

void print_ids(const std::vector<int32_t>& ids) {
  std::string line = nlohmann::json{{"ids", ids}}.dump();
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
}

int run_tokenize(const TokenizeArgs& a) {
  const Tokenizer tok = a.tokenizer_path.empty() ? load_model_tokenizer(a.model_dir)
                                                 : Tokenizer::from_file(a.tokenizer_path);
  if (!a.decode_ids.empty()) {
    const std::string text = tok.decode(parse_id_list(a.decode_ids, "--decode"), a.skip_special);
    // Invalid UTF-8 (ids that split a character) is shown as U+FFFD.
    std::cout << nlohmann::json{{"text", text}}.dump(-1, ' ', false,
                                                     nlohmann::json::error_handler_t::replace)
              << '\n';
    return 0;
  }
  std::vector<std::string> texts;
  if (a.text_files.empty()) texts.push_back(a.text);
  for (const std::string& f : a.text_files) texts.push_back(read_text_file(f, "--text-file"));
  for (const std::string& text : texts) {
    if (!a.lines) {
      print_ids(tok.encode(text, a.add_special));
      continue;
    }
    // One object per line of the input, the line without its '\n' ("\r" is kept).
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      print_ids(tok.encode(std::string_view(text).substr(start, end - start), a.add_special));
      start = end + 1;
    }
  }
  return 0;
}

}  // namespace

void register_tokenize(CLI::App& app, CommandAction* action) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand(
      "tokenize", "Encode text to token ids (or decode ids) with a model's tokenizer.json");
  auto* src = cmd->add_option_group("tokenizer", "Where the tokenizer comes from (exactly one)");
  src->add_option("--model", args->model_dir, "Model directory containing tokenizer.json, or a GGUF model");
  src->add_option("--tokenizer", args->tokenizer_path, "Path to a tokenizer.json");
  src->require_option(1);
  auto* in = cmd->add_option_group("input", "What to encode or decode (exactly one)");
  in->add_option("--text", args->text, "Text to encode");
  in->add_option("--text-file", args->text_files,
                 "File whose bytes are encoded as one text; several (--text-file A B, or the "
                 "option repeated): each in turn, its output after the previous one's");
  in->add_option("--decode", args->decode_ids, "Comma-separated ids to decode to text");
  in->require_option(1);
  cmd->add_flag("--lines", args->lines,
                "Encode each line of the input separately; print one {\"ids\": [...]} per line");
  cmd->add_flag("--skip-special", args->skip_special, "With --decode: drop special tokens");
  cmd->add_flag("--add-special-tokens", args->add_special,
                "Apply the tokenizer's post_processor template (Llama 3: BOS first), as "
                "transformers' add_special_tokens=True");
  cmd->callback([action, args] { *action = [args] { return run_tokenize(*args); }; });
}

}  // namespace cpinfer
