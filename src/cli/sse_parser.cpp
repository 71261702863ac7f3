#include "cli/sse_parser.h"

namespace cpinfer {

void SseParser::feed(std::string_view bytes, std::vector<SseEvent>& out) {
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c != '\n' && c != '\r') {
      after_cr_ = false;
      continue;
    }
    if (c == '\n' && after_cr_) {  // the "\n" of a "\r\n" split across or within chunks
      after_cr_ = false;
      start = i + 1;
      continue;
    }
    after_cr_ = c == '\r';
    line_.append(bytes.data() + start, i - start);
    line(line_, out);
    line_.clear();
    start = i + 1;
  }
  line_.append(bytes.data() + start, bytes.size() - start);
}

bool SseParser::has_partial() const { return !line_.empty() || in_block_; }

void SseParser::line(std::string_view l, std::vector<SseEvent>& out) {
  if (l.empty()) {  // a blank line ends the block
    if (has_data_) out.push_back({std::move(event_), std::move(data_)});
    data_.clear();
    event_.clear();
    has_data_ = in_block_ = false;
    return;
  }
  if (l.front() == ':') return;  // a comment
  in_block_ = true;
  const size_t colon = l.find(':');
  std::string_view field = l.substr(0, colon), value;
  if (colon != std::string_view::npos) {
    value = l.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_.assign(value);
  }
}

}  // namespace cpinfer
