// The native driver of a run on the step engine: the calling thread hands out the run's patches, does its steps and
// takes the outputs back; threads run the networks. The same run (StepRun, TaskRun, NativePatchRun, ComputeRun) the
// JavaScript driver drives with its worker pool.
#pragma once

#include <span>

#include "engine/patch_steps.h"
#include "tessera/engine/driver.h"
#include "tessera/engine/runner.h"

namespace tessera {

// Drives run to its end and returns its report (throws its first error, or Error Cancelled).
// runners[i] runs the patches of network i and is safe to call from several threads at once.
// options.threads: the threads running networks (at least 1); progress (done, total) comes from the calling thread
// whenever done changes; options.cancel stops new patches and steps (those out finish first).
RunReport drive_threaded(PatchSteps& run, std::span<PatchRunner* const> runners, const RunOptions& options);

}  // namespace tessera
