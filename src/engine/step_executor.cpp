#include "engine/step_executor.h"

#include "core/error.h"

namespace cpinfer {

StepExecutor::StepExecutor(ModelRunner& runner, Comm* comm) : runner_(runner), comm_(comm) {
  if (comm_) {
    rank_ = comm_->rank();
    world_ = comm_->size();
  }
}

StepExecutor::~StepExecutor() {
  if (rank_ == 0 && !in_step_) {
    try {
      shutdown();
    } catch (...) {
      // The job is failing anyway; the launcher aborts every rank.
    }
  }
}

void StepExecutor::broadcast(const StepPlan& plan) {
  if (world_ == 1) return;
  // Two broadcasts: the size, then the bytes (workers cannot know the size in advance).
  int64_t n = 0;
  if (rank_ == 0) {
    buffer_ = plan.serialize();
    n = int64_t(buffer_.size());
  }
  comm_->broadcast(&n, sizeof(n), 0, Group::World);
  if (rank_ != 0) buffer_.resize(size_t(n));
  comm_->broadcast(buffer_.data(), buffer_.size(), 0, Group::World);
}

const std::vector<float>& StepExecutor::run(const StepPlan& plan) {
  CPI_ASSERT(rank_ == 0);
  CPI_CHECK(!shut_down_, "the executor was shut down");
  in_step_ = true;
  broadcast(plan);
  const std::vector<float>& out = execute(plan);
  in_step_ = false;
  return out;
}

std::vector<int64_t> StepExecutor::audit() {
  CPI_ASSERT(rank_ == 0);
  CPI_CHECK(!shut_down_, "the executor was shut down");
  StepPlan p;
  p.kind = StepPlan::Kind::Audit;
  in_step_ = true;
  broadcast(p);
  std::vector<int64_t> out = gather_free_pages();
  in_step_ = false;
  return out;
}

std::vector<int64_t> StepExecutor::gather_free_pages() {
  const int64_t mine[2] = {runner_.cp_layout().rank(), runner_.page_pool().num_free()};
  std::vector<int64_t> all(size_t(2 * world_));
  if (world_ == 1) {
    all.assign(mine, mine + 2);
  } else {
    comm_->all_gather(mine, all.data(), 2, DType::I64, Group::World);
  }
  return all;
}

void StepExecutor::worker_loop() {
  CPI_ASSERT(rank_ != 0);
  for (;;) {
    broadcast(StepPlan{});
    StepPlan plan = StepPlan::deserialize(buffer_);
    if (plan.kind == StepPlan::Kind::Shutdown) return;
    if (plan.kind == StepPlan::Kind::Audit) {
      gather_free_pages();
      continue;
    }
    execute(plan);
  }
}

void StepExecutor::shutdown() {
  if (rank_ != 0 || shut_down_) return;
  shut_down_ = true;
  StepPlan p;
  p.kind = StepPlan::Kind::Shutdown;
  broadcast(p);
}

const std::vector<float>& StepExecutor::execute(const StepPlan& plan) {
  static const std::vector<float> kNone;
  if (plan.kind == StepPlan::Kind::Release) {
    for (const StepPlan::Seq& s : plan.seqs) {
      auto it = seqs_.find(s.id);
      if (it == seqs_.end()) continue;
      runner_.release(it->second);
      seqs_.erase(it);
    }
    return kNone;
  }
  CPI_ASSERT(plan.kind == StepPlan::Kind::Forward);
  steps_.clear();
  const int32_t* tok = plan.tokens.data();
  for (const StepPlan::Seq& s : plan.seqs) {
    steps_.push_back({&seqs_[s.id], tok, s.num_tokens, s.all_logits != 0});
    tok += s.num_tokens;
  }
  return runner_.step(steps_);
}

}  // namespace cpinfer
