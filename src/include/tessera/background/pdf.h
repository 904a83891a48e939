// PDF background field removal (Liu et al. 2011 NMR Biomed): projection onto dipole fields. Input: the total field
// (any unit: the method is linear) and a mask (nonzero = inside).
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

namespace pdf_defaults {
// Conjugate-gradient iterations at most: MEDI toolbox PDF.m n_CG = 30 (Liu et al. 2011 NMR Biomed).
inline constexpr uint32_t kMaxIterations = 30;
// Stop when the normal equations' residual ‖r‖ falls below tolerance × ‖b‖: QSM.jl pdf tol = 1e-5.
inline constexpr double kTolerance = 1e-5;
// Zero padding added to the mask's box on each axis, in voxels, where background sources may sit outside the field of
// view: MEDI toolbox PDF.m n_pad = 40.
inline constexpr uint32_t kPadVoxels = 40;
}  // namespace pdf_defaults

struct PdfParams {
  uint32_t max_iterations = pdf_defaults::kMaxIterations;
  double tolerance = pdf_defaults::kTolerance;
  uint32_t pad_voxels = pdf_defaults::kPadVoxels;
};

// Throws Error(InvalidArgument) naming the parameter, its range and unit: max_iterations in [1, 10000],
// tolerance in (0, 1), pad_voxels in [0, 1024] voxels.
void validate(const PdfParams& params);

// PDF, projection onto dipole fields (Liu et al. 2011 NMR Biomed; MEDI toolbox PDF.m): the susceptibility x outside
// the mask (the padded box included) whose dipole field best fits the total field inside it, min ‖W (f − D∗x)‖² over
// the mask, solved by conjugate gradients on the normal equations M̄ D W² D M̄ x = M̄ D W² f from x = 0; the local
// field is f − D∗x inside the mask. The volume is cut to the mask's box and zero padded by pad_voxels on each axis
// (rounded up to a size the FFT handles fast). One CG iteration per step.
class Pdf : public Iterative {
 public:
  // Validates everything (one clear line each).
  // geometry valid; field.size() == mask.size() == voxel_count; field finite inside the mask; the mask holds a voxel.
  // weights: empty (1 inside the mask) or voxel_count values, finite and >= 0 inside the mask, not all 0 there (e.g.
  // 1/σ of the field, MEDI's N_std). field, mask and weights outlive the computation.
  // threads: FFT and loop threads (0 = hardware); the result does not depend on it.
  Pdf(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
      std::span<const float> weights = {}, const PdfParams& params = {}, unsigned threads = 1);
  ~Pdf() override;

  uint32_t total_steps() const override;
  uint32_t steps_done() const override;
  bool finished() const override;
  void step() override;
  std::string name() const override;

  // ‖r‖ / ‖b‖ of the normal equations after the last step (1 before the first).
  double relative_residual() const;
  // The local field on the input mask; finished() is true (else Error Internal). Moves it out (call once).
  LocalField take_result();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Runs PDF to the end (progress and cancel between steps, as run_to_end).
LocalField pdf(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
               std::span<const float> weights = {}, const PdfParams& params = {}, unsigned threads = 1,
               const std::function<void(uint64_t, uint64_t)>& progress = {}, const std::atomic<bool>* cancel = nullptr);

// Heap bytes PDF allocates at its peak beyond its inputs, the result included (an upper bound: the padded box is taken
// as the whole volume plus pad_voxels, rounded up as the run rounds it).
// geometry valid; params valid (else Error InvalidArgument).
uint64_t pdf_workspace_bytes(const Geometry& geometry, const PdfParams& params, unsigned threads = 1);

}  // namespace tessera
