// Incremental parser of a `text/event-stream` body (the HTML Server-Sent Events format):
// feed it the bytes as they arrive, in chunks of any size, and it hands back each event
// once its terminating blank line has arrived.
//
//   ": keep-alive\n\n"                      -> nothing (a comment)
//   "data: {\"a\":1}\r\n\r\n"               -> {event "", data "{\"a\":1}"}
//   "event: x\ndata: l1\ndata: l2\n\n"      -> {event "x", data "l1\nl2"}
//
// Lines end in "\n", "\r\n" or "\r" (a "\r" at the end of one chunk and a "\n" at the
// start of the next count as one line end). One space after the field's colon is dropped.
// Fields other than `data` and `event` (`id`, `retry`, unknown ones) are ignored, and a
// block without any `data` line dispatches nothing, as the spec says.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace cpinfer {

struct SseEvent {
  std::string event;  // the `event:` field, "" when absent
  std::string data;   // the `data:` lines joined with "\n"
};

class SseParser {
 public:
  // Parses `bytes` and appends every event completed by them to `out`.
  void feed(std::string_view bytes, std::vector<SseEvent>& out);
  // True when bytes of an unfinished line or event are pending: the stream stopped
  // in the middle of an event.
  bool has_partial() const;

 private:
  void line(std::string_view l, std::vector<SseEvent>& out);
  std::string line_;  // the current, unterminated line
  std::string data_, event_;
  bool has_data_ = false;  // a data field was seen in the current block
  bool in_block_ = false;  // a field line was seen since the last blank line
  bool after_cr_ = false;  // the previous byte was "\r": a following "\n" is not a new line
};

}  // namespace cpinfer
