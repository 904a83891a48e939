// A run (tessera/session's Run) that JavaScript drives step by step: next() hands out a gathered patch while the plan
// allows another in flight, finish() takes a network output. Nothing blocks, nothing polls. The conversions of its
// patches, outputs and report to JavaScript values.
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "session/run.h"
#include "conversions.h"
#include "volume.h"

namespace tessera::js {

using emscripten::val;

class FieldRun {
 public:
  // The held plan's run on volume (a network's, a method's or a pipeline's): tessera::Run's checks.
  FieldRun(std::shared_ptr<Volume> volume, PlanHandle plan);
  // {job, tile, dims: [1, 1, X, Y, Z], input: a Float32Array view on the heap, valid until the next call that may
  // allocate: copy it at once}, or null when no patch may start.
  val next();
  // Scatters the network output of a patch from next() (a Float32Array of output channels · patch voxels).
  void finish(double job, const val& output);
  // Fails a patch from next() with the executor's message (the run fails with RunnerFailed naming the tile).
  void fail(double job, const std::string& message);
  // One step of the run's own computation (a classical method's iteration); false when it has none to do now.
  bool step() { return run_.steps().step(); }
  void cancel() { run_.steps().cancel(); }
  // {finished, done, total, inFlight}
  val state() const;
  // The report of a finished run; throws its first error (or Cancelled) as a TesseraError.
  val report();
  // chi as a standalone Float32Array; only after a successful report().
  val result() const;
  std::string warning() const { return run_.warning(); }
  // A pipeline's intermediates (conversions.h pipeline_result_to_val); only after a successful report().
  val outputs() const;
  // A pipeline's intermediates of every stage that finished, also after a failed run (empty arrays for the rest).
  val intermediates() const { return pipeline_result_to_val(run_.intermediates()); }

 private:
  std::shared_ptr<Volume> volume_;  // the run reads its field and mask
  Run run_;
  std::vector<float> staging_;  // one patch, gathered then copied out
};

}  // namespace tessera::js
