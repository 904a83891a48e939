// Total-variation dipole inversion by ADMM (Bilgic et al. 2014 MRM 72:1444; the splitting of kamesy/QSM.jl `tv` and
// QSM.rs tv.rs): argmin_χ ½‖Dχ − f‖² + λ‖∇χ‖₁ with the split z = ∇χ; the χ-update is closed form in k-space,
// χ = F⁻¹[(D F(f) + ρ F(∇ᵀ(z − u))) / (D² + ρL)], the z-update a soft threshold at λ/ρ (per component: anisotropic
// TV; or on the gradient vector: isotropic TV). ∇ is the periodic forward difference on the zero-padded grid (voxel
// size in mm), L its k-space ∇ᵀ∇ (closed_form.h). The data term covers the whole padded volume (the field is zero
// outside the mask, as in QSM.jl); the result is cropped and masked. Padding: see closed_form.h.
#pragma once

#include <array>
#include <complex>
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/inversion/closed_form.h"
#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"

namespace tessera {

namespace tv_defaults {
// λ for a field in ppm and gradients per mm: QSM.rs tv_admm_default lambda 2e-4 (src/inversion/tv.rs; QSM.jl's
// 1e-3 is for its own field scaling).
inline constexpr double kLambda = 2e-4;
// ρ = 100 λ: QSM.jl tv rho = 100*lambda, QSM.rs tv_admm_default rho 2e-2.
inline constexpr double kRho = 2e-2;
// ‖χ_k − χ_{k−1}‖ / ‖χ_k‖ below which it stops: QSM.jl tv tol = 1e-3, QSM.rs 1e-3.
inline constexpr double kTolerance = 1e-3;
// QSM.jl tv maxit = 250, QSM.rs 250.
inline constexpr uint32_t kMaxIterations = 250;
// Anisotropic TV (each gradient component thresholded alone), as QSM.jl and QSM.rs.
inline constexpr bool kIsotropic = false;
}  // namespace tv_defaults

struct TvAdmmParams {
  double lambda = tv_defaults::kLambda;        // TV weight, ppm·mm (field ppm, gradient ppm/mm), in (0, 1]
  double rho = tv_defaults::kRho;              // ADMM penalty, same unit as lambda, in (0, 1e3]
  double tolerance = tv_defaults::kTolerance;  // relative change of χ, unitless, in [0, 1)
  uint32_t max_iterations = tv_defaults::kMaxIterations;  // in [1, 10000]
  bool isotropic = tv_defaults::kIsotropic;
  double pad_ratio = padding_defaults::kPadRatio;
};

// Checks each parameter against its schema option (method_options(): the one range, unit and wholeness).
// Throws Error(InvalidArgument) naming the option ("tv.lambda"), its range and unit.
void validate(const TvAdmmParams& params);

// TV-ADMM, one ADMM iteration (χ-update, convergence check, z- and u-update) per step(); finished after
// max_iterations or once the relative change of χ falls below tolerance.
class TvAdmm : public Iterative {
 public:
  // Validates everything, allocates the buffers and transforms the field (one FFT).
  // geometry valid; field.size() == mask.size() == voxel_count; field finite; the mask holds a voxel; params valid
  // (else Error InvalidArgument / NonFiniteInput). mask outlives the computation.
  // threads: FFT and loop threads (0 = hardware); the result is bit-identical for any count.
  TvAdmm(const Geometry& geometry, std::span<const float> local_field_ppm, std::span<const uint8_t> mask,
         const TvAdmmParams& params = {}, unsigned threads = 1);
  uint32_t total_steps() const override { return params_.max_iterations; }
  uint32_t steps_done() const override { return done_; }
  bool finished() const override { return finished_; }
  void step() override;
  std::string name() const override { return "TV-ADMM"; }
  // ‖χ_k − χ_{k−1}‖ / ‖χ_k‖ of the last step (1 before the first).
  double relative_change() const { return change_; }
  // χ in ppm, zero outside the mask.
  // finished() (else Error InvalidArgument).
  std::vector<float> result() const;

 private:
  Geometry g_;
  Geometry p_;
  KSpaceGrid grid_;
  std::span<const uint8_t> mask_;
  TvAdmmParams params_;
  unsigned threads_;
  std::vector<std::complex<float>> rhs_;   // D F(f) / (D² + ρL)
  std::vector<std::complex<float>> work_;  // FFT buffer
  std::vector<float> x_;                   // χ on the padded grid
  std::vector<float> u_[3];                // scaled duals
  std::vector<float> v_[3];                // z − u (the χ-update's input), ∇χ while the z-update runs
  uint32_t done_ = 0;
  bool finished_ = false;
  double change_ = 1.0;
};

// Runs TV-ADMM to the end (progress and cancel as run_to_end) and returns χ (ppm, zero outside the mask).
std::vector<float> tv_admm(const Geometry& geometry, std::span<const float> local_field_ppm,
                           std::span<const uint8_t> mask, const TvAdmmParams& params = {}, unsigned threads = 1);

// Heap bytes TvAdmm allocates at its peak beyond its inputs: on the padded grid two complex volumes and seven real
// ones (44 bytes a voxel), FFT scratch, the per-axis frequency tables, χ.
// geometry and params valid.
uint64_t tv_admm_workspace_bytes(const Geometry& geometry, const TvAdmmParams& params, unsigned threads = 1);

// ---- pieces shared with RTS ----

// Periodic forward differences of x on geometry's grid, divided by the voxel size (mm): g_a[i] = (x[i + e_a] − x[i]) / h_a.
// every span holds geometry.voxel_count() values.
void forward_gradient(const Geometry& geometry, std::span<const float> x, std::span<float> gx, std::span<float> gy,
                      std::span<float> gz, unsigned threads);

// The adjoint of forward_gradient, ∇ᵀg = Σ_a (g_a[i − e_a] − g_a[i]) / h_a, written as real parts of out (imaginary 0).
// every span holds geometry.voxel_count() values.
void gradient_adjoint(const Geometry& geometry, std::span<const float> gx, std::span<const float> gy,
                      std::span<const float> gz, std::span<std::complex<float>> out, unsigned threads);

// Writes x = Re(c) and returns {‖x_new − x_old‖², ‖x_new‖²}, summed in fixed blocks (the same bits for any threads).
// x.size() == c.size().
std::array<double, 2> take_real_and_change(std::span<const std::complex<float>> c, std::span<float> x, unsigned threads);

// x (padded grid) cropped to geometry and masked.
// x holds padded's voxel count; mask holds geometry's; padded dims >= geometry's.
std::vector<float> crop_real_masked(const Geometry& geometry, const Dims3& padded, std::span<const float> x,
                                    std::span<const uint8_t> mask);

}  // namespace tessera
