// The run a request goes through on the step engine, whatever its network: StepRun (field → χ networks, tiled, whole
// or cropped), NativePatchRun (AutoQSM, QSMGAN), TaskRun (physics loops, whole or one loop per tile; phase networks).
// The JavaScript driver and the native threaded driver both drive what this returns.
#pragma once

#include <memory>
#include <span>

#include "engine/patch_steps.h"
#include "tessera/networks/inversion.h"
#include "tessera/engine/plan.h"

namespace tessera {

// Starts the run of request under plan (plan_of_choice's, for this volume): chi is written as the run goes (every
// voxel once it has finished).
// request.geometry is the volume's; field holds its voxels (phase networks: every echo's wrapped phase, echo after
// echo), mask its voxels, magnitude nothing or as many values as field, chi its voxels; all outlive the run.
// threads: FFT threads of the physics loops' computation (0 = hardware).
std::unique_ptr<PatchSteps> start_run(const InversionRequest& request, const TilePlan& plan, std::span<const float> field,
                                      std::span<const uint8_t> mask, std::span<const float> magnitude, std::span<float> chi,
                                      unsigned threads = 1);

}  // namespace tessera
