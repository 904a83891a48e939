// RESHARP background field removal (Sun & Wilman 2014 MRM): SHARP's deconvolution regularised by Tikhonov instead of
// truncated. Input: the total field (any unit: the method is linear) and a mask (nonzero = inside).
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

namespace resharp_defaults {
// SMV radius, mm: QSM.rs ResharpParams::default (6 mm).
inline constexpr double kRadiusMm = 6.0;
// Tikhonov weight λ: QSM.rs ResharpParams::default (1e-4).
inline constexpr double kLambda = 1e-4;
// Conjugate-gradient iterations at most and relative residual to stop at: QSM.rs ResharpParams::default (30, 1e-6).
inline constexpr uint32_t kMaxIterations = 30;
inline constexpr double kTolerance = 1e-6;
// The least share of the mask the radius's erosion must keep before the radius shrinks: a half (a radius that leaves
// out most of the mask shrinks). Whole adult heads keep 68–77 % at 6 mm and keep it; a small head (24×20×16 mm) or a
// real 24×24×41 mm slab shrinks to the floor, 2 voxels of the largest edge, where it keeps what V-SHARP keeps.
inline constexpr double kMinKeptShare = 0.5;
}  // namespace resharp_defaults

struct ResharpParams {
  double radius_mm = resharp_defaults::kRadiusMm;
  double lambda = resharp_defaults::kLambda;
  uint32_t max_iterations = resharp_defaults::kMaxIterations;
  double tolerance = resharp_defaults::kTolerance;
  double min_kept_share = resharp_defaults::kMinKeptShare;
};

// Throws Error(InvalidArgument) naming the parameter, its range and unit: radius_mm in [0.5, 50] mm, lambda in
// (0, 1], max_iterations in [1, 10000], tolerance in (0, 0.1], min_kept_share in [0, 1].
void validate(const ResharpParams& params);

// RESHARP: the local field x minimising ‖M C (x − f)‖² + λ‖x‖², with C = 1 − S the SMV high-pass of the radius and M
// the mask eroded by it (erode_mask_mm), f the masked field; conjugate gradients on (C M C + λ) x = C M C f from x = 0.
// The result is x on the eroded mask (returned). The volume is cut to the mask's box and zero padded by the radius.
// One CG iteration per step.
// The radius adapts to the mask's depth: when radius_mm's erosion keeps less than min_kept_share of the mask's voxels
// (a small head, a slab whose field of view cuts the brain), the radius shrinks in steps of half the smallest voxel
// edge until the erosion keeps that share, down to V-SHARP's smallest radius (vsharp_defaults::kMinRadiusVoxels × the
// largest voxel edge) at the least; radius_mm() says which radius ran. min_kept_share 0: radius_mm always.
class Resharp : public Iterative {
 public:
  // Validates everything (one clear line each).
  // geometry valid; field.size() == mask.size() == voxel_count; field finite inside the mask; the mask holds a voxel;
  // the radius leaves voxels (else Error InvalidArgument). field and mask outlive the computation.
  // threads: FFT and loop threads (0 = hardware); the result does not depend on it.
  Resharp(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
          const ResharpParams& params = {}, unsigned threads = 1);
  ~Resharp() override;

  uint32_t total_steps() const override;
  uint32_t steps_done() const override;
  bool finished() const override;
  void step() override;
  std::string name() const override;

  // ‖r‖ / ‖b‖ of the normal equations after the last step (1 before the first).
  double relative_residual() const;
  // The SMV radius in mm that runs (params.radius_mm, or the smaller one the mask's depth allowed).
  double radius_mm() const;
  // The local field on the eroded mask; finished() is true (else Error Internal). Moves it out (call once).
  LocalField take_result();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Runs RESHARP to the end (progress and cancel between steps, as run_to_end).
LocalField resharp(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                   const ResharpParams& params = {}, unsigned threads = 1,
                   const std::function<void(uint64_t, uint64_t)>& progress = {}, const std::atomic<bool>* cancel = nullptr);

// Heap bytes RESHARP allocates at its peak beyond its inputs, the result included (an upper bound: the padded box is
// taken as the whole volume plus the radius on each side).
// geometry valid; params valid (else Error InvalidArgument).
uint64_t resharp_workspace_bytes(const Geometry& geometry, const ResharpParams& params, unsigned threads = 1);

}  // namespace tessera
