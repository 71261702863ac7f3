// CommWorker (dist/comm_worker.h): jobs run on another thread, one at a time, in order; what
// a job writes is visible after wait(); a job's exception reaches the caller of wait(); the
// worker can be destroyed idle or after use. Run under ThreadSanitizer in CI.
#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <vector>

#include "dist/comm_worker.h"

namespace cpinfer {
namespace {

TEST(CommWorker, RunsJobsOnAnotherThreadInOrder) {
  CommWorker w;
  std::vector<int> seen;
  std::thread::id job_thread;
  for (int i = 0; i < 200; ++i) {
    w.start([&seen, &job_thread, i] {
      seen.push_back(i);
      job_thread = std::this_thread::get_id();
    });
    // The caller works meanwhile (here: nothing shared with the job).
    w.wait();
    ASSERT_EQ(seen.size(), size_t(i + 1));
    ASSERT_EQ(seen.back(), i);
  }
  EXPECT_NE(job_thread, std::this_thread::get_id());
}

TEST(CommWorker, RethrowsAJobsErrorAndKeepsWorking) {
  CommWorker w;
  w.start([] { throw std::runtime_error("MPI_Allgatherv failed"); });
  EXPECT_THROW(w.wait(), std::runtime_error);
  int x = 0;
  w.start([&x] { x = 7; });
  w.wait();
  EXPECT_EQ(x, 7);
}

TEST(CommWorker, DestroyedIdleOrAfterUse) {
  { CommWorker idle; }
  {
    CommWorker used;
    used.start([] {});
    used.wait();
  }
  SUCCEED();
}

}  // namespace
}  // namespace cpinfer
