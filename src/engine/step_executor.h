// Runs StepPlans on every rank. Rank 0 calls run(plan): the plan is broadcast, then every
// rank (rank 0 included) executes it on its ModelRunner. Other ranks sit in worker_loop()
// until rank 0 sends Shutdown (which the destructor on rank 0 does if nobody did).
#pragma once
#include <unordered_map>
#include <vector>

#include "dist/comm.h"
#include "engine/model_runner.h"
#include "engine/step_plan.h"

namespace cpinfer {

class StepExecutor {
 public:
  // comm null (or a world of one): everything runs locally, nothing is broadcast.
  StepExecutor(ModelRunner& runner, Comm* comm);
  ~StepExecutor();
  StepExecutor(const StepExecutor&) = delete;
  StepExecutor& operator=(const StepExecutor&) = delete;

  ModelRunner& runner() { return runner_; }
  bool is_driver() const { return rank_ == 0; }

  // Rank 0 only. Forward: returns the logits of the wanted rows ([rows, vocab]), valid until
  // the next run; the caller may change them (sampling patches penalised ids and restores).
  std::vector<float>& run(const StepPlan& plan);
  // Rank 0, after run(): the argmax of each logit row when every sequence of the plan was
  // RowUse::Argmax or None (run() then returned no logits); empty otherwise.
  const std::vector<int32_t>& argmax_ids() const { return runner_.argmax_ids(); }
  // Rank 0 only: every rank applies `ops`, then reports its context-parallel rank R and its
  // pool's free pages. Returns [world][2] = {R, free pages} by world rank.
  std::vector<int64_t> audit(const std::vector<PageOp>& ops = {});
  // Ranks != 0: execute broadcast plans until Shutdown. Between plans a worker polls without
  // pause for kBusyPollMicros, then sleeps between polls (an idle server's workers use next
  // to no CPU; see Comm::broadcast_patient).
  void worker_loop();
  static constexpr int kBusyPollMicros = 2000;
  // Rank 0: tell the workers to leave worker_loop (idempotent).
  void shutdown();

 private:
  std::vector<float>& execute(const StepPlan& plan);
  void apply_page_ops(const std::vector<PageOp>& ops);
  void broadcast(const StepPlan& plan);
  std::vector<int64_t> gather_free_pages();

  ModelRunner& runner_;
  Comm* comm_;
  int rank_ = 0, world_ = 1;
  bool shut_down_ = false;
  bool in_step_ = false;  // an exception mid-step must not broadcast again (peers are mid-collective)
  std::unordered_map<int64_t, SequenceState> seqs_;
  std::vector<SequenceStep> steps_;
  std::vector<uint8_t> buffer_;
};

}  // namespace cpinfer
