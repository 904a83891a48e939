#include "tessera/engine/plan.h"

#include <algorithm>

#include "tessera/engine/blend.h"
#include "tessera/common/error.h"

namespace tessera {

namespace {
// The module's baseline plus field (f32), the volume's mask and the plan's (u8) and chi (f32) of the whole volume.
uint64_t volume_bytes(const Geometry& g) {
  return saturating_add(WASM_MODULE_BASELINE_BYTES, saturating_mul(g.voxel_count(), 4 + 1 + 1 + 4));
}
// The end of a feasible tiled plan: the module heap (need plus the heap's growth slack), the peak, and the fidelity
// predicted by `predict` on the given model, else on one made from the network's context when it is known.
template <class Predict>
void finish_plan(TilePlan& p, const Geometry& g, std::span<const uint8_t> mask, const FieldNetwork& network,
                 uint64_t need, const FidelityModel* fidelity, Predict predict) {
  p.module_heap_bytes = wasm_module_heap_bytes(need);
  p.peak_bytes = saturating_add(p.activation_bytes, p.module_heap_bytes);
  p.feasible = true;
  if (fidelity) {
    p.fidelity = predict(*fidelity);
    p.context = fidelity->profile();
    p.fidelity_known = true;
  } else if (!network.context.within.empty()) {
    p.fidelity = predict(FidelityModel(g, mask, network.context));
    p.context = network.context;
    p.fidelity_known = true;
  }
}
}  // namespace

uint64_t voxels_run(const TilePlan& p) {
  uint64_t sum = 0;
  for (uint64_t v : active_patch_voxels(p.grid, p.patch_dims)) sum = saturating_add(sum, v);
  return sum;
}

TilePlan plan_tiled(const Geometry& g, std::span<const uint8_t> mask, const FieldNetwork& network, TileConfig cfg,
                    uint32_t workers, Target target, const FidelityModel* fidelity) {
  validate_geometry(g);
  if (mask.size() != g.voxel_count()) validate_volume_sizes(g, g.voxel_count(), mask.size());
  TilePlan p;
  p.tile = cfg;
  p.workers = std::max<uint32_t>(1, workers);
  if (cfg.core == 0) {
    p.message = "tile core must be at least 1 voxel (got 0); try core 56, halo 4";
    return p;
  }
  try {
    validate_tile_config(cfg);
  } catch (const Error& e) {
    p.message = e.what();
    return p;
  }
  p.patch_edge = tile_patch_size(cfg, network.cost.divisor);
  p.patch_dims = {p.patch_edge, p.patch_edge, p.patch_edge};
  p.bytes_per_tile = tile_bytes(cfg, network.cost);
  p.tiles_in_flight = tile_concurrency(cfg, network.cost, workers, target);
  if (target == Target::Wasm) {
    const PatchFit fit = wasm_patch_fit(cfg, network.cost);
    if (!fit.fits) {
      p.message = fit.message;
      return p;
    }
  }
  p.grid = make_tile_grid(g, mask, cfg, network.cost.divisor, whole_volume_shape(g, network).pad_low);
  const TileGrid& grid = p.grid;
  p.tiles_total = grid.tiles.size();
  p.tiles_active = grid.active;
  p.tiles_skipped = grid.skipped;
  const uint32_t in_flight = static_cast<uint32_t>(std::min<uint64_t>(p.tiles_in_flight, std::max<uint64_t>(1, grid.active)));
  p.activation_bytes = saturating_mul(p.bytes_per_tile, in_flight);
  const uint64_t patch_module = saturating_mul(saturating_mul(p.patch_edge, saturating_mul(p.patch_edge, p.patch_edge)),
                                              network.module_bytes_per_patch_voxel);
  // Per tile in flight: what its patch holds in the module (FieldNetwork::module_bytes_per_patch_voxel).
  // Overlapping tiles also hold the blend accumulator (tessera/blend.h).
  const uint64_t need = saturating_add(saturating_add(volume_bytes(g), TileWriter::extra_bytes(g, cfg)),
                                       saturating_mul(patch_module, in_flight));
  finish_plan(p, g, mask, network, need, fidelity, [&](const FidelityModel& m) { return m.predict(cfg, p.patch_edge); });
  return p;
}

TilePlan plan_box_split(const Geometry& g, std::span<const uint8_t> mask, const FieldNetwork& network, const CropBox& crop,
                        uint32_t workers, Target target, const FidelityModel* fidelity) {
  validate_geometry(g);
  if (mask.size() != g.voxel_count()) validate_volume_sizes(g, g.voxel_count(), mask.size());
  TilePlan p;
  p.crop = crop;
  p.workers = std::max<uint32_t>(1, workers);
  if (!crop.cropped || crop.split.pieces < 2) {
    p.message = "a box split needs a crop box cut into 2 or more pieces: plan again";
    return p;
  }
  const uint32_t divisor = std::max<uint32_t>(1, network.cost.divisor);
  try {
    p.grid = box_split_grid(g, mask, crop, divisor);
    p.patch_dims = box_split_patch_dims(crop, divisor);
  } catch (const Error& e) {
    p.message = e.what();
    return p;
  }
  p.tile = p.grid.config;
  p.patch_edge = p.grid.patch_edge;
  const uint64_t voxels = saturating_mul(p.patch_dims[0], saturating_mul(p.patch_dims[1], p.patch_dims[2]));
  p.bytes_per_tile = saturating_add(network.cost.fixed_bytes, saturating_mul(voxels, network.cost.bytes_per_voxel));
  p.tiles_total = p.grid.tiles.size();
  p.tiles_active = p.grid.active;
  p.tiles_skipped = p.grid.skipped;
  if (target == Target::Wasm && p.bytes_per_tile > WASM_MAX_PATCH_ACTIVATION_BYTES) {
    p.message = "the mask's bounding box in " + split_text(crop.split) + ": each patch " + std::to_string(p.patch_dims[0]) + "×" +
                std::to_string(p.patch_dims[1]) + "×" + std::to_string(p.patch_dims[2]) + " needs " + format_gb(p.bytes_per_tile) +
                ", over the " + format_gb(WASM_MAX_PATCH_ACTIVATION_BYTES) + " single-patch limit: cut it into more pieces";
    return p;
  }
  p.tiles_in_flight = patch_concurrency(p.bytes_per_tile, p.workers, target);
  const uint32_t in_flight = static_cast<uint32_t>(std::min<uint64_t>(p.tiles_in_flight, std::max<uint64_t>(1, p.grid.active)));
  p.activation_bytes = saturating_mul(p.bytes_per_tile, in_flight);
  // Per slab in flight: what its patch holds in the module.
  const uint64_t need = saturating_add(volume_bytes(g), saturating_mul(saturating_mul(voxels, network.module_bytes_per_patch_voxel), in_flight));
  finish_plan(p, g, mask, network, need, fidelity, [&](const FidelityModel& m) { return m.predict_grid(p.grid, p.patch_dims); });
  return p;
}

TilePlan plan_whole(const Geometry& g, const FieldNetwork& network, Target target, const CropBox* crop) {
  validate_geometry(g);
  TilePlan p;
  p.whole_volume = true;
  p.fidelity_known = true;  // the whole-volume run is the reference (a crop leaves out only zeros of the input)
  p.fidelity = whole_volume_fidelity();
  p.context = network.context;
  WholeVolumeShape s = whole_volume_shape(g, network);
  const bool cropped = crop && crop->cropped;
  if (cropped) {
    p.crop = *crop;
    s.dims = crop->patch_dims;
    s.bytes = saturating_add(network.cost.fixed_bytes, saturating_mul(crop->patch_voxels(), network.cost.bytes_per_voxel));
  }
  p.patch_dims = s.dims;
  p.patch_edge = std::max({s.dims[0], s.dims[1], s.dims[2]});
  p.bytes_per_tile = s.bytes;
  p.tiles_in_flight = 1;
  p.tiles_total = 1;
  p.tiles_active = 1;
  p.activation_bytes = s.bytes;
  const uint64_t padded = saturating_mul(s.dims[0], saturating_mul(s.dims[1], s.dims[2]));
  const uint64_t need = saturating_add(volume_bytes(g), saturating_mul(padded, network.module_bytes_per_patch_voxel));
  p.module_heap_bytes = wasm_module_heap_bytes(need);
  p.peak_bytes = saturating_add(p.activation_bytes, p.module_heap_bytes);
  p.grid = whole_volume_grid(g, Dims3{-s.pad_low[0], -s.pad_low[1], -s.pad_low[2]}, p.patch_edge);
  if (cropped) {
    Tile& t = p.grid.tiles.front();
    t.core_lo = crop->lo;
    t.core_hi = crop->hi;
    t.patch_lo = crop->patch_lo;
  }
  if (target == Target::Wasm && s.bytes > WASM_MAX_PATCH_ACTIVATION_BYTES) {
    const PatchFit fit = wasm_patch_fit(TileConfig{1, 8}, network.cost);
    p.message = std::string(cropped ? "the mask's bounding box" : "whole volume") + " padded to " + std::to_string(s.dims[0]) + "×" + std::to_string(s.dims[1]) + "×" +
                std::to_string(s.dims[2]) + " needs " + format_gb(s.bytes) + " at " +
                (network.cost.fixed_bytes ? format_gb(network.cost.fixed_bytes) + " per worker + " : std::string()) +
                std::to_string(network.cost.bytes_per_voxel) + " B/voxel, over the " +
                format_gb(WASM_MAX_PATCH_ACTIVATION_BYTES) + " single-patch limit: run it tiled (at halo 8 the " +
                "largest core that fits is " + std::to_string(fit.largest_core) + ")";
    return p;
  }
  p.feasible = true;
  return p;
}

}  // namespace tessera
