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
  // Workers wait for the size between steps, for as long as the server is idle: patiently
  // (Comm::broadcast_patient), so an idle job does not keep a core busy per worker. 2 ms of
  // busy polling first: a step that follows another at once (the rank-0 work between two
  // steps takes well under that) sees no sleep.
  int64_t n = 0;
  if (rank_ == 0) {
    buffer_ = plan.serialize();
    n = int64_t(buffer_.size());
  }
  comm_->broadcast_patient(&n, sizeof(n), 0, Group::World, kBusyPollMicros);
  if (rank_ != 0) buffer_.resize(size_t(n));
  comm_->broadcast(buffer_.data(), buffer_.size(), 0, Group::World);
}

std::vector<float>& StepExecutor::run(const StepPlan& plan) {
  CPI_ASSERT(rank_ == 0);
  CPI_CHECK(!shut_down_, "the executor was shut down");
  in_step_ = true;
  broadcast(plan);
  std::vector<float>& out = execute(plan);
  in_step_ = false;
  return out;
}

std::vector<int64_t> StepExecutor::audit(const std::vector<PageOp>& ops) {
  CPI_ASSERT(rank_ == 0);
  CPI_CHECK(!shut_down_, "the executor was shut down");
  StepPlan p;
  p.kind = StepPlan::Kind::Audit;
  p.page_ops = ops;
  in_step_ = true;
  broadcast(p);
  apply_page_ops(p.page_ops);
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
      apply_page_ops(plan.page_ops);
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

void StepExecutor::apply_page_ops(const std::vector<PageOp>& ops) {
  const int64_t me = runner_.cp_layout().rank();
  for (const PageOp& op : ops) {
    if (op.kind == PageOp::ReleaseSeq) {
      auto it = seqs_.find(op.seq);
      if (it == seqs_.end()) continue;
      runner_.release(it->second);
      seqs_.erase(it);
      continue;
    }
    if (op.cp_rank != me) continue;
    const bool for_seq = op.kind == PageOp::Take || op.kind == PageOp::Share ||
                         op.kind == PageOp::Copy;
    runner_.apply_page_op(op, for_seq ? &seqs_[op.seq] : nullptr);
  }
}

std::vector<float>& StepExecutor::execute(const StepPlan& plan) {
  static std::vector<float> kNone;  // a Pages plan has no rows (never written)
  apply_page_ops(plan.page_ops);
  if (plan.kind == StepPlan::Kind::Pages) return kNone;
  CPI_ASSERT(plan.kind == StepPlan::Kind::Forward);
  steps_.clear();
  const int32_t* tok = plan.tokens.data();
  const CpLayout& cp = runner_.cp_layout();
  for (const StepPlan::Seq& s : plan.seqs) {
    SequenceState& st = seqs_[s.id];
    // A sequence that starts on a cached prefix: its pages came with the ops above.
    if (plan.pages_from_ops && st.num_cached == 0 && s.begin > 0) st.num_cached = s.begin;
    CPI_CHECK(st.num_cached == s.begin,
              "rank {}: sequence {} has {} tokens cached, the step plan says {}", rank_, s.id,
              st.num_cached, s.begin);
    CPI_CHECK(!plan.pages_from_ops ||
                  int64_t(st.pages.size()) == cp.pages_needed(s.begin + s.num_tokens),
              "rank {}: sequence {} holds {} pages, {} tokens need {}", rank_, s.id,
              st.pages.size(), s.begin + s.num_tokens, cp.pages_needed(s.begin + s.num_tokens));
    steps_.push_back({&st, tok, s.num_tokens, s.all_logits != 0, s.row_use});
    tok += s.num_tokens;
  }
  return runner_.step(steps_);
}

}  // namespace cpinfer
