#include "mcp/worker_pool.h"

#include "core/signals.h"

namespace cordon::mcp {

bool WorkerPool::Submit(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(job));
  if (idle_ < queue_.size() && workers_.size() < max_) {
    workers_.emplace_back([this] { Work(); });
  } else {
    cv_.notify_one();
  }
  return true;
}

void WorkerPool::Work() {
  BlockTerminationSignals();  // the serving loop handles SIGTERM/SIGINT/SIGHUP
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

void WorkerPool::Stop() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    workers.swap(workers_);
  }
  cv_.notify_all();
  for (auto& w : workers) w.join();
}

}  // namespace cordon::mcp
