// Susceptibility-weighted imaging (SWI; Haacke et al. 2004 MRM 52:612) from multi-echo magnitude and unwrapped phase,
// following CLEAR-SWI's echo combination and high-pass (Eckstein et al. 2021 NeuroImage 237:118175): the echoes'
// unwrapped phases are combined into one frequency (MriResearchTools calculateB0_unwrapped: Σ φ·|S|·TE / Σ |S|·TE²),
// expressed as the phase it accumulates at the longest echo, high-passed (minus its Gaussian-smoothed self, smoothed
// by normalised convolution inside the mask), turned into Haacke's negative phase mask raised to a power, and
// multiplied into the magnitude echoes combined by root-sum-of-squares. Volumes are x-fastest, echo after echo.
// Phase sign: Haacke's mask darkens negative phase, where paramagnetic sources (veins) lie in his convention; the
// sign of a vein's phase depends on the scanner's convention (and on the vein's angle to B0), so it is an option
// (paramagnetic_positive applies the mask to −φ). On Tessera's phantom the veins' high-passed phase is negative.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/citation.h"
#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"
#include "tessera/common/schema.h"
#include "tessera/contrast/min_intensity_projection.h"

namespace tessera {

inline constexpr Citation kSwiCitation{
    "Haacke et al. 2004",
    "Haacke EM, Xu Y, Cheng YCN, Reichenbach JR. Susceptibility weighted imaging (SWI). Magn Reson Med "
    "2004;52:612-618."};
inline constexpr Citation kClearSwiCitation{
    "Eckstein et al. 2021",
    "Eckstein K, Bachrata B, Hangel G, et al. Improved susceptibility weighted imaging at ultra-high field using "
    "bipolar multi-echo acquisition and optimized image processing: CLEAR-SWI. NeuroImage 2021;237:118175."};

namespace swi_defaults {
// The phase mask's power: Haacke et al. 2004 MRM 52:612 (n = 4 maximises the venous contrast-to-noise); CLEAR-SWI's
// phase_scaling_strength = 4.
inline constexpr double kMaskPower = 4.0;
// High-pass Gaussian sigma in voxels, in plane (x and y) and along the slice axis (z): CLEAR-SWI's phase_hp_sigma =
// [4, 4, 0] (no smoothing across slices).
inline constexpr double kHighPassSigmaXyVoxels = 4.0;
inline constexpr double kHighPassSigmaZVoxels = 0.0;
// The Gaussian kernel is cut at this many sigmas (the weight beyond is below 3.4e-4 of the centre's).
inline constexpr double kKernelSigmas = 4.0;
// Paramagnetic sources have negative phase: Haacke et al. 2004's negative phase mask.
inline constexpr bool kParamagneticPositive = false;
}  // namespace swi_defaults

struct SwiParams {
  double mask_power = swi_defaults::kMaskPower;
  double high_pass_sigma_xy_voxels = swi_defaults::kHighPassSigmaXyVoxels;
  double high_pass_sigma_z_voxels = swi_defaults::kHighPassSigmaZVoxels;
  bool paramagnetic_positive = swi_defaults::kParamagneticPositive;
};

// The SWI options of the schema: "swi.maskPower", "swi.highPassSigmaXY", "swi.highPassSigmaZ", "swi.minIpSlab",
// "swi.paramagneticPhase" (positive|negative).
std::span<const OptionSpec> swi_options();

// Throws Error(InvalidArgument) naming the parameter, its range and unit: mask_power in (0, 16], the sigmas in
// [0.5, 64] voxels (z may be 0: no smoothing along z).
void validate(const SwiParams& params);

// Haacke's negative phase mask of a phase in radians: (π + φ)/π for φ in [−π, 0), 0 below −π, 1 for φ ≥ 0.
double negative_phase_mask(double phase_rad);

struct SwiResult {
  std::vector<float> swi;             // magnitude × phase_mask^power, the magnitude's unit
  std::vector<float> magnitude;       // the echoes' root-sum-of-squares
  std::vector<float> phase_rad;       // the high-passed combined phase at the longest TE (rad), 0 outside the mask
  std::vector<float> phase_mask;      // negative_phase_mask(∓phase_rad) in [0, 1] (1 outside the mask), before the power
};

// SWI one step at a time: E steps combine echo e (magnitude and phase), then one step per smoothing axis with a
// sigma > 0 (x, y, then z when given), then one that high-passes, builds the mask and weights the magnitude.
// Outside the mask (and where no echo has signal) the phase mask is 1: the SWI there is the combined magnitude.
// Inputs are read at every step: they outlive the Swi and do not change.
class Swi final : public Iterative {
 public:
  // geometry valid; magnitude and unwrapped_phase: E·N values (N = voxel_count(), E = te_s.size() ≥ 1), magnitude
  // finite and ≥ 0, phase finite in radians (unwrapped, e.g. EchoFit's keep_unwrapped); te_s in seconds, positive,
  // increasing, none over 1; mask empty (every voxel) or N values, not all 0; params valid.
  // Else Error InvalidArgument naming the problem. threads: loop threads (0 = hardware); results bit-identical for any.
  Swi(const Geometry& geometry, std::span<const float> magnitude, std::span<const float> unwrapped_phase,
      std::span<const double> te_s, std::span<const uint8_t> mask, const SwiParams& params = {}, unsigned threads = 1);

  uint32_t total_steps() const override;
  uint32_t steps_done() const override { return done_; }
  bool finished() const override { return done_ == total_steps(); }
  void step() override;
  std::string name() const override { return "SWI"; }

  // The result, moved out.
  // finished() (else Error InvalidArgument); called once.
  SwiResult take_result();

 private:
  void smooth_axis(int axis, double sigma_voxels);
  void finish();

  Geometry geometry_;
  std::span<const float> magnitude_, phase_;
  std::vector<double> te_;
  std::span<const uint8_t> mask_;
  SwiParams params_;
  unsigned threads_;
  uint64_t n_;
  uint32_t echoes_;
  uint32_t done_ = 0;
  std::vector<int> axes_;               // the smoothing axes, in order
  std::vector<float> sum_sq_;           // Σ |S|² (the RSS before its root)
  std::vector<float> num_, den_;        // Σ φ·|S|·TE and Σ |S|·TE²
  std::vector<float> smooth_num_, smooth_den_;  // G∗(φ·m) and G∗m, axis by axis
  std::vector<float> scratch_;
  SwiResult result_;
  bool taken_ = false;
};

// Runs an Swi to the end (arguments as its constructor).
SwiResult swi(const Geometry& geometry, std::span<const float> magnitude, std::span<const float> unwrapped_phase,
              std::span<const double> te_s, std::span<const uint8_t> mask, const SwiParams& params = {},
              unsigned threads = 1);

// Heap bytes an Swi allocates at its peak beyond its inputs: five float sums and a smoothing scratch (24·N) and the
// four results (16·N).
// geometry valid; params valid (else Error InvalidArgument).
uint64_t swi_workspace_bytes(const Geometry& geometry, const SwiParams& params, unsigned threads = 1);

}  // namespace tessera
