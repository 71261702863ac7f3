// Typed access to tokenizer.json fields whose errors name the file and the field path
// (e.g. "tok.json: model.merges[3] must be a string or a [left, right] pair").
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

namespace cpinfer {

// The largest token id a tokenizer.json may use. Tables are indexed by id, so an id of
// 2^31 - 1 would ask for gigabytes; real vocabularies stay below 2^18.
constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;

class JsonFields {
 public:
  using json = nlohmann::json;
  explicit JsonFields(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  // obj[key] if present and not null, else nullptr. obj must be an object (checked).
  const json* find(const json& obj, std::string_view path, std::string_view key) const {
    expect_object(obj, path);
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  const json& require(const json& obj, std::string_view path, std::string_view key) const {
    const json* v = find(obj, path, key);
    if (!v) fail("{}: missing field {}", source_, join(path, key));
    return *v;
  }
  void expect_object(const json& v, std::string_view path) const {
    if (!v.is_object())
      fail("{}: {} must be an object, got {}", source_, name(path), v.type_name());
  }
  void expect_array(const json& v, std::string_view path) const {
    if (!v.is_array()) fail("{}: {} must be an array, got {}", source_, name(path), v.type_name());
  }
  std::string string(const json& v, std::string_view path) const {
    if (!v.is_string()) fail("{}: {} must be a string, got {}", source_, name(path), v.type_name());
    return v.get<std::string>();
  }
  bool boolean(const json& v, std::string_view path) const {
    if (!v.is_boolean())
      fail("{}: {} must be true or false, got {}", source_, name(path), v.dump());
    return v.get<bool>();
  }
  int64_t integer(const json& v, std::string_view path) const {
    if (!v.is_number_integer())
      fail("{}: {} must be an integer, got {}", source_, name(path), v.dump());
    return v.get<int64_t>();
  }
  // Optional boolean field with a default.
  bool flag(const json& obj, std::string_view path, std::string_view key, bool dflt) const {
    const json* v = find(obj, path, key);
    return v ? boolean(*v, join(path, key)) : dflt;
  }
  std::string opt_string(const json& obj, std::string_view path, std::string_view key) const {
    const json* v = find(obj, path, key);
    return v ? string(*v, join(path, key)) : std::string();
  }

  static std::string join(std::string_view path, std::string_view key) {
    return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
  }
  static std::string index(std::string_view path, size_t i) {
    return fmt::format("{}[{}]", path, i);
  }

 private:
  static std::string name(std::string_view path) {
    return path.empty() ? std::string("the top level") : std::string(path);
  }
  std::string source_;
};

}  // namespace cpinfer
