// Blending the outputs of overlapping tiles: each tile's core window is weighted by a per-axis profile, the weights
// are normalised per voxel, and the weighted outputs are summed in 64-bit fixed point, so the result is the same bit
// for bit whatever order the tiles finish in and however many run at once.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "tessera/common/budget.h"
#include "tessera/common/geometry.h"
#include "tessera/registry/registry.h"
#include "tessera/engine/tiling.h"

namespace tessera {

// Fixed-point scale of the blend accumulator: a weighted output w·v is stored as round(w·v·2^32).
inline constexpr double kBlendFixedPointScale = 4294967296.0;
// Largest |output| (after the output normalisation) the accumulator takes; beyond it a tile fails.
inline constexpr double kBlendMaxMagnitude = 1e6;

// The weight of each position of a window along one axis: crop 1; linear a triangle; cosine a Hann window
// sin²(π(i+½)/n); gaussian exp(-(i+½-n/2)²/2σ²) with σ = n/8 (nnU-Net's). All > 0.
// window >= 1.
std::vector<double> blend_profile(Blend blend, uint32_t window);

// Per-axis sums of the profiles of every window covering each position: Σ_k profile(x - k·step) over the windows
// k = 0..counts-1 with k·step <= x < min(k·step + core, dim). A voxel's total weight is the product of its three
// axis sums (every window covering a mask voxel runs, so the product holds at mask voxels).
// grid was made by make_tile_grid for geometry.
std::array<std::vector<double>, 3> blend_weight_sums(const Geometry& geometry, const TileGrid& grid);

// Writes tile outputs into χ: straight into the core when tiles do not overlap, else weighted into a fixed-point
// accumulator that becomes χ (mask voxels; 0 elsewhere) when the last active tile is in. Safe to call from several
// threads at once.
class TileWriter {
 public:
  // Zeroes chi and, for overlapping tiles, allocates the accumulator (extra_bytes()).
  // geometry is valid; mask and chi hold its voxel count of values and outlive the writer; grid was made for it.
  TileWriter(const Geometry& geometry, std::span<const uint8_t> mask, const TileGrid& grid, const Normalization& norm,
             std::span<float> chi);

  // Writes one active tile's output (channel 0 of a network-layout patch of dims starting at tile.patch_lo).
  // Throws Error(RunnerFailed) naming the tile when an output inside its core's mask voxels is not finite or
  // beyond kBlendMaxMagnitude (blended runs only); nothing is written then.
  // Each active tile is written once; patch holds dims[0]·dims[1]·dims[2] values.
  void write(const Tile& tile, const std::array<uint64_t, 3>& dims, std::span<const float> patch);

  // Every active tile was written: χ is final.
  bool complete() const;

  // Bytes a writer holds besides χ for this grid: 8 per voxel when tiles overlap, else 0.
  static uint64_t extra_bytes(const Geometry& geometry, const TileConfig& config);

 private:
  void finalise();

  Geometry geometry_;
  std::span<const uint8_t> mask_;
  const TileGrid& grid_;
  Normalization norm_;
  std::span<float> chi_;
  bool blended_ = false;
  std::vector<double> profile_;                 // over one core window
  std::array<std::vector<double>, 3> sums_;     // per-axis weight sums
  std::vector<int64_t> acc_;                    // fixed-point Σ w̃·χ per voxel (blended runs)
  mutable std::mutex mutex_;
  uint64_t written_ = 0;
};

}  // namespace tessera
