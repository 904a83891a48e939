// AutoQSM / QSMGAN native patching as a run driven from outside, like StepRun: next() hands out the input patches
// (x-fastest patch order) while fewer than `in_flight` are out, finish() takes a network output. Outputs are blended
// into the result in patch order (an output that arrives early waits, still counted in flight), so the result is
// bit-identical to the sequential blend whatever the completion order. autoqsm_invert / qsmgan_invert drive it
// sequentially; the bindings can drive it from the worker pool.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "internal/scheduler.h"
#include "tessera/error.h"
#include "tessera/geometry.h"
#include "tessera/runner.h"

namespace tessera {

class NativePatchRun {
 public:
  enum class Model { AutoQsm, Qsmgan };

  // geometry valid; field.size() == mask.size() == voxel_count (else Error InvalidArgument); field finite (else
  // NonFiniteInput). field and mask outlive the run. in_flight >= 1 (0 is taken as 1).
  NativePatchRun(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask, Model model,
                 uint32_t in_flight = 1);

  // [1, 1, 64, 64, 64] for both networks.
  const TensorShape& input_shape() const { return input_shape_; }
  // [1, 1, output³].
  const TensorShape& output_shape() const { return output_shape_; }
  // "autoqsm: network (patch 3 of 12)": how messages name a patch.
  std::string where(uint64_t job) const;

  // Gathers the next patch (edge-replicate padding) into input; nothing while in_flight patches are out (handed
  // out, or finished and waiting for an earlier one), after the last, or once the run stopped.
  // input.size() == input_shape().size().
  std::optional<uint64_t> next(std::span<float> input);
  // Takes a handed-out patch's network output; a wrong length fails the run naming the patch.
  void finish(uint64_t job, std::span<const float> output);
  // Fails a handed-out patch: no new patch starts.
  void fail(uint64_t job, ErrorCode code, const std::string& message);
  void cancel();

  bool finished() const { return scheduler_.finished(); }
  uint64_t done() const { return scheduler_.done(); }
  uint64_t total() const { return scheduler_.total(); }
  uint32_t in_flight() const { return scheduler_.in_flight(); }

  // χ (ppm) times the mask. Throws the run's first error, or Error(Cancelled).
  // finished() is true.
  std::vector<float> result() const;

 private:
  void blend(uint64_t job, std::span<const float> output);

  Geometry geometry_;
  std::span<const uint8_t> mask_;
  std::vector<float> input_;  // the field as the network sees it (QSMGAN: scaled)
  const char* name_;
  int64_t in_ = 0, out_ = 0, stride_ = 0;
  std::array<int64_t, 3> grid_{};
  std::function<double(float)> post_;
  TensorShape input_shape_;
  TensorShape output_shape_;
  std::vector<double> acc_;
  std::map<uint64_t, std::vector<float>> waiting_;  // finished, waiting for an earlier patch
  uint64_t blended_ = 0;                            // patches blended so far (in order)
  TileScheduler scheduler_;
};

}  // namespace tessera
