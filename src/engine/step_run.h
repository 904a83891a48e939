// A field -> chi run driven from outside, tile by tile: the caller takes a gathered patch with next(), runs
// the network wherever it likes (in the browser: a JavaScript worker pool), and hands the output back with
// finish(), which scatters it. No thread waits on the caller and nothing polls: the run is a state machine
// whose TileScheduler hands out at most the plan's tiles_in_flight patches at once.
#pragma once

#include <array>
#include <chrono>
#include <mutex>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/engine/blend.h"
#include "tessera/engine/driver.h"
#include "tessera/common/error.h"
#include "tessera/engine/plan.h"
#include "engine/patch_steps.h"

namespace tessera {

class StepRun : public PatchSteps {
 public:
  // Starts a run of plan over the volume; chi is zeroed and filled by finish().
  // field, mask and chi hold geometry.voxel_count() values and outlive the run; field is finite.
  // plan is feasible and was made for this geometry, mask and network (plan_inversion / plan_of_choice).
  // output_channels >= 1: the network's output holds output_channels · patch voxels values (channel 0 is χ).
  StepRun(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
          const FieldNetwork& network, const TilePlan& plan, uint32_t output_channels, std::span<float> chi);

  // Patches are [1, 1, patch dims], at most plan.tiles_in_flight out; finish() writes the core into chi (blended
  // with overlapping tiles: chi is final when the last one is in). input_shape() is the plan's common patch (the whole
  // volume's padded dims, the crop box's, or edge³): a patch of that shape is gathered into input; a tile whose patch
  // was shrunk (Tile::patch_dims) is gathered into the run's own buffer, handed out as Patch::input and shape.
  std::optional<Patch> next(std::span<float> input) override;
  void finish(uint64_t job, std::span<const float> output) override;
  void fail(uint64_t job, ErrorCode code, const std::string& message) override;
  RunReport report() const override;

 private:
  const Tile& tile_of(uint64_t job) const;
  std::array<uint64_t, 3> dims_of(const Tile& tile) const { return tile_patch_dims(tile, input_shape_.dims); }
  // Gives job's own input buffer back for later patches (none when it was gathered into the caller's).
  void release(uint64_t job);

  using Clock = std::chrono::steady_clock;
  Geometry geometry_;
  std::span<const float> field_;
  std::span<const uint8_t> mask_;
  FieldNetwork network_;
  TilePlan plan_;
  std::vector<const Tile*> active_;
  TensorShape output_shape_;
  TileWriter writer_;
  std::vector<std::vector<float>> inputs_;  // per job: the gathered input of a shrunk patch, until finished or failed
  std::vector<std::vector<float>> spare_;   // released input buffers
  std::mutex buffers_;                      // guards inputs_ and spare_
  std::vector<Clock::time_point> started_;
  std::vector<double> seconds_;
  Clock::time_point t0_;
};

}  // namespace tessera
