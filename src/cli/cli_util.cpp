#include "cli/cli_util.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace cpinfer {

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  CPI_CHECK(in.good(), "cannot read {} '{}'", what, path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int32_t> parse_id_list(const std::string& list, const std::string& flag) {
  std::vector<int32_t> ids;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && std::isspace(static_cast<unsigned char>(item[used]))) ++used;
    CPI_CHECK(!item.empty() && used == item.size() && v >= 0 && v <= INT32_MAX,
              "{}: '{}' is not a token id (expected comma-separated non-negative integers, "
              "e.g. {} 9707,11,1879)",
              flag, item, flag);
    ids.push_back(static_cast<int32_t>(v));
  }
  CPI_CHECK(!ids.empty(), "{} is empty", flag);
  return ids;
}

}  // namespace cpinfer
