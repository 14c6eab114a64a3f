// A cached thread pool for tools/call: idle workers are reused, so a call does not pay for a
// thread's creation, and a new worker starts only when every worker is busy. Calls may run
// for an hour (run_shell), so the pool grows instead of queueing behind them, up to `max`.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cordon::mcp {

class WorkerPool {
 public:
  explicit WorkerPool(std::size_t max_workers) : max_(max_workers) {}
  ~WorkerPool() { Stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs `job` on an idle worker, a new one, or (at the cap) the first to become free.
  // False, and the job is not run, once Stop has begun.
  [[nodiscard]] bool Submit(std::function<void()> job);
  // Lets queued jobs finish, then joins every worker. Submit after Stop refuses the job.
  void Stop();

 private:
  void Work();
  const std::size_t max_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> workers_;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace cordon::mcp
