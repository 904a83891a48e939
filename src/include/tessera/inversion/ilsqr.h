// iLSQR (Li et al. 2015, NeuroImage 108:111-122): an LSQR solution of the Laplacian-weighted dipole system, a
// streak-free FastQSM estimate, the streaking artefact estimated in the ill-conditioned cone (|D| < threshold) by a
// second LSQR solve on the weighted gradients, and its subtraction. One step is one LSQR iteration (two FFT pairs), or
// the FastQSM pass between the two solves. No zero padding (as STI Suite and QSM.rs).
// Volumes are x-fastest; the field is the local field in ppm; χ comes out in ppm, zero outside the mask.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/fft.h"
#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"

namespace tessera {

class LsqrSolver;

namespace ilsqr_defaults {
// LSQR stopping tolerance (‖r‖/‖b‖ or ‖Aᵀr‖/(‖A‖‖r‖)): QSM.rs ilsqr.rs IlsqrParams tol = 0.01 and the tol_lsqr = 0.01
// of its step 1, both from kamesy/QSM.m's ilsqr (STI Suite's iLSQR uses the same).
inline constexpr double kTolerance = 0.01;
// Iterations of each of the two solves: QSM.rs ilsqr.rs max_iter = 50 and maxit_lsqr = 50 (QSM.m).
inline constexpr uint32_t kMaxIterations = 50;
// The ill-conditioned cone, |D| below this: Li et al. 2015 Eq. 4 with QSM.m's thr = 0.1 (QSM.rs ilsqr.rs).
inline constexpr double kConeThreshold = 0.1;
}  // namespace ilsqr_defaults

struct IlsqrParams {
  double tolerance = ilsqr_defaults::kTolerance;             // (0, 1)
  uint32_t max_iterations = ilsqr_defaults::kMaxIterations;  // per solve, [1, 1000]
  double cone_threshold = ilsqr_defaults::kConeThreshold;    // |D| units, (0, 2/3)
};

// Checks each parameter against its schema option (method_options(): the one range, unit and wholeness).
// Throws Error(InvalidArgument) naming the option ("tv.lambda"), its range and unit.
void validate(const IlsqrParams& params);

class Ilsqr : public Iterative {
 public:
  // Starts iLSQR: validates, computes the Laplacian weights and starts the first LSQR solve.
  // geometry valid; field.size() == mask.size() == voxel_count; field finite; the mask holds a voxel.
  // params valid. threads: FFT and loop threads (0 = hardware); the result does not depend on it.
  Ilsqr(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask, const IlsqrParams& params,
        unsigned threads = 1);
  ~Ilsqr() override;

  // Both solves at their iteration limit, and the FastQSM pass.
  uint32_t total_steps() const override { return 2 * params_.max_iterations + 1; }
  uint32_t steps_done() const override { return done_; }
  bool finished() const override { return stage_ == Stage::Done; }
  void step() override;
  std::string name() const override { return "iLSQR"; }

  // The first solve's χ in ppm (streaks included), zero outside the mask. The FastQSM pass has run.
  std::vector<float> lsqr_result() const;
  // χ = LSQR solution − streaking artefact, in ppm, zero outside the mask. finished() is true. Moves it out (call once).
  std::vector<float> take_result();

 private:
  enum class Stage { Lsqr, FastQsm, Streaks, Done };
  void fast_qsm_and_start_streaks();
  void finish();

  Geometry geometry_;
  IlsqrParams params_;
  unsigned threads_;
  std::span<const float> field_;
  std::span<const uint8_t> mask_;
  Stage stage_ = Stage::Lsqr;
  uint32_t done_ = 0;
  std::vector<float> kernel_;   // D, then the cone indicator |D| < threshold
  std::vector<float> weight_;   // Laplacian weights (first solve)
  std::vector<float> x_lsqr_;   // first solve's χ
  std::vector<float> gw_;       // gradient weights, 3 volumes (second solve)
  std::vector<float> tmp_, tmp3_;
  std::vector<Complex> buf_;
  std::unique_ptr<LsqrSolver> solver_;
  std::vector<float> chi_;
};

// Runs iLSQR to the end (see Ilsqr).
std::vector<float> ilsqr(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                         const IlsqrParams& params = {}, unsigned threads = 1);

// Heap bytes iLSQR allocates at its peak beyond its inputs: the second solve's 24 float volumes (LSQR's 10 with a
// 3-volume residual, 3 gradient weights, its right-hand side, 4 operator temporaries, the first solve's χ, the cone
// kernel, one complex volume) and the FFT scratch.
// geometry valid (else Error InvalidArgument).
uint64_t ilsqr_workspace_bytes(const Geometry& geometry, const IlsqrParams& params = {}, unsigned threads = 1);

}  // namespace tessera
