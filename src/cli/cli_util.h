// Small helpers shared by the subcommands.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cpinfer {

// The whole file as bytes; Error "cannot read <what> '<path>'" when it cannot be read.
std::string read_text_file(const std::string& path, const std::string& what);

// "1, 2,3" -> {1, 2, 3}: comma-separated non-negative ids; Error naming `flag` and the bad
// item otherwise (and when the list is empty).
std::vector<int32_t> parse_id_list(const std::string& list, const std::string& flag);

}  // namespace cpinfer
