#include "engine/step_run.h"

#include <algorithm>

#include "tessera/engine/crop.h"
#include "tessera/common/error.h"

namespace tessera {

namespace {

const TilePlan& checked(const TilePlan& plan, const Geometry& g) {
  if (!plan.feasible) throw Error(ErrorCode::BudgetExceeded, plan.message.empty() ? "the plan is not feasible" : plan.message);
  if (plan.grid.tiles.empty() || plan.grid.tiles.back().core_hi != (plan.crop.cropped ? plan.crop.hi : g.dims) ||
      (plan.crop.cropped && (plan.crop.hi[0] > g.dims[0] || plan.crop.hi[1] > g.dims[1] || plan.crop.hi[2] > g.dims[2]))) {
    throw Error(ErrorCode::InvalidArgument, "the plan's tiles do not cover this " + dims_text(g.dims) + " volume: plan again");
  }
  if (plan.tiles_in_flight == 0) throw Error(ErrorCode::InvalidArgument, "the plan allows no tile in flight");
  return plan;
}

std::span<float> checked_output(const Geometry& g, std::span<float> chi) {
  validate_geometry(g);
  if (chi.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "output buffer holds " + std::to_string(chi.size()) + " values but the volume has " +
                                                std::to_string(g.voxel_count()) + " voxels");
  }
  return chi;
}

}  // namespace

StepRun::StepRun(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                 const FieldNetwork& network, const TilePlan& plan, uint32_t output_channels, std::span<float> chi)
    : PatchSteps(active_tiles(checked(plan, g).grid).size(), plan.tiles_in_flight),
      geometry_(g),
      field_(field),
      mask_(mask),
      network_(network),
      plan_(checked(plan, g)),
      active_(active_tiles(plan_.grid)),
      writer_(g, mask, plan_.grid, network.norm, checked_output(g, chi)),
      t0_(Clock::now()) {
  validate_volume_sizes(g, field.size(), mask.size());
  validate_finite(g, field);
  if (const uint64_t outside = input_voxels_outside(g, field, mask, network, plan_.crop)) {
    throw Error(ErrorCode::InvalidArgument,
                "the field is not zero at " + std::to_string(outside) + " voxels outside the box the plan crops to (" +
                    crop_text(g, plan_.crop) + "), and this network reads its field unmasked: plan with the field "
                    "(plan({field, ...}) or invert without a plan) so the box holds them, or run with crop: 'off'");
  }
  const uint64_t e = plan_.patch_edge;
  // A whole volume or a crop box (one patch, or its slabs) runs non-cubic patches.
  input_shape_ = TensorShape{1, plan_.whole_volume || plan_.crop.cropped ? plan_.patch_dims : std::array<uint64_t, 3>{e, e, e}};
  output_shape_ = TensorShape{std::max<uint32_t>(1, output_channels), input_shape_.dims};
  inputs_.resize(active_.size());
  started_.resize(active_.size());
  seconds_.assign(active_.size(), 0.0);
}

const Tile& StepRun::tile_of(uint64_t job) const {
  if (job >= active_.size()) throw Error(ErrorCode::InvalidArgument, "no patch " + std::to_string(job) + " in this run");
  return *active_[job];
}

std::optional<PatchSteps::Patch> StepRun::next(std::span<float> input) {
  if (input.size() != input_shape_.size()) {
    throw Error(ErrorCode::InvalidArgument, "the patch buffer holds " + std::to_string(input.size()) + " values, expected " +
                                                std::to_string(input_shape_.size()));
  }
  const std::optional<uint64_t> job = scheduler_.try_acquire();
  if (!job) return std::nullopt;
  const Tile& t = *active_[*job];
  const std::array<uint64_t, 3> dims = dims_of(t);
  Patch patch{*job, t.index};
  try {
    const std::span<const uint8_t> mask = network_.masked_input ? mask_ : std::span<const uint8_t>{};
    if (dims == input_shape_.dims) {
      gather_patch(geometry_, field_, t.patch_lo, dims, network_.norm, input, mask);
    } else {
      std::vector<float> own;
      {
        std::lock_guard lock(buffers_);
        if (!spare_.empty()) {
          own = std::move(spare_.back());
          spare_.pop_back();
        }
      }
      own.resize(dims[0] * dims[1] * dims[2]);
      gather_patch(geometry_, field_, t.patch_lo, dims, network_.norm, own, mask);
      patch.shape = TensorShape{1, dims};
      patch.input = own;
      std::lock_guard lock(buffers_);
      inputs_[*job] = std::move(own);  // the vector's storage moves with it: patch.input stays valid
    }
  } catch (...) {
    scheduler_.fail(*job, std::current_exception());
    throw;
  }
  started_[*job] = Clock::now();
  return patch;
}

void StepRun::release(uint64_t job) {
  std::lock_guard lock(buffers_);
  if (inputs_[job].empty()) return;
  spare_.push_back(std::move(inputs_[job]));
  inputs_[job] = {};
}

void StepRun::finish(uint64_t job, std::span<const float> output) {
  const Tile& t = tile_of(job);
  release(job);
  try {
    const std::string where = plan_.whole_volume ? "whole volume " + dims_text(input_shape_.dims) : tile_text(t);
    const TensorShape shape{output_shape_.channels, dims_of(t)};
    check_output_size(output.size(), shape, where);
    writer_.write(t, shape.dims, output.first(shape.spatial()));
    seconds_[job] = std::chrono::duration<double>(Clock::now() - started_[job]).count();
    scheduler_.complete(job);
  } catch (...) {
    scheduler_.fail(job, std::current_exception());
  }
}

void StepRun::fail(uint64_t job, ErrorCode code, const std::string& message) {
  const Tile& t = tile_of(job);
  release(job);
  const std::string where = plan_.whole_volume ? "whole volume " + dims_text(input_shape_.dims) : tile_text(t);
  scheduler_.fail(job, std::make_exception_ptr(Error(code, where + ": " + message)));
}

RunReport StepRun::report() const {
  check_succeeded("tiles");
  RunReport r;
  r.tiles_total = plan_.grid.tiles.size();
  r.tiles_run = scheduler_.done();
  r.tiles_skipped = plan_.grid.skipped;
  r.concurrency = scheduler_.concurrency();
  r.max_in_flight = scheduler_.max_in_flight();
  r.patch_edge = plan_.patch_edge;
  r.bytes_per_tile = plan_.bytes_per_tile;
  r.wall_seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
  r.tile_seconds = seconds_;
  return r;
}

}  // namespace tessera
