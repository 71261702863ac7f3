// Reading a whole file into memory at once.
#pragma once
#include <string>

namespace cpinfer {

// Reads the whole file at `path` into *out: sized from the file when it is a regular file (one
// allocation, no copies: a 11 MB tokenizer.json in ~5 ms, where a stringstream took ~150 ms),
// read to EOF otherwise (a pipe). False with errno set when it cannot be opened or read
// (EISDIR for a directory); *out is then unspecified.
bool read_whole_file(const std::string& path, std::string* out);

}  // namespace cpinfer
