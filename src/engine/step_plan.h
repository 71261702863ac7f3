// What every rank executes in one engine step, decided by rank 0 and broadcast as a
// compact byte string (architecture.md: rank 0 is the only scheduler).
#pragma once
#include <cstdint>
#include <vector>

namespace cpinfer {

struct StepPlan {
  enum class Kind : int32_t {
    Forward = 0,   // run the listed sequences' new tokens through the model
    Release = 1,   // return the listed sequences' pages to the pool
    Shutdown = 2,  // workers leave their loop
    Audit = 3,     // every rank reports its free KV pages to rank 0 (StepExecutor::audit)
  };
  struct Seq {
    int64_t id = 0;          // the engine's request id
    int64_t num_tokens = 0;  // new tokens this step (Forward)
    int32_t all_logits = 0;  // logits of every new token instead of only the last
  };
  Kind kind = Kind::Forward;
  std::vector<Seq> seqs;
  std::vector<int32_t> tokens;  // the new tokens of all sequences, back to back

  // Layout: [kind i32][num_seqs i64][num_tokens i64][seqs...][tokens...] (host byte order:
  // every rank runs the same binary on the same architecture).
  std::vector<uint8_t> serialize() const;
  // Throws Error on a truncated or inconsistent buffer.
  static StepPlan deserialize(const std::vector<uint8_t>& bytes);
};

}  // namespace cpinfer
