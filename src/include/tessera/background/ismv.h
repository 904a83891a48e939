// iSMV background field removal (Wen et al. 2014 MRM): the background inside the mask eroded by the kernel is found
// by iterating the spherical mean value property with the total field fixed on the rim. Input: the total field (any
// unit: the method is linear) and a mask (nonzero = inside).
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

namespace ismv_defaults {
// SMV radius (mm), stopping tolerance and iterations at most: QSM.rs iSMV defaults (5 mm, 1e-6, 50).
inline constexpr double kRadiusMm = 5.0;
inline constexpr double kTolerance = 1e-6;
inline constexpr uint32_t kMaxIterations = 50;
}  // namespace ismv_defaults

struct IsmvParams {
  double radius_mm = ismv_defaults::kRadiusMm;
  double tolerance = ismv_defaults::kTolerance;
  uint32_t max_iterations = ismv_defaults::kMaxIterations;
};

// Throws Error(InvalidArgument) naming the parameter, its range and unit: radius_mm in [0.5, 50] mm, tolerance in
// (0, 0.1], max_iterations in [1, 10000].
void validate(const IsmvParams& params);

// iSMV: with E the mask eroded by the radius (erode_mask_mm) and R = mask − E its rim, b₀ = f and
// b_{k+1} = E·(S∗b_k) + R·f until ‖b_{k+1} − b_k‖ <= tolerance · ‖E·f‖ or max_iterations; the local field is f − b on
// E (returned). The volume is cut to the mask's box and zero padded by the radius. One iteration per step.
class Ismv : public Iterative {
 public:
  // Validates everything (one clear line each).
  // geometry valid; field.size() == mask.size() == voxel_count; field finite inside the mask; the mask holds a voxel;
  // the radius leaves voxels (else Error InvalidArgument). field and mask outlive the computation.
  // threads: FFT and loop threads (0 = hardware); the result does not depend on it.
  Ismv(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
       const IsmvParams& params = {}, unsigned threads = 1);
  ~Ismv() override;

  uint32_t total_steps() const override;
  uint32_t steps_done() const override;
  bool finished() const override;
  void step() override;
  std::string name() const override;

  // ‖b_{k+1} − b_k‖ / ‖E·f‖ of the last step (1 before the first).
  double relative_change() const;
  // The local field on the eroded mask; finished() is true (else Error Internal). Moves it out (call once).
  LocalField take_result();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Runs iSMV to the end (progress and cancel between steps, as run_to_end).
LocalField ismv(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                const IsmvParams& params = {}, unsigned threads = 1,
                const std::function<void(uint64_t, uint64_t)>& progress = {}, const std::atomic<bool>* cancel = nullptr);

// Heap bytes iSMV allocates at its peak beyond its inputs, the result included (an upper bound: the padded box is
// taken as the whole volume plus the radius on each side).
// geometry valid; params valid (else Error InvalidArgument).
uint64_t ismv_workspace_bytes(const Geometry& geometry, const IsmvParams& params, unsigned threads = 1);

}  // namespace tessera
