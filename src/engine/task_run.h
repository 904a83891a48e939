// Tasks (internal/network_task.h) as a run on the step engine: next() advances the run's tasks on the calling thread
// (their computation between network calls) and hands out each network call as a patch; finish() answers it, and the
// task goes on at the next next(). A whole-volume algorithm (a physics loop, a phase network) is one unit; a tiled
// physics loop is one unit per tile, at most the plan's tiles in flight, each unit's result written back when its
// task ends. Every unit has at most one call out, so a patch's job is its unit.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/network_task.h"
#include "engine/patch_steps.h"

namespace tessera {

class TaskRun : public PatchSteps {
 public:
  // A started unit: its task and whatever buffers the task reads (they live as long as the unit).
  struct Unit {
    virtual ~Unit() = default;
    NetworkTask task;
    uint64_t tile = 0;  // the plan.grid tile it stands for (0 for a whole volume)
  };
  // Builds unit i (its buffers and its task). Called once per unit, in order, as slots free up.
  using Start = std::function<std::unique_ptr<Unit>(uint64_t unit)>;
  // Takes a unit's result when its task ends (writes it into the run's output).
  using Done = std::function<void(Unit& unit, std::vector<float> result)>;

  // units >= 1 run, at most in_flight at once; calls_per_unit: network calls each makes (for progress); base: the
  // report's tile counts, patch edge and bytes (report() adds the timing and the concurrency).
  TaskRun(uint64_t units, uint32_t in_flight, uint64_t calls_per_unit, Start start, Done done, RunReport base);

  std::optional<Patch> next(std::span<float> input) override;
  void finish(uint64_t job, std::span<const float> output) override;
  void fail(uint64_t job, ErrorCode code, const std::string& message) override;
  // Network calls answered and planned.
  uint64_t done() const override { return calls_done_; }
  uint64_t total() const override { return calls_total_; }
  RunReport report() const override;

 private:
  Start start_;
  Done done_;
  std::map<uint64_t, std::unique_ptr<Unit>> units_;  // started, not ended
  std::vector<uint64_t> ready_;                      // started units whose task can go on (new, or answered)
  RunReport base_;
  uint64_t calls_done_ = 0;
  uint64_t calls_total_ = 0;
  std::chrono::steady_clock::time_point t0_;
  double seconds_ = 0.0;
};

}  // namespace tessera
