// NDI, nonlinear dipole inversion (Polak et al. 2020, NMR Biomed 33:e4271): gradient descent on
// ‖W (e^{i D χ} − e^{i φ})‖² + λ‖χ‖², with φ = field_ppm · phase_scale the local field as a phase in radians, so the
// data term is blind to phase wraps. One step is one gradient-descent iteration (two FFT pairs).
// Volumes are x-fastest; the field is the local field in ppm; χ comes out in ppm, zero outside the mask.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/fft.h"
#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"
#include "tessera/common/physics.h"

namespace tessera {

namespace ndi_defaults {
// Gradient-descent step size: FANSI toolbox ndi.m (Milovic; the NDI authors' code), tau = 2.0.
inline constexpr double kTau = 2.0;
// Tikhonov weight λ on ‖χ‖² (χ in radians): FANSI ndi.m alpha = 1e-5 ("use small values for stability").
inline constexpr double kLambda = 1e-5;
// Iterations: FANSI ndi.m maxOuterIter = 100.
inline constexpr uint32_t kMaxIterations = 100;
// Stop when ‖χ_k+1 − χ_k‖ <= tolerance·‖χ_k+1‖: the relative update FANSI ndi.m reports every iteration (it runs a
// fixed count); 1e-3 stops once an iteration changes χ by less than 0.1 %.
inline constexpr double kTolerance = 1e-3;
// Radians of phase per ppm of field: 2π · γ̄ (kGammaBarMHzPerT, MHz/T) · 3 T · 20 ms · 1e-6 = 16.05 rad/ppm, a 3 T brain
// acquisition at TE = 20 ms (QSM.rs ndi.rs exposes the same factor as phase_scale).
inline constexpr double kPhaseScale = 2.0 * 3.14159265358979323846 * kGammaBarMHzPerT * 3.0 * 0.020;
}  // namespace ndi_defaults

struct NdiParams {
  double tau = ndi_defaults::kTau;                        // step size, (0, 4]
  double lambda = ndi_defaults::kLambda;                  // Tikhonov weight, [0, 1]
  uint32_t max_iterations = ndi_defaults::kMaxIterations; // [1, 10000]
  double tolerance = ndi_defaults::kTolerance;            // relative update, [0, 1)
  double phase_scale = ndi_defaults::kPhaseScale;         // rad/ppm, (0, 1000]
};

// Checks each parameter against its schema option (method_options(): the one range, unit and wholeness).
// Throws Error(InvalidArgument) naming the option ("tv.lambda"), its range and unit.
void validate(const NdiParams& params);

class Ndi : public Iterative {
 public:
  // Starts NDI: validates and allocates. W = magnitude / max(magnitude in the mask) inside the mask when a magnitude is
  // given (empty span: W = mask).
  // geometry valid; field.size() == mask.size() == voxel_count; field finite; the mask holds a voxel.
  // magnitude empty, or voxel_count finite values >= 0, not all zero in the mask (else Error InvalidArgument).
  // params valid. threads: FFT and loop threads (0 = hardware); the result does not depend on it.
  Ndi(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
      std::span<const float> magnitude, const NdiParams& params, unsigned threads = 1);

  uint32_t total_steps() const override { return params_.max_iterations; }
  uint32_t steps_done() const override { return done_; }
  bool finished() const override { return finished_; }
  void step() override;
  std::string name() const override { return "NDI"; }

  // ‖W (e^{iDχ} − e^{iφ})‖² + λ‖χ‖² (χ in radians) at the χ the latest step started from; NaN before the first step.
  double cost() const { return cost_; }
  // χ in ppm, zero outside the mask. finished() is true. Moves the result out (call once).
  std::vector<float> take_result();

 private:
  Geometry geometry_;
  NdiParams params_;
  unsigned threads_;
  std::span<const uint8_t> mask_;
  std::vector<float> kernel_, weight2_, phase_, chi_, a_, b_;
  std::vector<Complex> buf_;
  uint32_t done_ = 0;
  bool finished_ = false;
  double cost_;
};

// Runs NDI to the end with W = mask (see Ndi).
std::vector<float> ndi(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                       const NdiParams& params = {}, unsigned threads = 1);
// Runs NDI to the end with magnitude weights (see Ndi).
std::vector<float> ndi(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                       std::span<const float> magnitude, const NdiParams& params = {}, unsigned threads = 1);

// Heap bytes NDI allocates at its peak beyond its inputs (six volumes of floats, one complex volume, FFT scratch).
// geometry valid (else Error InvalidArgument).
uint64_t ndi_workspace_bytes(const Geometry& geometry, const NdiParams& params = {}, unsigned threads = 1);

}  // namespace tessera
