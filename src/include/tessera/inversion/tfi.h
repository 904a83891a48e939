// TFI, preconditioned total field inversion (Liu et al. 2017 MRM 78:303): χ from the TOTAL field, with no separate
// background removal. χ = P y over the whole volume, P = 1 inside the mask and P = Po outside (the sources of the
// background field, air and bone, are large and lie outside), y minimising
//   ½‖w (D P y − f)‖² + λ ‖M_G ∇ P y‖₁
// with w the magnitude scaled to mean 1 in the mask and 0 outside (the field is measured only there), M_G the MEDI edge
// mask of the magnitude, the L1 term by lagged-diffusivity reweighting (Gauss-Newton), each Gauss-Newton system solved
// by conjugate gradients. The data term is linear in the field (ppm), as in Liu 2017's equation; no CSF term, no zero
// padding, no R2*-based preconditioner. One step is one CG iteration (two FFT pairs); the first of each Gauss-Newton
// iteration also forms its system.
// Volumes are x-fastest; the field is the total field in ppm; χ comes out in ppm, zero outside the mask.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/fft.h"
#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"
#include "tessera/inversion/gauss_newton_cg.h"
#include "tessera/inversion/medi.h"

namespace tessera {

namespace tfi_defaults {
// Weight of the gradient prior, ppm·mm (field in ppm, ∇ per mm). The MEDI toolbox puts λ_MEDI = 1000 on its data term
// in radians over ΔTE (medi_defaults::kPhaseScale s = 4.01 rad/ppm): λ_MEDI s² ‖m(Dχ − f)‖² + s ‖M_G ∇χ‖₁ in ppm,
// i.e. ½‖m(Dχ − f)‖² + ‖M_G ∇χ‖₁ / (2 λ_MEDI s): 1.25e-4 ppm·mm.
inline constexpr double kLambda = 1.0 / (2.0 * medi_defaults::kLambda * medi_defaults::kPhaseScale);
// P outside the mask (Liu et al. 2017: Po = 30; MEDI toolbox TFI_L1 and wtTFI TFI_Linear: 30).
inline constexpr double kPreconditioner = 30.0;
// Edge fraction of the MEDI edge mask (as MEDI: medi_defaults::kEdgeFraction).
inline constexpr double kEdgeFraction = medi_defaults::kEdgeFraction;
// Gauss-Newton iterations and their stop on ‖dy‖/‖y‖ (MEDI toolbox TFI_L1 as MEDI_L1: 10, 0.1).
inline constexpr uint32_t kMaxIterations = 10;
inline constexpr double kTolerance = 0.1;
// CG per Gauss-Newton iteration and its relative residual. The MEDI toolbox's cg_tol = 0.01 is kept; its
// cg_max_iter = 100 is cut to 20 (wtTFI TFI_Linear: 15 BiCGSTAB iterations): the preconditioner is what makes few
// iterations enough (measured on the phantom, tests/tfi_test.cpp).
inline constexpr uint32_t kCgMaxIterations = 20;
inline constexpr double kCgTolerance = 0.01;
// The lagged-diffusivity floor e in 1/sqrt(|M_G ∇χ|² + e), ppm²/mm²: the MEDI toolbox's 1e-6 (rad²/mm²) in ppm.
inline constexpr double kEpsilon = medi_defaults::kEpsilon / (medi_defaults::kPhaseScale * medi_defaults::kPhaseScale);
}  // namespace tfi_defaults

struct TfiParams {
  double lambda = tfi_defaults::kLambda;                        // gradient-prior weight, ppm·mm, (0, 1]
  double preconditioner = tfi_defaults::kPreconditioner;        // P outside the mask, [1, 1000]
  double edge_fraction = tfi_defaults::kEdgeFraction;           // [0, 1)
  uint32_t max_iterations = tfi_defaults::kMaxIterations;       // Gauss-Newton, [1, 100]
  double tolerance = tfi_defaults::kTolerance;                  // ‖dy‖/‖y‖, [0, 1)
  uint32_t cg_max_iterations = tfi_defaults::kCgMaxIterations;  // per Gauss-Newton iteration, [1, 1000]
  double cg_tolerance = tfi_defaults::kCgTolerance;             // relative CG residual, (0, 1)
};

// Checks each parameter against its schema option (method_options(): the one range, unit and wholeness).
// Throws Error(InvalidArgument) naming the option ("tv.lambda"), its range and unit.
void validate(const TfiParams& params);

class Tfi : public Iterative {
 public:
  // Starts TFI: validates, builds the edge mask and the data weights.
  // geometry valid; field.size() == mask.size() == voxel_count; field (the TOTAL field, ppm) finite; the mask holds a
  // voxel; magnitude: voxel_count finite values >= 0, not all zero in the mask (else Error InvalidArgument).
  // params valid. threads: FFT and loop threads (0 = hardware); the result does not depend on it.
  Tfi(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
      std::span<const float> magnitude, const TfiParams& params, unsigned threads = 1);

  // Every Gauss-Newton iteration running all its CG iterations.
  uint32_t total_steps() const override { return params_.max_iterations * params_.cg_max_iterations; }
  uint32_t steps_done() const override { return done_; }
  bool finished() const override { return finished_; }
  void step() override;
  std::string name() const override { return "TFI"; }

  uint32_t gauss_newton_iterations() const { return gn_.outer_done; }
  // χ = P y over the whole volume (the background sources outside the mask included), ppm. finished() is true.
  std::vector<float> whole_volume_chi() const;
  // χ in ppm, zero outside the mask. finished() is true. Moves the result out (call once).
  std::vector<float> take_result();

 private:
  void minus_gradient(std::span<float> r);  // r = −(the cost's gradient at y); sets Q
  // out = P (D w² D P v + λ ∇ᵀ(M_G Q M_G ∇ P v)), with Q the reweighting; v and out distinct from the work buffers.
  void apply_system(std::span<const float> v, std::span<float> out);
  float precondition(uint64_t i) const { return mask_[i] ? 1.0f : outside_; }

  Geometry geometry_;
  TfiParams params_;
  unsigned threads_;
  std::span<const uint8_t> mask_;
  float outside_;
  std::vector<float> kernel_, w2_, field_, edges_, y_, q_;
  std::vector<float> pv_, reg_, grad_;
  std::vector<Complex> buf_;
  GaussNewtonCg gn_;
  uint32_t done_ = 0;
  bool finished_ = false;
};

// Runs TFI to the end (see Tfi).
std::vector<float> tfi(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                       std::span<const float> magnitude, const TfiParams& params = {}, unsigned threads = 1);

// Heap bytes TFI allocates at its peak beyond its inputs: 17 float volumes (kernel, w², f, 3 edge masks, y, Q, CG's
// dy, r, p, Ap, P·v, the regulariser, 3 gradient temporaries), 3 more for sorting the magnitude's gradients while the
// edge mask is built, one complex volume, the FFT scratch.
// geometry valid (else Error InvalidArgument).
uint64_t tfi_workspace_bytes(const Geometry& geometry, const TfiParams& params = {}, unsigned threads = 1);

}  // namespace tessera
