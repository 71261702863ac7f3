// A tokenizer.json cut to a smaller vocabulary, for small synthetic models (make-model
// --vocab-size): the LM head and embedding of a real 150k-token vocabulary dominate a small
// model's step, and tests that compare runs with each other need any vocabulary, not that
// one.
//
// The cut keeps a valid byte-level BPE tokenizer that any text can still be encoded with:
//   - the S added (special) tokens move to the top ids [N - S, N), in their old order;
//   - the regular vocabulary keeps ids [0, N - S) (the 256 byte symbols must be among them);
//   - a merge stays when both its parts and its result are kept (a merge whose result is
//     gone can never fire, so words stay split where the cut vocabulary has no token);
//   - special-token ids in the post_processor are renumbered like the added tokens.
// Worked example (Qwen, S = 26 added tokens at 151643..151668, N = 4096): regular ids
// 0..4069 stay, <|endoftext|> 151643 -> 4070, <|im_start|> 151644 -> 4071, ..., 151668 ->
// 4095; "Ġthe" (id 279) stays, a merge producing id 5000 is dropped.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace cpinfer {

struct CutTokenizer {
  nlohmann::json tokenizer;            // the cut tokenizer.json
  std::map<int64_t, int64_t> new_ids;  // each added token's old id -> its new id
};

// Cuts `tokenizer` (read from `source`, named in errors) to ids [0, vocab_size). Throws an
// Error naming the problem when it cannot: not a byte-level BPE, added tokens inside the
// regular vocabulary, a regular vocabulary with holes below the cut, or a vocab_size too
// small for the 256 byte symbols plus the added tokens.
CutTokenizer cut_tokenizer(const nlohmann::json& tokenizer, int64_t vocab_size,
                           const std::string& source);

}  // namespace cpinfer
