#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace cpinfer {

namespace {

std::string nfc_utf8proc(std::string_view in) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                   static_cast<utf8proc_ssize_t>(in.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) fail("NFC normalization failed: {}", utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

// True if NFC keeps c as it is and nothing before c can combine with or reorder around it,
// so that normalization may restart just before c: canonical combining class 0, no
// canonical decomposition (which excludes the NFC_QC=No characters), and not one of the
// NFC_QC=Maybe characters (all of them are marks or conjoining Hangul vowels/trailers).
bool is_nfc_boundary(char32_t c) {
  if (c < 0x300) return true;
  if ((c >= 0x1100 && c <= 0x11FF) || (c >= 0xA960 && c <= 0xA97F) ||
      (c >= 0xD7B0 && c <= 0xD7FF)) {
    return false;
  }
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  if (p->combining_class != 0) return false;
  if (p->category == UTF8PROC_CATEGORY_MN || p->category == UTF8PROC_CATEGORY_MC ||
      p->category == UTF8PROC_CATEGORY_ME) {
    return false;
  }
  const bool canonical_decomp = p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0;
  return !canonical_decomp;
}

}  // namespace

std::string nfc(std::string_view in) {
  // Copy runs that NFC leaves unchanged; hand utf8proc only the spans from the boundary
  // before a non-boundary character up to the next boundary.
  std::string out;
  size_t copied = 0;    // input bytes already emitted
  size_t boundary = 0;  // start of the last boundary character seen
  size_t i = 0;
  while (i < in.size()) {
    if (static_cast<uint8_t>(in[i]) < 0xCC) {  // below U+0300: always a boundary
      boundary = i;
      i += 1 + (static_cast<uint8_t>(in[i]) >= 0xC0);
      continue;
    }
    char32_t c = 0;
    size_t len = utf8::decode(in.substr(i), &c);
    CPI_ASSERT(len > 0);
    if (is_nfc_boundary(c)) {
      boundary = i;
      i += len;
      continue;
    }
    size_t j = i + len;
    while (j < in.size() && (len = utf8::decode(in.substr(j), &c)) > 0 && !is_nfc_boundary(c)) {
      j += len;
    }
    out.append(in.substr(copied, boundary - copied));
    out += nfc_utf8proc(in.substr(boundary, j - boundary));
    copied = boundary = i = j;
  }
  if (copied == 0) return std::string(in);
  out.append(in.substr(copied));
  return out;
}

Normalizer Normalizer::from_json(const nlohmann::json* spec, const JsonFields& f) {
  Normalizer n;
  if (spec) n.add(*spec, "normalizer", f);
  return n;
}

void Normalizer::add(const nlohmann::json& spec, const std::string& path, const JsonFields& f) {
  const std::string type = f.string(f.require(spec, path, "type"), path + ".type");
  if (type == "NFC") {
    nfc_ = true;
  } else if (type == "Sequence") {
    const auto& list = f.require(spec, path, "normalizers");
    f.expect_array(list, path + ".normalizers");
    for (size_t i = 0; i < list.size(); ++i) {
      add(list[i], JsonFields::index(path + ".normalizers", i), f);
    }
  } else {
    fail(
        "{}: {}.type is \"{}\"; supported normalizers are null, \"NFC\" and a \"Sequence\" of "
        "them",
        f.source(), path, type);
  }
}

void Normalizer::apply(std::string_view in, std::string& out) const {
  if (nfc_) {
    out = nfc(in);
  } else {
    out.assign(in);
  }
}

}  // namespace cpinfer
