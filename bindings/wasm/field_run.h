// A field -> chi run that JavaScript drives step by step: next() hands out a gathered patch while the plan allows
// another in flight, finish() takes a network output. Nothing blocks, nothing polls. Tiled and whole-volume field -> chi
// networks run a StepRun (internal/step_run.h), AutoQSM / QSMGAN their native patching (internal/native_patch_run.h),
// classical methods a MethodRun (internal/method_run.h): no patch, one iteration per step().
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/patch_steps.h"
#include "tessera/pipeline/pipeline.h"
#include "volume.h"

namespace tessera::js {

using emscripten::val;

class FieldRun {
 public:
  // The held plan's run on volume (a network's, a method's or a pipeline's); the run obeys it. Throws
  // Error(InvalidArgument) when the volume is not the one the plan was made for (check_volume).
  // A network plan's request runs in steps (runs_in_steps: field -> chi networks, registered or custom, native patching).
  FieldRun(std::shared_ptr<Volume> volume, PlanHandle plan);
  // {job, tile, dims: [1, 1, X, Y, Z], input: a Float32Array view on the heap, valid until the next call that may
  // allocate: copy it at once}, or null when no patch may start.
  val next();
  // Scatters the network output of a patch from next() (a Float32Array of output channels · patch voxels).
  void finish(double job, const val& output);
  // Fails a patch from next() with the executor's message (the run fails with RunnerFailed naming the tile).
  void fail(double job, const std::string& message);
  // One step of the run's own computation (a classical method's iteration); false when it has none to do now.
  bool step();
  void cancel();
  // {finished, done, total, inFlight}
  val state() const;
  // The report of a finished run; throws its first error (or Cancelled) as a TesseraError.
  val report();
  // chi as a standalone Float32Array; only after a successful report().
  val result() const;
  // The run's warnings so far, "; "-joined (a network's B0 tilt, a method's voxel size).
  std::string warning() const;
  // A pipeline's intermediates (conversions.h pipeline_result_to_val); only after a successful report().
  val outputs() const;
  // A pipeline's intermediates of every stage that finished, also after a failed run (empty arrays for the rest).
  val intermediates() const;

 private:
  std::shared_ptr<Volume> volume_;  // the run reads its field and mask
  PlanHandle plan_;                 // the run reads its request and plan
  std::vector<float> chi_;
  std::vector<float> staging_;  // one patch, gathered then copied out
  std::vector<std::string> warnings_;
  std::unique_ptr<PatchSteps> run_;  // a StepRun or a NativePatchRun
  bool succeeded_ = false;           // report() confirmed success
  Pipeline* pipeline_ = nullptr;     // a pipeline run's computation (owned by run_)
  PipelineResult pipeline_result_;
};

}  // namespace tessera::js
