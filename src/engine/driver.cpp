#include "tessera/engine/driver.h"

#include <algorithm>
#include <string>

#include "engine/step_run.h"
#include "engine/threaded_driver.h"
#include "tessera/engine/blend.h"
#include "tessera/common/error.h"
#include "tessera/engine/plan.h"

namespace tessera {

namespace {

void validate_inputs(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, uint64_t out_size) {
  validate_geometry(g);
  validate_volume_sizes(g, field.size(), mask.size());
  if (out_size != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "output buffer holds " + std::to_string(out_size) + " values but the volume has " +
                                                std::to_string(g.voxel_count()) + " voxels");
  }
  validate_finite(g, field);
}

}  // namespace

FieldNetwork field_network(const ModelSpec& spec) {
  FieldNetwork n{spec.tile_cost(), spec.norm, spec.pad, spec.masked_input};
  if (!spec.measured_context.empty()) {
    n.context = measured_context_profile(spec.measured_context);
    n.context.radius = spec.receptive_radius;
  } else if (spec.receptive_radius) {
    n.context = dipole_context_profile(spec.receptive_radius);
  }
  return n;
}

RunReport tiled_field_inversion(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                const FieldNetwork& network, TileConfig cfg, PatchRunner& runner,
                                const RunOptions& options, std::span<float> chi) {
  validate_inputs(g, field, mask, chi.size());
  validate_tile_config(cfg);
  const TilePlan plan = plan_tiled(g, mask, network, cfg, options.threads, options.target);
  if (!plan.feasible) throw Error(ErrorCode::BudgetExceeded, plan.message);
  StepRun run(g, field, mask, network, plan, runner.output_channels(), chi);
  PatchRunner* runners[] = {&runner};
  return drive_threaded(run, runners, options);
}

WholeVolumeShape whole_volume_shape(const Geometry& g, const FieldNetwork& network) {
  WholeVolumeShape s;
  const int64_t d = std::max<int64_t>(1, network.cost.divisor);
  uint64_t voxels = 1;
  for (int a = 0; a < 3; ++a) {
    const int64_t padded = (g.dims[a] + d - 1) / d * d;
    const int64_t pad = padded - g.dims[a];
    s.pad_low[a] = network.pad == PadRule::SmallerHalfLow ? pad / 2 : pad - pad / 2;
    s.dims[a] = static_cast<uint64_t>(padded);
    voxels = saturating_mul(voxels, s.dims[a]);
  }
  s.bytes = saturating_add(network.cost.fixed_bytes, saturating_mul(voxels, network.cost.bytes_per_voxel));
  return s;
}

RunReport whole_volume_inversion(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                 const FieldNetwork& network, PatchRunner& runner, const RunOptions& options,
                                 std::span<float> chi) {
  validate_inputs(g, field, mask, chi.size());
  const TilePlan plan = plan_whole(g, network, options.target);
  if (!plan.feasible) throw Error(ErrorCode::BudgetExceeded, plan.message);
  StepRun run(g, field, mask, network, plan, runner.output_channels(), chi);
  PatchRunner* runners[] = {&runner};
  return drive_threaded(run, runners, options);
}

}  // namespace tessera
