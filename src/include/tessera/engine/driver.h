// The tiled drivers: run a network (or a whole algorithm) tile by tile under the budget, or the
// whole volume at once. The caller owns the volumes and the output buffer.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/budget.h"
#include "tessera/engine/fidelity_model.h"
#include "tessera/common/geometry.h"
#include "tessera/registry/registry.h"
#include "tessera/engine/runner.h"
#include "tessera/engine/tiling.h"

namespace tessera {

// What the drivers need to know about a field -> chi network.
struct FieldNetwork {
  TileCost cost;
  Normalization norm;
  PadRule pad = PadRule::SmallerHalfLow;
  bool masked_input = false;  // the network takes the field multiplied by the mask
  ContextProfile context;     // how far it looks (empty: unknown; the planner then cannot predict fidelity)
  // The module heap a patch in flight holds per patch voxel: its input and output (f32), each held twice at the
  // hand-over (the driver's buffer and the bridge's copy); a physics loop holds its loop's volumes there.
  uint64_t module_bytes_per_patch_voxel = 4 * 2 * 2;
};

// The FieldNetwork of a registered network.
FieldNetwork field_network(const ModelSpec& spec);

using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

struct RunOptions {
  uint32_t threads = 1;                        // worker pool size
  Target target = kBuildTarget;                // wasm: the activation budget caps tiles in flight
  ProgressFn progress;                         // called from the driver thread only
  const std::atomic<bool>* cancel = nullptr;   // set to true to stop promptly
};

struct RunReport {
  uint64_t tiles_total = 0;    // tiles in the grid
  uint64_t tiles_run = 0;      // tiles whose network ran
  uint64_t tiles_skipped = 0;  // tiles whose core holds no mask voxel
  uint32_t concurrency = 0;    // the cap on tiles in flight
  uint32_t max_in_flight = 0;  // the most that were in flight at once
  uint64_t patch_edge = 0;
  uint64_t bytes_per_tile = 0;  // activation estimate of one patch
  double wall_seconds = 0.0;
  std::vector<double> tile_seconds;  // per tile run, in job order
};

// Field -> chi, tile by tile (the step engine's StepRun driven by threads): gathers each patch with its halo, runs the
// network, writes the core back at mask voxels; chi is zero outside the mask.
// field, mask and chi hold geometry.voxel_count() values; field is finite; cfg.core >= 1.
// Wasm target: a patch over the 2.5 GB limit is refused up front with advice (Error BudgetExceeded).
RunReport tiled_field_inversion(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                                const FieldNetwork& network, TileConfig cfg, PatchRunner& runner,
                                const RunOptions& options, std::span<float> chi);

// Padded network dims of a whole-volume run and the low-side padding, by the network's rule.
struct WholeVolumeShape {
  std::array<uint64_t, 3> dims{0, 0, 0};
  Dims3 pad_low{0, 0, 0};
  uint64_t bytes = 0;  // activation estimate
};
WholeVolumeShape whole_volume_shape(const Geometry& geometry, const FieldNetwork& network);

// Field -> chi on the whole volume at once: pads to the divisor, runs, crops, masks.
// Same preconditions as tiled_field_inversion. Wasm target: refused (BudgetExceeded) when the padded
// volume's activations exceed the 2.5 GB single-patch limit, with advice to tile.
RunReport whole_volume_inversion(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                                 const FieldNetwork& network, PatchRunner& runner, const RunOptions& options,
                                 std::span<float> chi);

}  // namespace tessera
