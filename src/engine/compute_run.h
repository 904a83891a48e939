// A computation of the C++ core (a classical method, the pipeline from phase) as a run on the step engine: it hands
// out no patch; each step() does one of its steps (an iteration) on the calling thread, so a driver reports progress
// and lets a cancel in between.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>

#include "engine/patch_steps.h"
#include "tessera/common/iterative.h"
#include "tessera/inversion/methods.h"

namespace tessera {

class ComputeRun : public PatchSteps {
 public:
  // done() is called once, on the thread of the last step(), when the computation has finished (it takes the results).
  ComputeRun(std::unique_ptr<Iterative> computation, std::function<void()> done);

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
  std::unique_ptr<Iterative> computation_;
  std::function<void()> done_;
  bool written_ = false;
  std::chrono::steady_clock::time_point t0_;
  double seconds_ = 0.0;
};

// A method's run: χ (chi: the volume's voxel count, outliving the run) written when it finishes.
std::unique_ptr<ComputeRun> method_run(std::unique_ptr<MethodComputation> computation, std::span<float> chi);

}  // namespace tessera
