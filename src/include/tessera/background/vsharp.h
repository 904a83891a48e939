// V-SHARP background field removal (Wu et al. 2012 MRM): variable-radius spherical mean value filtering and
// deconvolution. Input: the total field (any unit: the method is linear) and a mask (nonzero = inside).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/background/local_field.h"
#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"

namespace tessera {

namespace vsharp_defaults {
// Largest SMV radius in mm, a length so that it does not shrink with the voxels: QSM.jl vsharp takes 18·minimum(vsz),
// 36 mm at 2 mm voxels but only 18 mm at 1 mm; Özbay et al. 2017 NMR Biomed 30:e3550 found 10-15 mm best on one
// numerical brain. On six generated heads (0.8-2.5 mm voxels) the true local field through V-SHARP keeps r 0.968-0.994
// against it at 36 mm (mean 0.982), 0.824-0.983 by QSM.jl's rule (mean 0.943), 0.795-0.992 at 18 mm everywhere;
// 48 mm adds 0.004 at 1.3× the kernels.
inline constexpr double kMaxRadiusMm = 36.0;
// Smallest SMV radius, in units of the largest voxel edge: QSM.jl vsharp (2·maximum(vsz)). Wu et al. 2012 MRM shrink
// the kernel towards one voxel; on the phantom head (tests) 1 voxel keeps 14 % more voxels but their field is poor
// (NRMSE vs the true local field 0.35 against 0.22).
inline constexpr double kMinRadiusVoxels = 2.0;
// Radius decrement, in units of the largest voxel edge: QSM.jl's range step, 2·maximum(vsz). On the six heads above
// it beats one voxel per step (Wu et al. 2012's every edge shell its own kernel) at 36 mm: mean r 0.982 against 0.974,
// the worst 0.968 against 0.947, with half the kernels.
inline constexpr double kStepVoxels = 2.0;
// TSVD threshold on |1 − S| of the largest kernel in the deconvolution: Wu et al. 2012 MRM, QSM.jl thr = 0.05.
inline constexpr double kThreshold = 0.05;
}  // namespace vsharp_defaults

// V-SHARP parameters. Radii in mm: max_radius_mm, then down by step_voxels × the largest edge while above
// min_radius_voxels × the largest edge, then that minimum (QSM.jl's rule for anisotropic voxels). max_radius_mm at or
// below min_radius_voxels × the largest edge gives that one radius: SHARP (Schweser et al. 2011).
struct VSharpParams {
  double max_radius_mm = vsharp_defaults::kMaxRadiusMm;
  double min_radius_voxels = vsharp_defaults::kMinRadiusVoxels;
  double step_voxels = vsharp_defaults::kStepVoxels;
  double threshold = vsharp_defaults::kThreshold;
};

// Throws Error(InvalidArgument) naming the parameter, its range and unit: max_radius_mm in [1, 100] mm,
// min_radius_voxels in [1, 64] voxels, step_voxels in (0, 64] voxels, threshold in (0, 1).
void validate(const VSharpParams& params);

// The most radii one run may use (a step each).
inline constexpr uint32_t kVSharpMaxRadii = 128;

// The SMV radii in mm, largest first, for a voxel size.
// params valid and voxel_mm positive (else Error InvalidArgument); at most kVSharpMaxRadii radii (else Error
// InvalidArgument naming the fix).
std::vector<double> vsharp_radii_mm(const Vec3& voxel_mm, const VSharpParams& params);


// V-SHARP (Wu et al. 2012 MRM; SHARP: Schweser et al. 2011 NeuroImage). Each voxel takes the high-passed field
// f − S_r∗f of the largest radius r whose sphere around it lies inside the mask; the assembled field is deconvolved by
// 1 − S of the largest kernel used (TSVD: frequencies with |1 − S| < threshold set to 0). The result is defined on the
// mask eroded by the smallest radius (returned). Radii whose sphere fits around no voxel are dropped. The volume is cut
// to the mask's box and zero padded by the largest radius used. One step per radius used, then one for the deconvolution.
class VSharp : public Iterative {
 public:
  // Validates everything (one clear line each) and plans the radii.
  // geometry valid; field.size() == mask.size() == voxel_count; field finite inside the mask; the mask holds a voxel;
  // the smallest radius leaves voxels (else Error InvalidArgument naming it and how deep the mask is).
  // field and mask outlive the computation. threads: FFT and loop threads (0 = hardware); the result does not depend on it.
  VSharp(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
         const VSharpParams& params = {}, unsigned threads = 1);
  ~VSharp() override;

  uint32_t total_steps() const override;
  uint32_t steps_done() const override;
  bool finished() const override;
  void step() override;
  std::string name() const override;

  // The radii in mm used, largest first.
  const std::vector<double>& radii_mm() const;
  // The local field on the eroded mask; finished() is true (else Error Internal). Moves it out (call once).
  LocalField take_result();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Runs V-SHARP to the end (progress and cancel between steps, as run_to_end).
LocalField vsharp(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                  const VSharpParams& params = {}, unsigned threads = 1,
                  const std::function<void(uint64_t, uint64_t)>& progress = {}, const std::atomic<bool>* cancel = nullptr);

// Heap bytes V-SHARP allocates at its peak beyond its inputs, the result included (an upper bound: the padded box is
// taken as the whole volume plus the largest radius on each side).
// geometry valid; params valid (else Error InvalidArgument).
uint64_t vsharp_workspace_bytes(const Geometry& geometry, const VSharpParams& params, unsigned threads = 1);

}  // namespace tessera
