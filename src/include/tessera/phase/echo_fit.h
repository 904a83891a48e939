// Multi-echo field mapping: the total field in Hz from the wrapped phase of E echoes. The receive-phase offset is
// removed before spatial unwrapping (MCPC-3D-S, Eckstein et al. 2018 MRM 79:2996: from the first two echoes), each
// echo is unwrapped spatially, its 2π ambiguity in time is resolved against the first two echoes' frequency, and the
// field is a weighted least-squares line over TE; by default the line's offset is then smoothed in space, removed, and
// the field refitted through the origin (OffsetFit::Smooth).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"
#include "tessera/common/citation.h"
#include "tessera/common/physics.h"

namespace tessera {

// The receive-phase offset's removal (MCPC-3D-S).
inline constexpr Citation kMcpc3dsCitation{
    "Eckstein et al. 2018",
    "Eckstein K, Dymerska B, Bachrata B, et al. Computationally efficient combination of multi-channel phase data from "
    "multi-echo acquisitions (ASPIRE). Magn Reson Med 2018;79:2996-3006."};

// Field offset in Hz to ppm of the Larmor frequency at b0_tesla: hz / (γ̄·B0).
// b0_tesla finite and > 0 (else Error InvalidArgument).
double hz_to_ppm(double hz, double b0_tesla);
std::vector<float> hz_to_ppm(std::span<const float> hz, double b0_tesla);

enum class Unwrapper {
  Laplacian,      // unwrap_laplacian (tessera/unwrap.h)
  RegionGrowing,  // unwrap_region_growing (tessera/unwrap.h)
};

// How the echo fit treats the receive-phase offset θ in φ_e = θ + ω·TE_e (weights magnitude_e², the inverse
// phase-noise variance: phase noise σ/magnitude, Gudbjartsson & Patz 1995 MRM 34:910).
enum class OffsetFit {
  // θ a free intercept per voxel (weighted least squares of a line): no assumption on θ, but the slope's variance is
  // σ²/Σw·(TE − mean TE)² instead of σ²/Σw·TE² (2.3× the SD at 5/12/19 ms).
  Free,
  // θ from the free fit, smoothed in space (magnitude-weighted Gaussian of e^{iθ}), removed; then ω through the
  // origin, Σw·TE·φ / Σw·TE² (MCPC-3D-S, MEDI). Assumes θ varies slowly against the smoothing sigma.
  Smooth,
  // θ from the first two echoes (θ = φ1 − ω·TE1), not smoothed, removed; ω through the origin: its noise enters ω.
  FirstEchoes,
};

namespace echo_fit_defaults {
// Region growing (ROMEO): the default unwrapper of QSM.rs's pipeline (config.rs, UnwrappingAlgorithm::Romeo) and of
// QSMxT; unlike the Laplacian it never alters a voxel whose neighbours differ by less than π.
inline constexpr Unwrapper kUnwrapper = Unwrapper::RegionGrowing;
// The phase offset θ of φ_e = θ + ω·TE_e: see OffsetFit. Smooth, as MCPC-3D-S (Eckstein et al. 2018 MRM 79:2996) and
// MEDI take the offset to be spatially smooth and fit the slope through the origin once it is removed.
inline constexpr OffsetFit kOffsetFit = OffsetFit::Smooth;
// Gaussian sigma (mm) of the offset's smoothing. MriResearchTools' mcpc3ds smooths by σ = [10, 10, 5] voxels (noting
// 5 mm as the aim) with a plain weighted mean; with the first-order correction (EchoFit) a smaller sigma leaves less
// of the offset's curvature: on six generated heads (SNR 40-200, 3-8 echoes) the field minus the true background
// against the true local field reaches r 0.932-0.999 at 3 mm (the free intercept: 0.760-0.997); 5 and 10 mm did
// better on no head.
inline constexpr double kOffsetSigmaMm = 3.0;
// The RMS phase residual (rad) of the fit above which a voxel is left out (the pipeline's fitResidualLimit, and the
// offset's smoothing): above the noise's residual at any usable SNR (0.02 rad at SNR 100, about 0.2–0.4 at SNR 5),
// below the residual of a voxel whose echoes were unwrapped inconsistently (≥ 1 on the phantom).
inline constexpr double kResidualLimitRad = 1.0;
}  // namespace echo_fit_defaults

struct EchoFitParams {
  Unwrapper unwrapper = echo_fit_defaults::kUnwrapper;
  OffsetFit offset = echo_fit_defaults::kOffsetFit;
  double offset_sigma_mm = echo_fit_defaults::kOffsetSigmaMm;  // OffsetFit::Smooth: the Gaussian's sigma, [1, 50] mm
  bool keep_unwrapped = false;  // keep every echo's unwrapped phase (E·N more floats) in the result
};

// Throws Error(InvalidArgument) when unwrapper or offset is not one of its values, or offset_sigma_mm is outside
// the range of its schema option fitOffsetSigma (tessera/phase/options.h: [1, 50] mm).
void validate(const EchoFitParams& params);

// The steps of an EchoFit of that many echoes: the offset estimate (E ≥ 2), one per echo, the smoothing of the offset
// (OffsetFit::Smooth, E ≥ 2).
uint32_t echo_fit_steps(uint32_t echoes, const EchoFitParams& params);

// Checks multi-echo data before anything runs, one clear line each: TEs (one per echo, positive, increasing, in
// seconds: a TE over 1 is refused as milliseconds with the value in seconds), the phase's size against the TEs, a
// phase that is not wrapped radians (tessera/unwrap.h validate_wrapped_phase), a magnitude of another size or < 0.
// Throws Error(InvalidArgument).
void validate_echo_data(const Geometry& geometry, std::span<const float> phase, std::span<const float> magnitude,
                        std::span<const double> te_s);

struct EchoFitResult {
  std::vector<float> field_hz;      // the total field (off-resonance) in Hz, 0 outside the mask
  std::vector<float> offset_rad;    // the receive phase offset θ in [−π, π], 0 outside the mask
  std::vector<float> residual_rad;  // weighted RMS of the fit's phase residuals (rad); π where no echo has signal
  // keep_unwrapped: each echo's phase unwrapped in space and aligned in time (rad, the offset included), E·N values,
  // echo after echo, 0 outside the mask; else empty.
  std::vector<float> unwrapped_rad;
};

// The field fit one step at a time: step 0 estimates the offset (E ≥ 2: the second echo's phase relative to the
// first, unwrapped spatially, is ω·(TE2 − TE1); θ = φ1 − ω·TE1), steps 1..E unwrap echo e after removing θ and
// add it to the fit; E = 1 has no offset step (θ = 0). OffsetFit::Smooth (E ≥ 2) adds a last step: the free fit's
// offset smoothed, the slope refitted through the origin (the residual is that fit's). After the spatial unwrapping each 6-connected component of
// the mask is shifted by the one 2π·k that brings its mean closest to the prediction ω·TE_e (the first two echoes'
// frequency); for E ≥ 2 that prediction assumes the difference of the first two echoes' phase has a mean within
// ±π in each component (a mean field within ±1/(2·(TE2 − TE1)) Hz, ±125 Hz at 4 ms), for E = 1 the echo's phase.
// Inputs are read at every step: they outlive the EchoFit and do not change.
class EchoFit final : public Iterative {
 public:
  // geometry valid; phase: E·N wrapped radians, echo after echo (N = voxel_count(), E = te_s.size() ≥ 1);
  // magnitude empty (uniform) or E·N values ≥ 0; te_s in seconds, positive, increasing, none above 1 (ms refused);
  // mask N values, not all 0; params valid. Else Error InvalidArgument naming the problem.
  // threads: threads for the voxel loops and unwrapping (0 = hardware); results bit-identical for any count.
  EchoFit(const Geometry& geometry, std::span<const float> phase, std::span<const float> magnitude,
          std::span<const double> te_s, std::span<const uint8_t> mask, const EchoFitParams& params = {},
          unsigned threads = 1);

  uint32_t total_steps() const override;
  uint32_t steps_done() const override { return done_; }
  bool finished() const override { return done_ == total_steps(); }
  void step() override;
  std::string name() const override { return "echo fit"; }

  // The result, moved out.
  // finished() (else Error InvalidArgument); called once.
  EchoFitResult take_result();

 private:
  void estimate_offset();
  void add_echo(uint32_t e);
  void finish();
  void refit_smooth_offset();
  std::vector<float> unwrap(std::span<const float> wrapped, std::span<const float> magnitude) const;
  // Shifts each component of u by the 2π·k that brings its mean closest to the mean of predicted.
  void align(std::vector<float>& u, const std::vector<float>& predicted) const;

  Geometry geometry_;
  std::span<const float> phase_, magnitude_;
  std::vector<double> te_;
  std::span<const uint8_t> mask_;
  EchoFitParams params_;
  unsigned threads_;
  uint64_t n_;
  uint32_t echoes_;
  uint32_t done_ = 0;
  double te_mean_ = 0.0;
  std::vector<uint32_t> labels_;
  uint32_t components_ = 0;
  std::vector<float> omega0_;  // rad/s from the first two echoes
  std::vector<float> theta0_;  // rad, the offset removed before unwrapping
  // weighted sums over echoes (TE centred at te_mean_): w, w·t, w·t², w·φ, w·t·φ, w·φ²
  std::vector<float> sw_, swt_, swtt_, swp_, swtp_, swpp_;
  EchoFitResult result_;
  bool taken_ = false;
};

// Runs an EchoFit to the end (arguments as its constructor).
EchoFitResult echo_fit(const Geometry& geometry, std::span<const float> phase, std::span<const float> magnitude,
                       std::span<const double> te_s, std::span<const uint8_t> mask, const EchoFitParams& params = {},
                       unsigned threads = 1);

// Heap bytes an EchoFit allocates at its peak beyond its inputs: labels, ω and θ (4·N each), six float sums (24·N),
// the corrected and unwrapped echo (8·N), the unwrapper's workspace, the three results (12·N), component sums; or, in
// the smooth offset's refit, eight smoothing volumes (32·N) where the labels and echoes were.
// geometry valid; echoes ≥ 1; params valid (else Error InvalidArgument).
uint64_t echo_fit_workspace_bytes(const Geometry& geometry, uint32_t echoes, const EchoFitParams& params,
                                  unsigned threads = 1);

}  // namespace tessera
