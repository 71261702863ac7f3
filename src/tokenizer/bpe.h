// Byte-level BPE model: the vocab and ranked merges of tokenizer.json "model". It works on
// raw bytes: each byte starts as the id of its ByteLevel symbol, then adjacent pairs are
// merged lowest rank first (leftmost on ties), exactly as HF tokenizers' BPE does.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_cache.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/pair_map.h"
#include "tokenizer/tokenizer_json_reader.h"

namespace cpinfer {

// Per-call working memory for BpeModel::encode, reused across the pieces of one text.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // neighbours in the linked list, -1 at the ends; id -1 = merged away
  };
  struct Candidate {
    int32_t rank, left, right, left_id, right_id, new_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::vector<int32_t> ids;
};

class BpeModel {
 public:
  BpeModel() = default;
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Reads model.vocab and model.merges; fails on anything unsupported or inconsistent.
  // `tables`: their entries as read_tokenizer_json took them out of the text (the tree's
  // vocab and merges are then empty); null: read them from the tree.
  void load(const nlohmann::json& model, const JsonFields& f, const BpeTables* tables = nullptr);

  // Appends the ids of one pre-tokenized piece (raw UTF-8 bytes, non-empty).
  void encode(std::string_view piece, std::vector<int32_t>& out, BpeScratch& scratch) const;

  // Vocab tokens as written in tokenizer.json ("Ġthe"); ids may have holes.
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }
  // id -> token string ("" for a hole); size is max id + 1.
  const std::vector<std::string>& id_to_token() const { return id_to_token_; }

 private:
  void merge_word(std::string_view piece, BpeScratch& s) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::array<int32_t, 256> byte_ids_{};  // id of the single-byte token of each byte
  PairMap merges_;
  bool ignore_merges_ = false;
  std::unordered_map<std::string, int32_t> bytes_vocab_;  // raw bytes -> id (ignore_merges)
  mutable BpeCache cache_;
};

}  // namespace cpinfer
