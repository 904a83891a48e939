// The tile scheduler: the one place that decides which tile starts next, how many are in flight,
// and what happens on the first error or a cancel. The threaded C++ driver and the JavaScript
// step API (bindings) both drive tiles through it.
#pragma once

#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>

namespace tessera {

class TileScheduler {
 public:
  // total jobs, at most `concurrency` of them in flight at once (0 is treated as 1).
  TileScheduler(uint64_t total, uint32_t concurrency);

  // The next job to start, or nothing when every slot is busy, all jobs started, or the run stopped.
  std::optional<uint64_t> try_acquire();
  // Marks a started job done.
  void complete(uint64_t job);
  // Marks a started job failed; the first failure stops new jobs and is kept for error().
  void fail(uint64_t job, std::exception_ptr error);
  // Stops new jobs; those in flight finish.
  void cancel();

  // No job in flight and nothing more will start.
  bool finished() const;

  uint64_t total() const { return total_; }
  uint32_t concurrency() const { return concurrency_; }
  uint64_t done() const;
  uint32_t in_flight() const;
  uint32_t max_in_flight() const;
  bool cancelled() const;
  std::exception_ptr error() const;
  std::optional<uint64_t> failed_job() const;

 private:
  mutable std::mutex mutex_;
  const uint64_t total_;
  const uint32_t concurrency_;
  uint64_t next_ = 0;
  uint64_t done_ = 0;
  uint32_t in_flight_ = 0;
  uint32_t max_in_flight_ = 0;
  bool cancelled_ = false;
  std::exception_ptr error_;
  std::optional<uint64_t> failed_job_;
};

}  // namespace tessera
