// SWI and its minimum-intensity projection from a scanner's multi-echo wrapped phase and magnitude: a brain mask from
// the first echo's magnitude when none is given (tessera/phase/brain_mask.h), every echo's phase unwrapped and aligned
// in time (tessera/phase/echo_fit.h, keep_unwrapped), SWI (tessera/contrast/swi.h), then the minIP over a slab
// (tessera/contrast/min_intensity_projection.h). One Iterative: each step is a step of the current stage.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/contrast/min_intensity_projection.h"
#include "tessera/contrast/r2star.h"
#include "tessera/contrast/swi.h"
#include "tessera/phase/brain_mask.h"
#include "tessera/phase/echo_fit.h"
#include "tessera/pipeline/pipeline.h"

namespace tessera {

struct SwiRequest {
  std::vector<double> te_s;              // one per echo, seconds
  SwiParams swi;
  double min_ip_slab_mm = kMinIpSlabMm;  // the minIP's slab along z, mm
  EchoFitParams echo_fit;                // the unwrapper (keep_unwrapped is set by the run)
  BrainMaskParams brain_mask;            // used when no mask is given
  unsigned threads = 1;
};

struct SwiRunResult {
  std::vector<uint8_t> mask;           // the mask the phase was unwrapped and high-passed in (given or made)
  std::vector<float> unwrapped_rad;    // every echo's unwrapped phase (rad), echo after echo
  SwiResult swi;                       // SWI, the combined magnitude, the high-passed phase and the phase mask
  std::vector<float> min_ip;           // the minIP of the SWI
};

// Sets an SWI request option by its schema name: swi_options()' ("swi.*": checked_option's range; paramagneticPhase
// positive|negative), and the pipeline's "unwrap" and "brainMask.*" (set_pipeline_option / set_pipeline_choice).
// Any other name: Error Internal.
void set_swi_option(SwiRequest& request, std::string_view name, double value);
void set_swi_choice(SwiRequest& request, std::string_view name, std::string_view choice);

class SwiFromPhase final : public Iterative {
 public:
  // Checks everything up front (one clear line each): TEs, the phase (wrapped radians, te_s.size() echoes), the
  // magnitude (as many values: required, SWI weights it), a mask of the volume's size with a voxel, the parameters.
  // All inputs outlive the run.
  SwiFromPhase(const Geometry& geometry, std::span<const float> phase, std::span<const float> magnitude,
               std::span<const uint8_t> mask, SwiRequest request);
  ~SwiFromPhase() override;

  uint32_t total_steps() const override { return planned_; }
  uint32_t steps_done() const override { return done_; }
  bool finished() const override { return stage_ == 4; }
  void step() override;
  // The current stage: "brain mask", "echo fit", "SWI", "minIP".
  std::string name() const override;

  // The outputs; finished() is true (else Error InvalidArgument). Moves them out (call once).
  SwiRunResult take_result();

 private:
  void next_stage();

  Geometry geometry_;
  std::span<const float> phase_, magnitude_;
  std::span<const uint8_t> given_mask_;
  SwiRequest request_;
  SwiRunResult result_;
  int stage_ = 0;  // 0 mask, 1 echo fit, 2 SWI, 3 minIP, 4 done
  std::unique_ptr<Iterative> current_;
  uint32_t done_ = 0;
  uint32_t planned_ = 0;
  bool taken_ = false;
};

// Heap bytes the run holds at its peak beyond its inputs: the mask and the unwrapped echoes kept, plus the largest
// stage's workspace (the brain mask, the echo fit, SWI with the minIP's output).
// geometry valid; request's parameters valid (else Error InvalidArgument).
uint64_t swi_from_phase_workspace_bytes(const Geometry& geometry, const SwiRequest& request, bool mask_given);

// The memory plan of an SWI run (tessera.swi()) against the wasm heap limit, as a pipeline's: stages ("brain mask"
// unless mask_given, "echo fit", "SWI", "minIP"), inputs (phase and magnitude of every echo, the mask), workspace
// (swi_from_phase_workspace_bytes), the module heap and, when it does not fit, the refusal with the largest volume.
// geometry valid; request's parameters valid (else Error InvalidArgument).
PipelinePlan plan_swi(const Geometry& geometry, const SwiRequest& request, bool mask_given, Target target = kBuildTarget);

// The memory plan of an R2* run (tessera.r2star()): inputs (the magnitude of every echo, the mask), workspace
// (r2star_workspace_bytes), as plan_swi.
// geometry valid; echoes ≥ 1; params valid (else Error InvalidArgument).
PipelinePlan plan_r2star(const Geometry& geometry, uint32_t echoes, const R2starParams& params, unsigned threads,
                         Target target = kBuildTarget);

}  // namespace tessera
