// Tiles and patches: where each core lies, and moving voxels between a volume (x-fastest) and a
// network patch ([1, C, X, Y, Z] row-major, z fastest). The caller owns every buffer.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/budget.h"
#include "tessera/common/geometry.h"
#include "tessera/registry/registry.h"

namespace tessera {

// One tile: its output core [core_lo, core_hi) (the window it writes; windows overlap when the stride is shorter
// than the core) and the box of its patch [patch_lo, patch_lo + patch_dims).
struct Tile {
  uint64_t index = 0;  // position in grid order (x fastest, then y, then z)
  Dims3 core_lo{0, 0, 0};
  Dims3 core_hi{0, 0, 0};
  Dims3 patch_lo{0, 0, 0};  // core_lo - halo; may be negative (zeros outside the volume)
  std::array<uint64_t, 3> patch_dims{0, 0, 0};  // this tile's patch (shrink_patch); 0: the plan's common patch_dims
  bool skipped = false;     // the core holds no mask voxel
};

// The dims tile's patch runs at: its own when set, else the run's common ones.
inline std::array<uint64_t, 3> tile_patch_dims(const Tile& tile, const std::array<uint64_t, 3>& common) {
  return tile.patch_dims[0] ? tile.patch_dims : common;
}

// The mask voxels a tile's core serves: their bounding box [lo, hi); empty when lo[0] >= hi[0].
struct ServedBox {
  Dims3 lo{0, 0, 0}, hi{0, 0, 0};
  bool empty() const { return lo[0] >= hi[0]; }
};

// Whether [lo, hi) holds a mask voxel (stops at the first).
// mask holds geometry.voxel_count() values; the box lies inside the volume.
bool holds_mask(const Geometry& geometry, std::span<const uint8_t> mask, const Dims3& lo, const Dims3& hi);

// Cuts a tile's patch [patch_lo, patch_lo + dims) to what its served voxels need: on each axis the served extent grown
// by reach (the halo) on both sides, clipped to the patch, its start moved down and its end up to the patch's own
// pooling grid {patch_lo + k·divisor}. Every served voxel keeps at least reach voxels of context on every side (or
// all of the old patch), the result is never larger than the old patch, and it sits on the same pooling grid: a
// network whose output at a voxel depends only on inputs within reach gives the same value there. Sets
// tile.patch_lo and tile.patch_dims; an empty box leaves the tile as it was.
// dims are multiples of divisor; box lies inside the patch.
void shrink_patch(Tile& tile, const std::array<uint64_t, 3>& dims, const ServedBox& box, uint32_t reach, uint32_t divisor);

struct TileGrid {
  TileConfig config;
  uint64_t patch_edge = 0;                // cubic patch edge (core + 2·halo rounded up to the divisor)
  std::array<uint64_t, 3> counts{0, 0, 0};  // tiles per axis
  std::vector<Tile> tiles;                // every tile, skipped ones included
  uint64_t active = 0;                    // tiles to run
  uint64_t skipped = 0;                   // tiles whose core holds no mask voxel
  uint64_t misaligned = 0;                // active tiles whose patch could not be put on the whole volume's pooling grid
};

// The windows of a core along an axis of n voxels: one every step voxels from 0 until one reaches the far edge.
// core >= 1, step >= 1.
int64_t windows_along(int64_t n, int64_t core, int64_t step);

// "tile 3 (core x 0-56, y 56-112, z 0-56)": how messages name a tile.
std::string tile_text(const Tile& tile);

// The least context a shrunk patch keeps past the mask voxels its core serves (patch_reach).
inline constexpr uint32_t kShrinkReach = 4;

// The context a shrunk patch keeps past the mask voxels its core serves: the halo, and at least kShrinkReach voxels
// (as a crop box keeps its margin), since a face at the head's surface with no zeros past it moves the network's border
// response onto the served voxels (bench/shrink.js: the demo U-Net at halo 0 went from NRMSE 0.045 to 0.119 without it).
uint32_t patch_reach(const TileConfig& cfg);

// Cuts the volume into tiles whose cores start every cfg.step() voxels from 0 (clamped at the far edges), and
// marks those whose core holds no mask voxel. Each active tile's patch is then shrunk to the mask voxels its core
// serves (shrink_patch with reach patch_reach(cfg)): a tile whose core is full of mask keeps the whole patch. Each patch (cfg.core + 2·halo rounded up to the divisor) is placed on
// the pooling grid of the whole-volume run when the rounding leaves room: its first voxel p with
// (p + pad_low) % divisor == 0, where pad_low is the whole-volume run's low-side padding (whole_volume_shape), as
// close to core_lo − halo as that allows (never further than the rounding slack). A network whose poolings see the
// same grid in a patch as in the whole volume gives the whole volume's output wherever its context is complete; on
// another grid its max-poolings alias and every voxel differs. Otherwise the patch starts at core_lo − halo.
// geometry is valid; mask holds geometry.voxel_count() values; cfg.core >= 1.
TileGrid make_tile_grid(const Geometry& geometry, std::span<const uint8_t> mask, TileConfig cfg, uint32_t divisor,
                        const Dims3& pad_low = {0, 0, 0});

// Whether every patch of make_tile_grid(geometry, ·, cfg, divisor, pad_low) sits on the whole volume's pooling grid
// (grid.misaligned == 0 whatever the mask), without building the grid.
// geometry is valid; cfg is valid.
bool on_pooling_grid(const Geometry& geometry, TileConfig cfg, uint32_t divisor, const Dims3& pad_low);

// The windows of a grid of cores (core, step) that hold a mask voxel: each one's place and the box of the mask
// voxels it serves, in grid order. They depend on the core and the step only, not on the halo.
struct ServedWindows {
  uint32_t core = 0, step = 0;
  std::vector<std::array<uint32_t, 3>> at;  // window (i, j, k) of each: its core starts at step · (i, j, k)
  std::vector<ServedBox> boxes;             // the served box of each
};

// The mask as runs of voxels along x, row by row: counts the tiles of any config whose core holds a mask voxel
// without building their grid (the auto-planner counts hundreds of configs).
class MaskRuns {
 public:
  // geometry is valid; mask holds geometry.voxel_count() values.
  MaskRuns(const Geometry& geometry, std::span<const uint8_t> mask);

  // make_tile_grid(geometry, mask, cfg, ·).active, in O(rows · (core / step)² + windows).
  // cfg is valid (validate_tile_config).
  uint64_t active_tiles(const TileConfig& cfg) const;

  // The patch voxels of each active tile of make_tile_grid(geometry, mask, cfg, divisor, pad_low), shrunk as it
  // shrinks them, in grid order: what a run of that grid computes, without building it.
  // cfg is valid (validate_tile_config).
  std::vector<uint64_t> patch_voxels(const TileConfig& cfg, uint32_t divisor, const Dims3& pad_low) const;

  // The same from the served windows of the config's core and step (served_windows), which every halo shares.
  // windows come from served_windows(cfg.core, cfg.step()) of this mask; cfg is valid.
  std::vector<uint64_t> patch_voxels(const TileConfig& cfg, uint32_t divisor, const Dims3& pad_low,
                                     const ServedWindows& windows) const;

  // The windows of the grid of cores (core, step) whose core holds a mask voxel, with their served boxes.
  // core >= 1, step >= 1.
  ServedWindows served_windows(uint32_t core, uint32_t step) const;

 private:
  Dims3 dims_{0, 0, 0};
  std::vector<uint32_t> row_start_;             // row y + ny·z holds runs_[row_start_[row] .. row_start_[row + 1])
  std::vector<std::array<int32_t, 2>> runs_;    // [first x, last x + 1) of each run of mask voxels
};

// The tiles of a grid that run (core holds a mask voxel), in grid order; the pointers point into grid.tiles.
std::vector<const Tile*> active_tiles(const TileGrid& grid);

// The patch voxels of each active tile in grid order (tile_patch_dims of common).
std::vector<uint64_t> active_patch_voxels(const TileGrid& grid, const std::array<uint64_t, 3>& common);

// The grid of a whole-volume run: one tile whose core is the whole volume and whose patch starts at patch_lo.
// geometry is valid; patch_edge is the largest padded dim.
TileGrid whole_volume_grid(const Geometry& geometry, const Dims3& patch_lo, uint64_t patch_edge);

// Copies field[origin .. origin+dims) into out in network layout through the input normalisation;
// voxels outside the volume (and, when mask is given, outside the mask) are 0 in the network's domain.
// out.size() == dims[0]*dims[1]*dims[2]; field (and a non-empty mask) hold geometry.voxel_count() values.
void gather_patch(const Geometry& geometry, std::span<const float> field, const Dims3& origin,
                  const std::array<uint64_t, 3>& dims, const Normalization& norm, std::span<float> out,
                  std::span<const uint8_t> mask = {});

// Writes the part of a network-layout output that covers [core_lo, core_hi) into chi through the
// output normalisation, at mask voxels only (other voxels of the core are set to 0).
// patch holds dims[0]*dims[1]*dims[2] values (channel 0); the core lies inside origin .. origin+dims.
void scatter_core(const Geometry& geometry, std::span<const uint8_t> mask, const Dims3& core_lo,
                  const Dims3& core_hi, const Dims3& origin, const std::array<uint64_t, 3>& dims,
                  const Normalization& norm, std::span<const float> patch, std::span<float> chi);

// Copies a cubic region in host layout (x-fastest): field values and mask, zeros outside the volume.
// field_out and mask_out hold edge³ values.
void gather_host_patch(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                       const Dims3& origin, uint64_t edge, std::span<float> field_out, std::span<uint8_t> mask_out);

// Writes the core of a host-layout cubic patch result into out at mask voxels (0 elsewhere in the core).
// patch holds edge³ values.
void scatter_host_core(const Geometry& geometry, std::span<const uint8_t> mask, const Tile& tile, uint64_t edge,
                       std::span<const float> patch, std::span<float> out);

}  // namespace tessera
