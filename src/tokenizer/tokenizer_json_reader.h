// tokenizer.json read in one pass, without a JSON tree for its two big members: a real
// Qwen/Llama file is ~11 MB, almost all of it model.vocab (151k "token": id entries) and
// model.merges (151k "a b" strings or ["a", "b"] pairs). As a tree (nlohmann::json) those
// are ~600k allocations to build and free again; here they go straight into two vectors,
// and the tree holds the rest (normalizer, pre_tokenizer, added_tokens, ...) with an empty
// model.vocab {} and model.merges [] in their place.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cpinfer {

// model.vocab and model.merges as written, in file order.
struct BpeTables {
  std::vector<std::pair<std::string, int64_t>> vocab;     // token -> id
  std::vector<std::pair<std::string, std::string>> merges;  // (left, right)
};

// True: *root is the document (vocab and merges emptied) and *tables has their entries.
// False: the text is not a plain, well-formed tokenizer.json (a syntax error, nesting past
// kMaxJsonDepth, a vocab value that is not an integer in int64 range, a merge that is not
// "a b" or ["a", "b"], vocab or merges given twice, a number past double's range); the
// caller then parses it the ordinary way (parse_json_text and BpeModel's own checks), whose
// errors name the problem. *root and *tables are then unspecified.
bool read_tokenizer_json(std::string_view text, nlohmann::json* root, BpeTables* tables);

}  // namespace cpinfer
