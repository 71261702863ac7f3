#include "model/tokenizer_cut.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace cpinfer {

using json = nlohmann::json;

namespace {

// A merge as its two parts, from either spelling tokenizer.json uses ("a b" or ["a", "b"]).
bool merge_parts(const json& m, std::string* a, std::string* b) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    *a = m[0].get<std::string>();
    *b = m[1].get<std::string>();
    return true;
  }
  if (!m.is_string()) return false;
  const std::string s = m.get<std::string>();
  const size_t sp = s.find(' ');
  if (sp == std::string::npos) return false;
  *a = s.substr(0, sp);
  *b = s.substr(sp + 1);
  return true;
}

// Renumbers every "special_tokens" entry's "ids" inside a post_processor (TemplateProcessing,
// alone or inside a Sequence's "processors").
void renumber_post_processor(json& node, const std::map<int64_t, int64_t>& new_ids,
                             const std::string& source) {
  if (node.is_array()) {
    for (json& e : node) renumber_post_processor(e, new_ids, source);
    return;
  }
  if (!node.is_object()) return;
  if (node.contains("special_tokens") && node["special_tokens"].is_object()) {
    for (auto& [name, entry] : node["special_tokens"].items()) {
      if (!entry.contains("ids") || !entry["ids"].is_array()) continue;
      for (json& id : entry["ids"]) {
        CPI_CHECK(id.is_number_integer(), "{}: post_processor special token '{}' has a "
                  "non-integer id {}", source, name, id.dump());
        const auto it = new_ids.find(id.get<int64_t>());
        CPI_CHECK(it != new_ids.end(), "{}: post_processor special token '{}' has id {}, "
                  "which is not an added token", source, name, id.get<int64_t>());
        id = it->second;
      }
    }
  }
  if (node.contains("processors")) renumber_post_processor(node["processors"], new_ids, source);
}

}  // namespace

CutTokenizer cut_tokenizer(const json& tokenizer, int64_t vocab_size, const std::string& source) {
  CPI_CHECK(tokenizer.is_object() && tokenizer.contains("model") &&
                tokenizer["model"].is_object(), "{}: no 'model' object", source);
  const json& model = tokenizer["model"];
  CPI_CHECK(model.value("type", std::string()) == "BPE", "{}: only a BPE tokenizer can be cut "
            "to a smaller vocabulary, this one's model type is {}", source,
            model.contains("type") ? model["type"].dump() : std::string("missing"));
  CPI_CHECK(tokenizer.contains("decoder") && tokenizer["decoder"].is_object() &&
                tokenizer["decoder"].value("type", std::string()) == "ByteLevel",
            "{}: only a byte-level BPE (decoder ByteLevel) can be cut to a smaller vocabulary: "
            "its 256 byte symbols keep every text encodable", source);
  CPI_CHECK(model.contains("vocab") && model["vocab"].is_object(), "{}: model.vocab must be "
            "an object", source);
  CPI_CHECK(model.contains("merges") && model["merges"].is_array(), "{}: model.merges must be "
            "an array", source);

  // The added tokens in id order; they must all lie above the regular vocabulary.
  std::vector<const json*> added;
  if (tokenizer.contains("added_tokens")) {
    CPI_CHECK(tokenizer["added_tokens"].is_array(), "{}: added_tokens must be an array",
              source);
    for (const json& t : tokenizer["added_tokens"]) {
      CPI_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_integer(),
                "{}: added_tokens entries need an integer 'id', found {}", source, t.dump());
      added.push_back(&t);
    }
  }
  std::sort(added.begin(), added.end(), [](const json* a, const json* b) {
    return (*a)["id"].get<int64_t>() < (*b)["id"].get<int64_t>();
  });
  const int64_t num_added = int64_t(added.size());
  const int64_t keep = vocab_size - num_added;  // regular ids [0, keep) stay
  CPI_CHECK(keep >= 256, "--vocab-size {} is too small for {}: it needs the 256 byte symbols "
            "plus its {} added tokens, at least {}", vocab_size, source, num_added,
            256 + num_added);

  int64_t max_regular = -1;
  std::vector<char> present(size_t(keep), 0);
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    CPI_CHECK(it.value().is_number_integer(), "{}: vocab entry '{}' is not an integer id",
              source, it.key());
    const int64_t id = it.value().get<int64_t>();
    max_regular = std::max(max_regular, id);
    if (id >= 0 && id < keep) present[size_t(id)] = 1;
  }
  CPI_CHECK(keep <= max_regular, "--vocab-size {} does not cut {}: it has {} regular and {} "
            "added tokens", vocab_size, source, max_regular + 1, num_added);
  for (int64_t id = 0; id < keep; ++id)
    CPI_CHECK(present[size_t(id)], "{}: the regular vocabulary has no id {}, below the cut at "
              "{}", source, id, keep);
  if (num_added > 0)
    CPI_CHECK((*added.front())["id"].get<int64_t>() > max_regular, "{}: added token {} lies "
              "inside the regular vocabulary (ids up to {}): cannot renumber it", source,
              (*added.front())["id"].get<int64_t>(), max_regular);

  CutTokenizer out;
  out.tokenizer = tokenizer;
  json& cut_model = out.tokenizer["model"];
  json vocab = json::object();
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it)
    if (it.value().get<int64_t>() < keep) vocab[it.key()] = it.value();
  for (int b = 0; b < 256; ++b) {
    const std::string& sym = byte_level::byte_to_symbol(uint8_t(b));
    CPI_CHECK(vocab.contains(sym), "{}: the byte symbol '{}' (byte {}) has an id at or past the "
              "cut at {}: a smaller vocabulary could not encode every text", source, sym, b,
              keep);
  }
  json merges = json::array();
  std::string a, b;
  for (const json& m : model["merges"]) {
    CPI_CHECK(merge_parts(m, &a, &b), "{}: a merge must be \"a b\" or [\"a\", \"b\"], found {}",
              source, m.dump());
    if (vocab.contains(a) && vocab.contains(b) && vocab.contains(a + b)) merges.push_back(m);
  }
  cut_model["vocab"] = std::move(vocab);
  cut_model["merges"] = std::move(merges);

  if (num_added > 0) {
    for (int64_t j = 0; j < num_added; ++j)
      out.new_ids[(*added[size_t(j)])["id"].get<int64_t>()] = keep + j;
    for (json& t : out.tokenizer["added_tokens"])
      t["id"] = out.new_ids.at(t["id"].get<int64_t>());
  }
  if (out.tokenizer.contains("post_processor"))
    renumber_post_processor(out.tokenizer["post_processor"], out.new_ids, source);
  return out;
}

}  // namespace cpinfer
