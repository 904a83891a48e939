// A field -> chi run driven from outside, tile by tile: the caller takes a gathered patch with next(), runs
// the network wherever it likes (in the browser: a JavaScript worker pool), and hands the output back with
// finish(), which scatters it. No thread waits on the caller and nothing polls: the run is a state machine
// whose TileScheduler hands out at most the plan's tiles_in_flight patches at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/driver.h"
#include "tessera/error.h"
#include "tessera/plan.h"
#include "internal/scheduler.h"

namespace tessera {

class StepRun {
 public:
  struct Patch {
    uint64_t job = 0;   // what finish()/fail() take
    uint64_t tile = 0;  // the tile's grid index (plan.grid order)
  };

  // Starts a run of plan over the volume; chi is zeroed and filled by finish().
  // field, mask and chi hold geometry.voxel_count() values and outlive the run; field is finite.
  // plan is feasible and was made for this geometry, mask and network (plan_inversion / plan_of_choice).
  // output_channels >= 1: the network's output holds output_channels · patch voxels values (channel 0 is χ).
  StepRun(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
          const FieldNetwork& network, const TilePlan& plan, uint32_t output_channels, std::span<float> chi);

  // Shape of every patch handed out: [1, 1, patch dims] (the whole volume's padded dims, or edge³).
  const TensorShape& input_shape() const { return input_shape_; }

  // Gathers the next tile's patch into input and hands it out; nothing while plan.tiles_in_flight patches are
  // out, after the last tile started, or once the run stopped (first failure, cancel).
  // input.size() == input_shape().size().
  std::optional<Patch> next(std::span<float> input);
  // Scatters a handed-out patch's network output into chi; a wrong length fails the run naming the tile.
  // job came from next() and was neither finished nor failed.
  void finish(uint64_t job, std::span<const float> output);
  // Fails a handed-out patch: no new patch starts; report() throws this error once none is out.
  // job came from next() and was neither finished nor failed.
  void fail(uint64_t job, ErrorCode code, const std::string& message);
  // Stops handing out patches; those out may still be finished.
  void cancel();

  // No patch out and none will be handed out.
  bool finished() const { return scheduler_.finished(); }
  uint64_t done() const { return scheduler_.done(); }
  uint64_t total() const { return scheduler_.total(); }
  uint32_t in_flight() const { return scheduler_.in_flight(); }

  // The report of a finished run. Throws its first error (the tile named), or Error(Cancelled).
  // finished() is true.
  RunReport report() const;

 private:
  const Tile& tile_of(uint64_t job) const;

  using Clock = std::chrono::steady_clock;
  Geometry geometry_;
  std::span<const float> field_;
  std::span<const uint8_t> mask_;
  FieldNetwork network_;
  TilePlan plan_;
  std::vector<const Tile*> active_;
  TensorShape input_shape_;
  TensorShape output_shape_;
  std::span<float> chi_;
  TileScheduler scheduler_;
  std::vector<Clock::time_point> started_;
  std::vector<double> seconds_;
  Clock::time_point t0_;
};

}  // namespace tessera
