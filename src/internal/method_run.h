// A classical method (tessera/methods.h) as a run on the step engine: it hands out no patch; each step() does one of
// the method's steps (an iteration) on the calling thread, so a driver reports progress and lets a cancel in between.
#pragma once

#include <chrono>
#include <memory>
#include <span>

#include "internal/patch_steps.h"
#include "tessera/methods.h"

namespace tessera {

class MethodRun : public PatchSteps {
 public:
  // computation was started (start_method) on the volume chi belongs to; chi holds its voxel count of values and
  // outlives the run; report() confirms χ was written.
  MethodRun(std::unique_ptr<MethodComputation> computation, std::span<float> chi);

  std::optional<Patch> next(std::span<float> input) override;
  void finish(uint64_t job, std::span<const float> output) override;
  void fail(uint64_t job, ErrorCode code, const std::string& message) override;
  bool step() override;
  bool finished() const override;
  uint64_t done() const override;
  uint64_t total() const override;
  // Throws Error(Cancelled) naming the steps done when it was cancelled before its end.
  RunReport report() const override;

 private:
  std::unique_ptr<MethodComputation> computation_;
  std::span<float> chi_;
  bool written_ = false;
  std::chrono::steady_clock::time_point t0_;
  double seconds_ = 0.0;
};

}  // namespace tessera
