#include "engine/scheduler.h"

#include <algorithm>

#include "tessera/common/error.h"

namespace tessera {

TileScheduler::TileScheduler(uint64_t total, uint32_t concurrency)
    : total_(total), concurrency_(std::max<uint32_t>(1, concurrency)) {}

std::optional<uint64_t> TileScheduler::try_acquire() {
  std::lock_guard lock(mutex_);
  if (cancelled_ || error_ || next_ >= total_ || in_flight_ >= concurrency_) return std::nullopt;
  ++in_flight_;
  max_in_flight_ = std::max(max_in_flight_, in_flight_);
  return next_++;
}

void TileScheduler::complete(uint64_t job) {
  {
    std::lock_guard lock(mutex_);
    if (job >= next_ || in_flight_ == 0) throw Error(ErrorCode::Internal, "completing a tile that was not started");
    --in_flight_;
    ++done_;
  }
}

void TileScheduler::fail(uint64_t job, std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (job >= next_ || in_flight_ == 0) throw Error(ErrorCode::Internal, "failing a tile that was not started");
    --in_flight_;
    if (!error_) {
      error_ = error;
      failed_job_ = job;
    }
  }
}

void TileScheduler::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool TileScheduler::finished() const {
  std::lock_guard lock(mutex_);
  return in_flight_ == 0 && (cancelled_ || error_ || next_ >= total_);
}

uint64_t TileScheduler::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}
uint32_t TileScheduler::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}
uint32_t TileScheduler::max_in_flight() const {
  std::lock_guard lock(mutex_);
  return max_in_flight_;
}
bool TileScheduler::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}
std::exception_ptr TileScheduler::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}
std::optional<uint64_t> TileScheduler::failed_job() const {
  std::lock_guard lock(mutex_);
  return failed_job_;
}

}  // namespace tessera
