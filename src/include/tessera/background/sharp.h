// SHARP background field removal (Schweser et al. 2011 NeuroImage): one spherical mean value high-pass, the mask
// eroded by its radius, then the TSVD deconvolution of the kernel. Input: the total field (any unit: the method is
// linear) and a mask (nonzero = inside).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "tessera/background/local_field.h"
#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"

namespace tessera {

namespace sharp_defaults {
// SMV radius, mm: SEPIA's BFR_radius default for SHARP (4 mm); Schweser et al. 2011 used kernels of a few mm.
inline constexpr double kRadiusMm = 4.0;
// TSVD threshold on |1 − S|: QSM.jl / QSM.rs sharp (0.05), as V-SHARP (Wu et al. 2012).
inline constexpr double kThreshold = 0.05;
}  // namespace sharp_defaults

struct SharpParams {
  double radius_mm = sharp_defaults::kRadiusMm;
  double threshold = sharp_defaults::kThreshold;
};

// Throws Error(InvalidArgument) naming the parameter, its range and unit: radius_mm in [0.5, 50] mm, threshold in
// (0, 1).
void validate(const SharpParams& params);

// SHARP: the high-passed field f − S∗f of the masked field, kept on the mask eroded by the radius (erode_mask_mm), is
// deconvolved by 1 − S (TSVD: frequencies with |1 − S| < threshold set to 0) and kept on the eroded mask (returned).
// The volume is cut to the mask's box and zero padded by the radius. Two steps: the filter, the deconvolution.
class Sharp : public Iterative {
 public:
  // Validates everything (one clear line each).
  // geometry valid; field.size() == mask.size() == voxel_count; field finite inside the mask; the mask holds a voxel;
  // the radius leaves voxels (else Error InvalidArgument naming it and how deep the mask is).
  // field and mask outlive the computation. threads: FFT and loop threads (0 = hardware); the result does not depend on it.
  Sharp(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
        const SharpParams& params = {}, unsigned threads = 1);
  ~Sharp() override;

  uint32_t total_steps() const override;
  uint32_t steps_done() const override;
  bool finished() const override;
  void step() override;
  std::string name() const override;

  // The local field on the eroded mask; finished() is true (else Error Internal). Moves it out (call once).
  LocalField take_result();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Runs SHARP to the end (progress and cancel between steps, as run_to_end).
LocalField sharp(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                 const SharpParams& params = {}, unsigned threads = 1,
                 const std::function<void(uint64_t, uint64_t)>& progress = {}, const std::atomic<bool>* cancel = nullptr);

// Heap bytes SHARP allocates at its peak beyond its inputs, the result included (an upper bound: the padded box is
// taken as the whole volume plus the radius on each side).
// geometry valid; params valid (else Error InvalidArgument).
uint64_t sharp_workspace_bytes(const Geometry& geometry, const SharpParams& params, unsigned threads = 1);

}  // namespace tessera
