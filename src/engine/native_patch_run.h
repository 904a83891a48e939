// AutoQSM / QSMGAN native patching as a run driven from outside, like StepRun: next() hands out the input patches
// (x-fastest patch order) while fewer than `in_flight` are out, finish() takes a network output. Outputs are blended
// into the result in patch order (an output that arrives early waits, still counted in flight), so the result is
// bit-identical to the sequential blend whatever the completion order. autoqsm_invert / qsmgan_invert drive it
// sequentially; the bindings can drive it from the worker pool.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/patch_steps.h"
#include "tessera/common/error.h"
#include "tessera/common/geometry.h"
#include "tessera/engine/runner.h"

namespace tessera {

class NativePatchRun : public PatchSteps {
 public:
  enum class Model { AutoQsm, Qsmgan };

  // geometry valid; field.size() == mask.size() == chi.size() == voxel_count (else Error InvalidArgument); field
  // finite (else NonFiniteInput). field, mask and chi outlive the run; report() writes χ (ppm) times the mask to chi.
  // in_flight >= 1 (0 is taken as 1); bytes_per_patch is what the plan budgets per patch (for the report).
  NativePatchRun(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask, Model model,
                 std::span<float> chi, uint32_t in_flight = 1, uint64_t bytes_per_patch = 0);

  // [1, 1, output³].
  const TensorShape& output_shape() const { return output_shape_; }
  // "autoqsm: network (patch 3 of 12)": how messages name a patch.
  std::string where(uint64_t job) const;

  // Patches are [1, 1, 64, 64, 64] in x-fastest patch order, all of the plan's one (whole-volume) tile; an output
  // that arrives before an earlier one waits, still in flight, and is blended in patch order.
  std::optional<Patch> next(std::span<float> input) override;
  void finish(uint64_t job, std::span<const float> output) override;
  void fail(uint64_t job, ErrorCode code, const std::string& message) override;
  RunReport report() const override;

 private:
  void blend(uint64_t job, std::span<const float> output);

  Geometry geometry_;
  std::span<const uint8_t> mask_;
  std::span<float> chi_;
  std::vector<float> input_;  // the field as the network sees it (QSMGAN: scaled)
  const char* name_;
  int64_t in_ = 0, out_ = 0, stride_ = 0;
  std::array<int64_t, 3> grid_{};
  std::function<double(float)> post_;
  TensorShape output_shape_;
  std::vector<double> acc_;
  std::map<uint64_t, std::vector<float>> waiting_;  // finished, waiting for an earlier patch
  uint64_t blended_ = 0;                            // patches blended so far (in order)
  uint64_t bytes_per_patch_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace tessera
