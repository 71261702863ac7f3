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

// Heap order: lowest rank first, then leftmost.
bool later(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
}

}  // namespace

void BpeModel::load(const nlohmann::json& model, const JsonFields& f) {
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

  // Vocab: token string -> id.
  const auto& vocab = f.require(model, "model", "vocab");
  f.expect_object(vocab, "model.vocab");
  vocab_.reserve(vocab.size());
  for (const auto& [tok, v] : vocab.items()) {
    const int64_t id = f.integer(v, "model.vocab[\"" + tok + "\"]");
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
    id_to_token_[id] = tok;
    vocab_.emplace(tok, static_cast<int32_t>(id));
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
  const auto& merges = f.require(model, "model", "merges");
  f.expect_array(merges, "model.merges");
  merges_.reserve(merges.size());
  auto lookup = [&](const std::string& tok, size_t i) {
    auto it = vocab_.find(tok);
    if (it == vocab_.end()) {
      fail("{}: model.merges[{}] refers to token \"{}\", which is not in model.vocab", f.source(),
           i, tok);
    }
    return it->second;
  };
  for (size_t i = 0; i < merges.size(); ++i) {
    auto [a, b] = parse_merge(merges[i], i, f);
    const int32_t ia = lookup(a, i), ib = lookup(b, i), merged = lookup(a + b, i);
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
