// MEDI, morphology enabled dipole inversion (Liu et al. 2011 MRM 66:777; Liu et al. 2012 NeuroImage 59:2560):
// Gauss-Newton on ‖M_G ∇χ‖₁ + λ‖m (e^{i D χ} − e^{i φ})‖², the L1 term by lagged-diffusivity reweighting, each
// Gauss-Newton system solved by conjugate gradients. M_G (the edge mask) drops the gradients at the magnitude's edges
// from the prior; m is the magnitude scaled to mean 1 in the mask (the SNR weighting of the MEDI toolbox, phase noise
// being inversely proportional to the magnitude). φ = field_ppm · phase_scale, in radians. One step is one CG iteration
// (two FFT pairs); the first of each Gauss-Newton iteration also forms its system. No zero padding, no SMV
// preprocessing, no MERIT reweighting (MEDI toolbox options left out).
// Volumes are x-fastest; the field is the local field in ppm; χ comes out in ppm, zero outside the mask.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/fft.h"
#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"
#include "tessera/inversion/gauss_newton_cg.h"
#include "tessera/common/physics.h"

namespace tessera {

namespace medi_defaults {
// Weight of the data term (MEDI toolbox MEDI_L1 / parse_QSM_input: lam = 1000, "in front of the data fidelity term").
inline constexpr double kLambda = 1000.0;
// Fraction of the mask's gradient components (3 per voxel) treated as edges: the MEDI toolbox's gradient_mask sets its
// threshold so that edge components number percentage = 0.9 of the mask's voxels, i.e. 30 % of the components
// (QSM.rs medi.rs percentage = 0.3).
inline constexpr double kEdgeFraction = 0.30;
// Gauss-Newton iterations and their stop on ‖dχ‖/‖χ‖: MEDI toolbox max_iter = 10, tol_norm_ratio = 0.1.
inline constexpr uint32_t kMaxIterations = 10;
inline constexpr double kTolerance = 0.1;
// CG per Gauss-Newton iteration and its relative residual: MEDI toolbox cg_max_iter = 100, cg_tol = 0.01.
inline constexpr uint32_t kCgMaxIterations = 100;
inline constexpr double kCgTolerance = 0.01;
// Radians of phase per ppm of field. The MEDI toolbox works on the phase accumulated over the echo spacing ΔTE of its
// multi-echo field fit (χ in radians, converted to ppm by 2π·ΔTE·CF·1e-6), and λ = 1000 is tuned for that scale.
// Default: 2π · γ̄ (kGammaBarMHzPerT, MHz/T) · 3 T · 5 ms · 1e-6 = 4.01 rad/ppm, a 3 T multi-echo acquisition with ΔTE = 5 ms.
// (On the phantom with 0.005 ppm noise: r 0.79 at 4.01 against 0.66 at the single-echo 16.05 of NDI.)
inline constexpr double kPhaseScale = 2.0 * 3.14159265358979323846 * kGammaBarMHzPerT * 3.0 * 0.005;
// The lagged-diffusivity floor e in 1/sqrt(|M_G ∇χ|² + e) (MEDI toolbox gaussnewton: e = 0.000001).
inline constexpr double kEpsilon = 1e-6;
}  // namespace medi_defaults

struct MediParams {
  double lambda = medi_defaults::kLambda;                       // data weight, (0, 1e7]
  double edge_fraction = medi_defaults::kEdgeFraction;          // [0, 1)
  uint32_t max_iterations = medi_defaults::kMaxIterations;      // Gauss-Newton, [1, 100]
  double tolerance = medi_defaults::kTolerance;                 // ‖dχ‖/‖χ‖, [0, 1)
  uint32_t cg_max_iterations = medi_defaults::kCgMaxIterations; // per Gauss-Newton iteration, [1, 1000]
  double cg_tolerance = medi_defaults::kCgTolerance;            // relative CG residual, (0, 1)
  double phase_scale = medi_defaults::kPhaseScale;              // rad/ppm, (0, 1000]
};

// Checks each parameter against its schema option (method_options(): the one range, unit and wholeness).
// Throws Error(InvalidArgument) naming the option ("tv.lambda"), its range and unit.
void validate(const MediParams& params);

class Medi : public Iterative {
 public:
  // Starts MEDI: validates, builds the edge mask and the data weights.
  // geometry valid; field.size() == mask.size() == voxel_count; field finite; the mask holds a voxel.
  // magnitude: voxel_count finite values >= 0, not all zero in the mask (MEDI needs it: else Error InvalidArgument).
  // params valid. threads: FFT and loop threads (0 = hardware); the result does not depend on it.
  Medi(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
       std::span<const float> magnitude, const MediParams& params, unsigned threads = 1);

  // Every Gauss-Newton iteration running all its CG iterations.
  uint32_t total_steps() const override { return params_.max_iterations * params_.cg_max_iterations; }
  uint32_t steps_done() const override { return done_; }
  bool finished() const override { return finished_; }
  void step() override;
  std::string name() const override { return "MEDI"; }

  // The edge mask M_G: 3 volumes (x, y, z gradient components, in that order), 1 where the prior applies, 0 at an edge.
  std::span<const float> edge_mask() const { return edges_; }
  uint32_t gauss_newton_iterations() const { return gn_.outer_done; }
  // χ in ppm, zero outside the mask. finished() is true. Moves the result out (call once).
  std::vector<float> take_result();

 private:
  void minus_gradient(std::span<float> r);                             // r = −(the cost's gradient at χ); sets P
  void apply_system(std::span<const float> v, std::span<float> out);  // out = ∇ᵀ(M_G P M_G ∇v) + 2λ Dᵀ m² D v

  Geometry geometry_;
  MediParams params_;
  unsigned threads_;
  std::span<const uint8_t> mask_;
  std::vector<float> kernel_, m2_, phase_, edges_, chi_, p_weight_;
  std::vector<float> grad_, tmp_;
  std::vector<Complex> buf_;
  GaussNewtonCg gn_;
  uint32_t done_ = 0;
  bool finished_ = false;
};

// Runs MEDI to the end (see Medi).
std::vector<float> medi(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                        std::span<const float> magnitude, const MediParams& params = {}, unsigned threads = 1);

// Heap bytes MEDI allocates at its peak beyond its inputs: 18 float volumes (kernel, m², φ, 3 edge masks, χ, the
// reweighting P, CG's dχ, r, p, Ap, 3 gradient temporaries, one more temporary), 3 more for sorting the magnitude's
// gradients while the edge mask is built, one complex volume, the FFT scratch.
// geometry valid (else Error InvalidArgument).
uint64_t medi_workspace_bytes(const Geometry& geometry, const MediParams& params = {}, unsigned threads = 1);

}  // namespace tessera
