// The plan of a run before it starts: patch, memory per tile, tiles in flight, tile counts and the
// estimated peak memory against the browser limits, or the refusal with advice. JavaScript shows
// these figures; it never re-derives them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tessera/common/b0_align.h"
#include "tessera/engine/crop.h"
#include "tessera/engine/driver.h"

namespace tessera {

struct VerifyRegion;  // tessera/verify.h

// A run resampled to the voxel grid its network was trained on (tessera/networks/training_grid.h): the grid, and the
// module bytes the resampling adds on top of the run on it.
struct TrainingGridPlan {
  bool resampled = false;
  Dims3 dims{0, 0, 0};                 // the training grid's dims (resampled only)
  Vec3 voxel_mm{0.0, 0.0, 0.0};        // its voxel edges (mm): the field of view kept, so near the training voxel
  uint64_t extra_module_bytes = 0;
  std::string warning;                 // names the source and the resampled grid (resampled only)
};

struct TilePlan {
  bool feasible = false;
  TileConfig tile;                  // the tile config planned (chosen, for an automatic plan)
  uint32_t workers = 1;             // workers asked for (chosen, for an automatic plan)
  uint32_t threads_per_worker = 0;  // chosen by the auto-planner; 0 = the caller's setting
  double estimated_seconds = 0.0;   // the auto-planner's estimate; 0 when not estimated
  std::string estimate_source;      // whose speed the estimate used: "measured", "registry", "default"; "" when none
  std::string explanation;          // the auto-planner's one-sentence reason
  std::string fidelity_warning;     // the prediction is not to be trusted: no config within the budget meets the quality
                                    // target, the network reaches beyond the fidelity model's fit, or the crop margin is
                                    // under the least measured faithful
  std::string message;              // the refusal with advice, empty when feasible
  bool whole_volume = false;
  CropBox crop;                     // a whole-volume plan cut to the input's support (crop.cropped); else the whole volume
  uint64_t patch_edge = 0;          // cubic patch edge (tiled), or the largest padded dim (whole)
  std::array<uint64_t, 3> patch_dims{0, 0, 0};
  uint64_t bytes_per_tile = 0;      // activations of one patch
  uint32_t tiles_in_flight = 0;     // the cap, from tile_concurrency
  uint64_t tiles_total = 0;
  uint64_t tiles_active = 0;        // to run
  uint64_t tiles_skipped = 0;       // core holds no mask voxel
  uint64_t activation_bytes = 0;    // bytes_per_tile · tiles_in_flight: all tiles in flight
  uint64_t module_heap_bytes = 0;   // the C++ module: field, mask, chi and the patches in flight
  uint64_t peak_bytes = 0;          // activation_bytes + module_heap_bytes
  TileGrid grid;                    // the tiles the run goes through (whole volume: one tile); empty when refused
  ContextProfile context;           // how far the network looks, as the prediction took it (empty: unknown)
  bool fidelity_known = false;      // the network's context profile is known, so fidelity is predicted
  FidelityPrediction fidelity;      // predicted agreement with the whole-volume run (exact for a whole-volume plan)
  std::shared_ptr<const VerifyRegion> verify;  // the self-check's plan, when the request asks for one
  TrainingGridPlan training_grid;   // resampled to the network's training grid (then grid, tiles and memory above are
                                    // the training grid's, the resampling's bytes added)
  B0Plan b0;                        // B0's tilt and whether the run resamples to a B0-aligned grid (then grid, tiles and
                                    // memory above are the aligned grid's, the source volume's bytes added)
};

// The patch voxels a plan's run computes: every active tile's patch (tile_patch_dims of the plan's patch_dims).
uint64_t voxels_run(const TilePlan& plan);

// Plans a tiled run. Never throws for an infeasible config: feasible=false and message say why.
// geometry is valid and mask holds geometry.voxel_count() values (else Error InvalidArgument).
// fidelity, when given, predicts the plan's fidelity (else one is made from network.context when it is known).
TilePlan plan_tiled(const Geometry& geometry, std::span<const uint8_t> mask, const FieldNetwork& network,
                    TileConfig cfg, uint32_t workers, Target target = kBuildTarget,
                    const FidelityModel* fidelity = nullptr);

// Plans a whole-volume run (padded to the divisor by the network's rule), or, given a crop box, the run of that box as
// one patch (the rest of the volume's χ is 0).
// geometry is valid; crop, when given, is crop_to_support's box for this geometry and network.
TilePlan plan_whole(const Geometry& geometry, const FieldNetwork& network, Target target = kBuildTarget,
                    const CropBox* crop = nullptr);

// Plans the run of a crop box as slabs (crop.split.pieces >= 2, box_split_grid): every slab one patch of
// box_split_patch_dims, its core written only. Never throws for a split over the limits: feasible=false and message.
// geometry is valid; mask holds its voxel count of values; crop is crop_to_support's box for them and network with a
// split set; fidelity, when given, is the model of this geometry and mask.
TilePlan plan_box_split(const Geometry& geometry, std::span<const uint8_t> mask, const FieldNetwork& network,
                        const CropBox& crop, uint32_t workers, Target target = kBuildTarget,
                        const FidelityModel* fidelity = nullptr);

}  // namespace tessera
