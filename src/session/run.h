// A held plan's run on a volume, on the step engine: a network's (patches handed out by next(), outputs taken by
// finish()), a classical method's or a pipeline's (no patch: one of its steps per step()). The one place C++ switches
// on the request's kind to start a run.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/patch_steps.h"
#include "tessera/session/session.h"

namespace tessera {

class Run {
 public:
  // held's run on volume; volume outlives the run. Throws Error(InvalidArgument) when the volume is not the one the
  // plan was made for (check_volume) or its echoes and magnitude do not suit the request, Error(BudgetExceeded) for a
  // plan that does not fit.
  Run(PlanHandle held, const VolumeData& volume);

  // The step engine's view of the run: next, finish, fail, step, cancel, state and report.
  PatchSteps& steps() { return *steps_; }
  const PatchSteps& steps() const { return *steps_; }
  // What the run assumed so far (a network's B0 tilt, a method's voxel size; after report(), a pipeline's stages' too),
  // one sentence each.
  std::vector<std::string> warnings() const;
  // warnings(), "; "-joined; empty when none.
  std::string warning() const;
  // The steps that ran (an iterative method that converged early ran fewer than its plan's at most).
  uint64_t steps_run() const { return steps_->done(); }
  // The run's report; throws its first error (or Cancelled). Marks the run succeeded.
  RunReport report();
  // χ of the volume's voxel count (zeros where none was written); report() has succeeded (else Error Internal).
  std::span<const float> chi() const;
  // The kind of the run's request.
  Request::Kind kind() const { return plan_->request.kind(); }
  // Whether the run is a pipeline's (outputs() holds its intermediates).
  bool is_pipeline() const { return pipeline_ != nullptr; }
  // A pipeline's intermediates; is_pipeline() and report() has succeeded (else Error Internal).
  const PipelineResult& outputs() const;
  // A pipeline's intermediates of every stage that finished, also after a failed run (empty for the rest).
  // is_pipeline() (else Error Internal).
  const PipelineResult& intermediates() const;

 private:
  PlanHandle plan_;
  std::vector<float> chi_;
  std::vector<std::string> warnings_;
  std::unique_ptr<PatchSteps> steps_;
  bool succeeded_ = false;
  Pipeline* pipeline_ = nullptr;  // a pipeline run's computation (owned by steps_)
  PipelineResult pipeline_result_;
};

}  // namespace tessera
