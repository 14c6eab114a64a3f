// The monotonic clock in milliseconds, for deadlines and elapsed times (never wall time).
#pragma once

#include <chrono>

namespace cordon {

inline double MonotonicMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace cordon
