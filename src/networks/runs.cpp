#include "networks/runs.h"

#include <algorithm>

#include "engine/native_patch_run.h"
#include "networks/network_tasks.h"
#include "engine/step_run.h"
#include "engine/task_run.h"
#include "tessera/common/error.h"
#include "tessera/networks/physics_loops.h"
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
  if (r.model && r.model->kind == ModelKind::PhysicsLoop) return physics_loop_run(r, plan, field, mask, chi, threads);
  if (r.model && r.model->kind == ModelKind::NativePatches) {
    const auto model = r.model->algorithm == Algorithm::AutoQsm ? NativePatchRun::Model::AutoQsm : NativePatchRun::Model::Qsmgan;
    return std::make_unique<NativePatchRun>(r.geometry, field, mask, model, chi, plan.tiles_in_flight, plan.bytes_per_tile);
  }
  return std::make_unique<StepRun>(r.geometry, field, mask, request_network(r), plan, network_output_channels(r, 0), chi);
}

}  // namespace tessera
