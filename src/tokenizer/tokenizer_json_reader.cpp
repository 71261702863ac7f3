// See tokenizer_json_reader.h. A SAX handler (nlohmann::json::sax_parse) that builds the tree
// the way nlohmann's own DOM parser does, except inside root.model.vocab / root.model.merges.
#include "tokenizer/tokenizer_json_reader.h"

#include <cmath>
#include <limits>

#include "core/json_depth.h"

namespace cpinfer {

namespace {

using json = nlohmann::json;

class Reader {
 public:
  Reader(json* root, BpeTables* tables) : root_(root), tables_(tables) {}

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) {
    if (capture_ == Capture::Vocab) return vocab_id(v);
    return value(json(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (capture_ == Capture::Vocab) {
      if (v > uint64_t(std::numeric_limits<int64_t>::max())) return false;
      return vocab_id(int64_t(v));
    }
    return value(json(v));
  }
  bool number_float(json::number_float_t v, const std::string&) {
    if (!std::isfinite(v)) return false;  // nlohmann's DOM parser refuses it (out_of_range.406)
    return value(json(v));
  }
  bool string(std::string& s) {
    switch (capture_) {
      case Capture::None: return value(json(std::move(s)));
      case Capture::Vocab: return false;  // an id that is not an integer
      case Capture::Merges: {            // "left right": exactly one space
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) return false;
        tables_->merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        return true;
      }
      case Capture::Pair:  // ["left", "right"]
        if (pair_.size() == 2) return false;
        pair_.push_back(std::move(s));
        return true;
    }
    return false;
  }
  bool binary(json::binary_t&) { return false; }  // not in JSON text

  bool start_object(std::size_t) {
    if (capture_ != Capture::None) return false;  // a vocab id or a merge that is an object
    if (at_model_member("vocab")) {
      if (seen_vocab_) return false;
      seen_vocab_ = true;
      place(json::object());  // the placeholder
      capture_ = Capture::Vocab;
      return true;
    }
    return open(json::object());
  }
  bool key(std::string& k) {
    if (capture_ == Capture::Vocab) {
      pending_token_ = std::move(k);
      return true;
    }
    if (stack_.size() == 1) {  // a member of the root
      root_key_ = k;
      model_key_.clear();
    } else if (stack_.size() == 2) {
      model_key_ = k;
    }
    member_ = &(*stack_.back())[k];
    return true;
  }
  bool end_object() {
    if (capture_ == Capture::Vocab) {
      capture_ = Capture::None;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    if (capture_ == Capture::Merges) {
      capture_ = Capture::Pair;
      pair_.clear();
      return true;
    }
    if (capture_ != Capture::None) return false;
    if (at_model_member("merges")) {
      if (seen_merges_) return false;
      seen_merges_ = true;
      place(json::array());
      capture_ = Capture::Merges;
      return true;
    }
    return open(json::array());
  }
  bool end_array() {
    if (capture_ == Capture::Pair) {
      if (pair_.size() != 2) return false;
      tables_->merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      capture_ = Capture::Merges;
      return true;
    }
    if (capture_ == Capture::Merges) {
      capture_ = Capture::None;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

 private:
  enum class Capture { None, Vocab, Merges, Pair };

  // The value about to start is root.model.<name>, with model an object.
  bool at_model_member(const char* name) const {
    return stack_.size() == 2 && stack_[1]->is_object() && root_key_ == "model" &&
           model_key_ == name;
  }
  bool vocab_id(int64_t id) {
    tables_->vocab.emplace_back(std::move(pending_token_), id);
    return true;
  }
  // Places a value where the parse stands: the root, the next array element, or the member
  // whose key came last. Returns where it went.
  json* place(json&& v) {
    if (stack_.empty()) {
      *root_ = std::move(v);
      return root_;
    }
    if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(v));
      return &stack_.back()->back();
    }
    *member_ = std::move(v);
    return member_;
  }
  // A scalar; inside vocab or merges, anything but what they hold ends the fast path.
  bool value(json&& v) {
    if (capture_ != Capture::None) return false;
    place(std::move(v));
    return true;
  }
  bool open(json&& container) {
    stack_.push_back(place(std::move(container)));
    return true;
  }

  json* root_;
  BpeTables* tables_;
  std::vector<json*> stack_;  // the open containers, root first
  json* member_ = nullptr;    // the member of the innermost object whose key came last
  std::string root_key_, model_key_, pending_token_;
  std::vector<std::string> pair_;
  Capture capture_ = Capture::None;
  bool seen_vocab_ = false, seen_merges_ = false;
};

}  // namespace

bool read_tokenizer_json(std::string_view text, json* root, BpeTables* tables) {
  if (json_nesting_depth(text, kMaxJsonDepth) > kMaxJsonDepth) return false;
  *root = json();
  tables->vocab.clear();
  tables->merges.clear();
  // A real file has ~75 bytes per vocab entry and merge together (Qwen: 11.4 MB, 151k each).
  tables->vocab.reserve(text.size() / 64);
  tables->merges.reserve(text.size() / 64);
  Reader reader(root, tables);
  try {
    return json::sax_parse(text.begin(), text.end(), &reader);
  } catch (const json::exception&) {
    return false;
  }
}

}  // namespace cpinfer
