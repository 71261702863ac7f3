#include "tokenizer/bpe.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace cpinfer {
namespace {

// Merge entries come as "left right" strings (older files) or ["left", "right"] pairs.
std::pair<std::string, std::string> parse_merge(const nlohmann::json& m, size_t i,
                                                const JsonFields& f) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
      fail("{}: model.merges[{}] = \"{}\" must be two tokens separated by one space", f.source(), i,
           s);
    }
    return {s.substr(0, sp), s.substr(sp + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  fail("{}: model.merges[{}] must be a \"left right\" string or a [left, right] pair, got {}",
       f.source(), i, m.dump());
}

// model.vocab and model.merges from the tree, checking each entry's JSON type.
BpeTables tables_from_json(const nlohmann::json& model, const JsonFields& f) {
  BpeTables t;
  const auto& vocab = model.at("vocab");  // an object, a merges array beside it: checked
  t.vocab.reserve(vocab.size());
  for (const auto& [tok, v] : vocab.items()) {
    // (The field's path is only spelled out for an error: 151k entries in a real file.)
    const int64_t id = v.is_number_integer() ? v.get<int64_t>()
                                             : f.integer(v, "model.vocab[\"" + tok + "\"]");
    t.vocab.emplace_back(tok, id);
  }
  const auto& merges = model.at("merges");
  t.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) t.merges.push_back(parse_merge(merges[i], i, f));
  return t;
}

// Heap order: lowest rank first, then leftmost.
bool later(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
}

}  // namespace

void BpeModel::load(const nlohmann::json& model, const JsonFields& f, const BpeTables* tables) {
  f.expect_object(model, "model");
  std::string type = f.opt_string(model, "model", "type");
  if (type.empty() && f.find(model, "model", "merges")) type = "BPE";  // older files omit it
  if (type != "BPE") {
    fail("{}: model.type is \"{}\"; only \"BPE\" is supported", f.source(), type);
  }
  if (const auto* d = f.find(model, "model", "dropout"); d && !(d->is_number() && *d == 0)) {
    fail("{}: model.dropout is {}; BPE dropout is not supported", f.source(), d->dump());
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!f.opt_string(model, "model", key).empty()) {
      fail("{}: model.{} is set; byte-level BPE with affixes is not supported", f.source(), key);
    }
  }
  ignore_merges_ = f.flag(model, "model", "ignore_merges", false);

  // Their shapes, in the tree either way (read_tokenizer_json leaves an empty {} and []).
  f.expect_object(f.require(model, "model", "vocab"), "model.vocab");
  f.expect_array(f.require(model, "model", "merges"), "model.merges");
  // Vocab and merges as written: read by read_tokenizer_json, or here from the tree.
  BpeTables own;
  if (tables == nullptr) {
    own = tables_from_json(model, f);
    tables = &own;
  }

  // Vocab: token string -> id.
  vocab_.reserve(tables->vocab.size());
  int64_t max_id = -1;
  for (const auto& e : tables->vocab) max_id = std::max(max_id, e.second);
  if (max_id >= 0 && max_id <= kMaxTokenId) id_to_token_.reserve(size_t(max_id) + 1);
  for (const auto& [tok, id] : tables->vocab) {
    if (id < 0 || id > kMaxTokenId) {
      fail("{}: model.vocab[\"{}\"] = {} is out of range (ids must be in [0, {}])", f.source(),
           tok, id, kMaxTokenId);
    }
    if (static_cast<size_t>(id) >= id_to_token_.size()) id_to_token_.resize(id + 1);
    if (!id_to_token_[id].empty()) {
      fail("{}: model.vocab: id {} is used by both \"{}\" and \"{}\"", f.source(), id,
           id_to_token_[id], tok);
    }
    if (tok.empty()) fail("{}: model.vocab has an empty token (id {})", f.source(), id);
    // (A JSON tree keeps the last of two equal keys; the one-pass reader sees both.)
    if (!vocab_.emplace(tok, static_cast<int32_t>(id)).second)
      fail("{}: model.vocab has the token \"{}\" twice", f.source(), tok);
    id_to_token_[id] = tok;
  }
  // Every byte must have its own token, so that any text is encodable.
  for (int b = 0; b < 256; ++b) {
    const std::string& sym = byte_level::byte_to_symbol(static_cast<uint8_t>(b));
    auto it = vocab_.find(sym);
    if (it == vocab_.end()) {
      fail(
          "{}: model.vocab has no token \"{}\" for byte 0x{:02X}; a byte-level BPE vocab "
          "needs all 256 byte symbols",
          f.source(), sym, b);
    }
    byte_ids_[b] = it->second;
  }
  if (ignore_merges_) {
    for (const auto& [tok, id] : vocab_) {
      if (auto bytes = byte_level::symbols_to_bytes(tok)) bytes_vocab_.emplace(*bytes, id);
    }
  }

  // Merges, ranked by position.
  merges_.reserve(tables->merges.size());
  auto lookup = [&](const std::string& tok, size_t i) {
    auto it = vocab_.find(tok);
    if (it == vocab_.end()) {
      fail("{}: model.merges[{}] refers to token \"{}\", which is not in model.vocab", f.source(),
           i, tok);
    }
    return it->second;
  };
  std::string joined;
  for (size_t i = 0; i < tables->merges.size(); ++i) {
    const auto& [a, b] = tables->merges[i];
    joined.assign(a).append(b);
    const int32_t ia = lookup(a, i), ib = lookup(b, i), merged = lookup(joined, i);
    merges_.put(ia, ib, Merge{static_cast<int32_t>(i), merged});
  }
}

void BpeModel::merge_word(std::string_view piece, BpeScratch& s) const {
  auto& sym = s.symbols;
  auto& heap = s.heap;
  const int32_t n = static_cast<int32_t>(piece.size());
  sym.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    sym[i] = {byte_ids_[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  heap.clear();
  auto consider = [&](int32_t l, int32_t r) {
    const Merge m = merges_.get(sym[l].id, sym[r].id);
    if (m.rank < 0) return;
    heap.push_back({m.rank, l, r, sym[l].id, sym[r].id, m.id});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const auto c = heap.back();
    heap.pop_back();
    // Stale if either side has since been merged into something else: symbols only grow,
    // so unchanged ids at the same adjacent positions mean the pair is still there.
    if (sym[c.left].id != c.left_id || sym[c.left].next != c.right ||
        sym[c.right].id != c.right_id) {
      continue;
    }
    sym[c.left].id = c.new_id;
    const int32_t after = sym[c.right].next;
    sym[c.left].next = after;
    if (after >= 0) sym[after].prev = c.left;
    sym[c.right].id = -1;
    if (sym[c.left].prev >= 0) consider(sym[c.left].prev, c.left);
    if (after >= 0) consider(c.left, after);
  }
  s.ids.clear();
  for (int32_t i = 0; i >= 0; i = sym[i].next) s.ids.push_back(sym[i].id);
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out, BpeScratch& s) const {
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    auto it = bytes_vocab_.find(std::string(piece));
    if (it != bytes_vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = piece.size() <= BpeCache::kMaxPieceBytes;
  const size_t h = cacheable ? BpeCache::hash(piece) : 0;
  if (cacheable && cache_.lookup(piece, h, out)) return;
  merge_word(piece, s);
  out.insert(out.end(), s.ids.begin(), s.ids.end());
  if (cacheable) cache_.insert(piece, h, s.ids.data(), s.ids.size());
}

}  // namespace cpinfer
