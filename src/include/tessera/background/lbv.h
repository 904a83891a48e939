// LBV background field removal (Zhou et al. 2014 NMR Biomed): the background is the solution of Laplace's equation
// inside the mask with the total field as its value on the mask's border. Input: the total field (any unit: the
// method is linear) and a mask (nonzero = inside).
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

namespace lbv_defaults {
// Relative residual to stop at and iterations at most: QSM.rs LBV defaults (1e-6; at most min(3 · largest dim, 500)
// of its own iterations; the multigrid-preconditioned solver here needs tens).
inline constexpr double kTolerance = 1e-6;
inline constexpr uint32_t kMaxIterations = 500;
// The mask's border peeled off before the solve, mm: MEDI's LBV "peel" (Zhou et al. 2014; the border layers whose
// values are taken as background, 0 layers there by default). The brain's own field is strongest in its outer few
// millimetres (the cortical ribbon, 2.5-3.5 mm thick; Fischl & Dale 2000 PNAS), and LBV takes whatever it finds on the
// border for background and carries it harmonically through the whole brain: 4 mm puts the border beyond the ribbon.
inline constexpr double kPeelMm = 4.0;
}  // namespace lbv_defaults

struct LbvParams {
  double tolerance = lbv_defaults::kTolerance;
  uint32_t max_iterations = lbv_defaults::kMaxIterations;
  double peel_mm = lbv_defaults::kPeelMm;
};

// Throws Error(InvalidArgument) naming the parameter, its range and unit: tolerance in (0, 0.1], max_iterations in
// [1, 10000], peel_mm in [0, 20] mm.
void validate(const LbvParams& params);

// LBV: with M the mask eroded by peel_mm (erode_mask_mm; M = the mask at 0), I the voxels of M whose 6 face neighbours
// are all in M and B = M − I its border, the background b solves the 7-point Laplacian Δb = 0 on I (voxel edges as given) with b = f on B; conjugate gradients preconditioned
// by a geometric multigrid V-cycle (red-black Gauss–Seidel, as QSM.jl's lbv) until ‖r‖ <= tolerance · ‖r₀‖ or
// max_iterations. The local field is f − b on I (returned). One CG iteration per step.
class Lbv : public Iterative {
 public:
  // Validates everything (one clear line each).
  // geometry valid; field.size() == mask.size() == voxel_count; field finite inside the mask; the mask eroded by
  // peel_mm holds a voxel with its 6 neighbours inside (else Error InvalidArgument). field and mask outlive the computation.
  // threads: loop threads (0 = hardware); the result does not depend on it.
  Lbv(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
      const LbvParams& params = {}, unsigned threads = 1);
  ~Lbv() override;

  uint32_t total_steps() const override;
  uint32_t steps_done() const override;
  bool finished() const override;
  void step() override;
  std::string name() const override;

  // ‖r‖ / ‖r₀‖ after the last step (1 before the first).
  double relative_residual() const;
  // The local field on the interior I; finished() is true (else Error Internal). Moves it out (call once).
  LocalField take_result();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Runs LBV to the end (progress and cancel between steps, as run_to_end).
LocalField lbv(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
               const LbvParams& params = {}, unsigned threads = 1,
               const std::function<void(uint64_t, uint64_t)>& progress = {}, const std::atomic<bool>* cancel = nullptr);

// Heap bytes LBV allocates at its peak beyond its inputs, the result included (an upper bound: the mask's box is taken
// as the whole volume).
// geometry valid; params valid (else Error InvalidArgument).
uint64_t lbv_workspace_bytes(const Geometry& geometry, const LbvParams& params, unsigned threads = 1);

}  // namespace tessera
