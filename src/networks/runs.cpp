#include "networks/runs.h"

#include <algorithm>

#include "engine/native_patch_run.h"
#include "networks/network_tasks.h"
#include "engine/step_run.h"
#include "engine/task_run.h"
#include "tessera/common/error.h"
#include "tessera/networks/physics_loops.h"
#include "tessera/networks/training_grid.h"
#include "tessera/engine/tiling.h"

namespace tessera {

namespace {

// One physics loop's task on a volume (the whole one, or a tile's patch).
NetworkTask loop_task(const ModelSpec& m, const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                      unsigned threads) {
  switch (m.algorithm) {
    case Algorithm::Lpcnn: return lpcnn_task(g, field, mask, threads);
    case Algorithm::ModlQsm: return modl_qsm_task(g, field, mask, threads);
    case Algorithm::NextQsm: return nextqsm_task(g, field, mask, threads);
    default: break;
  }
  throw Error(ErrorCode::Internal, "no physics loop for model '" + std::string(m.id) + "'");
}

uint64_t loop_calls(const ModelSpec& m) {
  switch (m.algorithm) {
    case Algorithm::Lpcnn: return lpcnn_constants::iterations;
    case Algorithm::ModlQsm: return modl_constants::iterations;
    case Algorithm::NextQsm: return 1 + std::size(nextqsm_constants::lambdas);
    default: break;
  }
  throw Error(ErrorCode::Internal, "no physics loop for model '" + std::string(m.id) + "'");
}

// A tile's patch of field and mask, and the loop running on it.
struct TileUnit : TaskRun::Unit {
  const Tile* t = nullptr;
  std::vector<float> field;
  std::vector<uint8_t> mask;
};

std::unique_ptr<PatchSteps> physics_loop_run(const InversionRequest& r, const TilePlan& plan, std::span<const float> field,
                                             std::span<const uint8_t> mask, std::span<float> chi, unsigned threads) {
  const ModelSpec& m = *r.model;
  const Geometry g = r.geometry;
  std::fill(chi.begin(), chi.end(), 0.0f);
  if (plan.whole_volume) {
    auto start = [=](uint64_t) {
      auto u = std::make_unique<TaskRun::Unit>();
      u->task = loop_task(m, g, field, mask, threads);
      return u;
    };
    auto done = [=](TaskRun::Unit&, std::vector<float> result) { std::copy(result.begin(), result.end(), chi.begin()); };
    RunReport base;
    base.tiles_total = base.tiles_run = 1;
    base.patch_edge = plan.patch_edge;
    base.bytes_per_tile = plan.bytes_per_tile;
    return std::make_unique<TaskRun>(1, 1, loop_calls(m), start, done, base);
  }
  // Tiled: the whole loop per patch (crop and stitch: the core written back at mask voxels).
  if (plan.tile.overlapping()) {
    throw Error(ErrorCode::InvalidArgument, "overlapping tiles are blended for field → χ networks only; a physics loop tiles with stride = core");
  }
  auto grid = std::make_shared<TileGrid>(plan.grid);  // the tiles the units point at
  auto active = std::make_shared<std::vector<const Tile*>>(active_tiles(*grid));
  const uint64_t edge = grid->patch_edge;
  Geometry pg = g;
  pg.dims = {static_cast<int64_t>(edge), static_cast<int64_t>(edge), static_cast<int64_t>(edge)};
  auto start = [=](uint64_t i) {
    auto u = std::make_unique<TileUnit>();
    u->t = (*active)[i];
    u->tile = u->t->index;
    u->field.resize(edge * edge * edge);
    u->mask.resize(edge * edge * edge);
    gather_host_patch(g, field, mask, u->t->patch_lo, edge, u->field, u->mask);
    u->task = loop_task(m, pg, u->field, u->mask, threads);
    return u;
  };
  auto done = [=](TaskRun::Unit& unit, std::vector<float> result) {
    const TileUnit& u = static_cast<TileUnit&>(unit);
    (void)grid;  // the tiles live in it
    scatter_host_core(g, mask, *u.t, edge, result, chi);
  };
  RunReport base;
  base.tiles_total = grid->tiles.size();
  base.tiles_run = active->size();
  base.tiles_skipped = grid->skipped;
  base.patch_edge = edge;
  base.bytes_per_tile = plan.bytes_per_tile;
  return std::make_unique<TaskRun>(active->size(), std::max<uint32_t>(1, plan.tiles_in_flight), loop_calls(m), start, done, base);
}

// A run on the network's training grid: its first step resamples field and mask there (and starts the run on them), the
// run goes on as it would there, its last step resamples χ back onto the source grid (zero outside the source mask).
class TrainingGridRun : public PatchSteps {
 public:
  TrainingGridRun(const InversionRequest& r, const TilePlan& plan, std::span<const float> field, std::span<const uint8_t> mask,
                  std::span<float> chi, unsigned threads)
      : PatchSteps(1, 1), source_(r), plan_(plan), field_(field), mask_(mask), chi_(chi), threads_(threads) {
    validate_volume_sizes(r.geometry, field.size(), mask.size());
    if (chi.size() != r.geometry.voxel_count()) throw Error(ErrorCode::InvalidArgument, "chi must hold the volume's voxel count");
    training_ = source_;
    training_.geometry = training_grid(r.geometry, r.model->training_voxel_mm);
    std::fill(chi.begin(), chi.end(), 0.0f);
  }

  std::optional<Patch> next(std::span<float> input) override { return inner_ ? inner_->next(input) : std::nullopt; }
  void finish(uint64_t job, std::span<const float> output) override { inner_->finish(job, output); }
  void fail(uint64_t job, ErrorCode code, const std::string& message) override { inner_->fail(job, code, message); }
  void cancel() override {
    cancelled_ = true;
    if (inner_) inner_->cancel();
  }
  bool step() override {
    if (cancelled_) return false;
    if (!inner_) {
      validate_finite(source_.geometry, field_);
      const Dims3& to = training_.geometry.dims;
      field_t_ = kspace_resample(source_.geometry, field_, to, threads_);
      mask_t_ = kspace_resample_mask(source_.geometry, mask_, to, threads_);
      validate_mask_not_empty(training_.geometry, mask_t_);
      chi_t_.assign(field_t_.size(), 0.0f);
      inner_ = start_run(training_, plan_, field_t_, mask_t_, {}, chi_t_, threads_);
      input_shape_ = inner_->input_shape();
      return true;
    }
    if (restored_ || !inner_->finished()) return inner_->step();
    try {
      (void)inner_->report();
    } catch (...) {
      return false;  // report() passes the run's error on
    }
    const std::vector<float> back = from_training_grid(training_.geometry, chi_t_, source_.geometry, mask_, threads_);
    std::copy(back.begin(), back.end(), chi_.begin());
    restored_ = true;
    return true;
  }
  bool finished() const override {
    if (!inner_) return cancelled_;
    if (!inner_->finished()) return false;
    if (restored_ || cancelled_) return true;
    try {
      (void)inner_->report();
    } catch (...) {
      return true;  // failed: nothing to restore
    }
    return false;
  }
  // The inner run's units, and the two resampling steps.
  uint64_t done() const override { return (inner_ ? 1 + inner_->done() : 0) + (restored_ ? 1 : 0); }
  uint64_t total() const override { return 2 + (inner_ ? inner_->total() : 0); }
  RunReport report() const override {
    if (!inner_) throw Error(ErrorCode::Cancelled, "cancelled before the field was resampled to the training grid");
    RunReport r = inner_->report();
    if (!restored_) throw Error(ErrorCode::Cancelled, "cancelled before χ was resampled back from the training grid");
    return r;
  }

 private:
  InversionRequest source_, training_;
  TilePlan plan_;
  std::span<const float> field_;
  std::span<const uint8_t> mask_;
  std::span<float> chi_;
  unsigned threads_;
  std::vector<float> field_t_, chi_t_;
  std::vector<uint8_t> mask_t_;
  std::unique_ptr<PatchSteps> inner_;
  bool restored_ = false;
  bool cancelled_ = false;
};

}  // namespace

std::unique_ptr<PatchSteps> start_run(const InversionRequest& r, const TilePlan& plan, std::span<const float> field,
                                      std::span<const uint8_t> mask, std::span<const float> magnitude, std::span<float> chi,
                                      unsigned threads) {
  if (is_phase_network(r)) {
    const ModelSpec& m = *r.model;
    const Geometry g = r.geometry;
    const PhaseSettings s = r.phase;
    auto start = [=](uint64_t) {
      auto u = std::make_unique<TaskRun::Unit>();
      u->task = phase_network_task(m, g, field, magnitude, mask, s, Target::Wasm);
      return u;
    };
    auto done = [=](TaskRun::Unit&, std::vector<float> result) { std::copy(result.begin(), result.end(), chi.begin()); };
    RunReport base;  // one network call per echo: each echo counts as a tile
    base.tiles_total = base.tiles_run = std::max<uint64_t>(1, s.te_s.size());
    base.patch_edge = plan.patch_edge;
    base.bytes_per_tile = plan.bytes_per_tile;
    return std::make_unique<TaskRun>(1, 1, base.tiles_total, start, done, base);
  }
  if (!magnitude.empty()) throw Error(ErrorCode::InvalidArgument, "a magnitude is only taken by the phase networks (iQSM family)");
  if (r.model && needs_training_grid(*r.model, r.geometry)) {
    return std::make_unique<TrainingGridRun>(r, plan, field, mask, chi, threads);
  }
  if (r.model && r.model->kind == ModelKind::PhysicsLoop) return physics_loop_run(r, plan, field, mask, chi, threads);
  if (r.model && r.model->kind == ModelKind::NativePatches) {
    const auto model = r.model->algorithm == Algorithm::AutoQsm ? NativePatchRun::Model::AutoQsm : NativePatchRun::Model::Qsmgan;
    return std::make_unique<NativePatchRun>(r.geometry, field, mask, model, chi, plan.tiles_in_flight, plan.bytes_per_tile);
  }
  return std::make_unique<StepRun>(r.geometry, field, mask, request_network(r), plan, network_output_channels(r, 0), chi);
}

}  // namespace tessera
