// GPT-2 ByteLevel alphabet: every byte maps to one printable Unicode character
// (bytes_to_unicode), so a token string like "Ġthe" stands for the bytes " the".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cpinfer::byte_level {

// The code point standing for byte b: printable Latin-1 bytes map to themselves, the
// other 68 bytes to U+0100.. in byte order (0x20 -> U+0120 'Ġ', 0x0A -> U+010A 'Ċ').
char32_t byte_to_char(uint8_t b);

// UTF-8 of byte_to_char(b).
const std::string& byte_to_symbol(uint8_t b);

// Inverse mapping of a whole token string; nullopt if a character is not in the alphabet.
std::optional<std::string> symbols_to_bytes(std::string_view token);

}  // namespace cpinfer::byte_level
