// The mask's bounding box and the mask's erosion by a sphere: each rule defined once, here, for every layer.
// Definitions in src/common/geometry.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "tessera/common/geometry.h"

namespace tessera {

// A bounding box [lo, hi) of a volume's voxels and the count of voxels it was taken over.
// lo == hi == {0, 0, 0} and voxels == 0 when there were none.
struct MaskBox {
  Dims3 lo{0, 0, 0};
  Dims3 hi{0, 0, 0};
  uint64_t voxels = 0;
  bool empty() const { return voxels == 0; }
  Dims3 ext() const { return {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]}; }
};

// The bounding box of the voxels whose x-fastest index i has inside(i) true.
template <typename Inside>
MaskBox box_where(const Geometry& g, Inside&& inside) {
  MaskBox b;
  Dims3 lo = g.dims, hi{0, 0, 0};
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      const uint64_t row = g.index(0, y, z);
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        if (!inside(row + static_cast<uint64_t>(x))) continue;
        ++b.voxels;
        const int64_t p[3] = {x, y, z};
        for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], p[a]), hi[a] = std::max(hi[a], p[a] + 1);
      }
    }
  if (b.voxels) b.lo = lo, b.hi = hi;
  return b;
}

// The bounding box of the mask's non-zero voxels.
// mask.size() == g.voxel_count() (unchecked).
MaskBox mask_box(const Geometry& g, std::span<const uint8_t> mask);

// One line of the exact squared Euclidean distance transform, in place (Felzenszwalb & Huttenlocher 2012, Theory of
// Computing): d[i] = min(cap, min_j (h (i − j))² + d[j]), h the voxel spacing in mm.
// n >= 1; every d[i] finite; v, zb, out hold at least n, n + 1 and n values (scratch).
void distance_transform_line(double* d, int64_t n, double h, std::vector<int64_t>& v, std::vector<double>& zb,
                             std::vector<double>& out, double cap = std::numeric_limits<double>::infinity());

// Squared distance (mm²) from every voxel of the box grown by one voxel on each side to the nearest voxel outside the
// mask (beyond the volume's faces counts as outside), by distance_transform_line along each axis. Layout: (ext + 2)
// per axis, x-fastest. Bit-identical for any thread count.
// box is mask_box(g, mask) and not empty; mask.size() == g.voxel_count().
std::vector<double> outside_distance2(const Geometry& g, std::span<const uint8_t> mask, const MaskBox& box,
                                      unsigned threads);

// Heap bytes of outside_distance2 on a box of dims at most: the distances and each thread's line scratch.
uint64_t erosion_workspace_bytes(const Dims3& dims, unsigned threads);

// The mask eroded by a sphere of radius_mm: voxels whose every neighbour within radius_mm (in mm, |d|² <= r²) is
// inside the mask; voxels beyond the volume's faces count as outside. Exact (outside_distance2).
// geometry valid; mask.size() == voxel_count; radius_mm finite and >= 0 (else Error InvalidArgument).
std::vector<uint8_t> erode_mask_mm(const Geometry& geometry, std::span<const uint8_t> mask, double radius_mm,
                                   unsigned threads = 1);

// The mask eroded by a sphere of radius_voxels in voxel units: voxels whose every neighbour at offset d (in voxels,
// whatever the voxel size) with |d|² <= r² is inside the mask; beyond the volume's faces counts as outside.
// erode_mask_mm on unit voxels. geometry valid; mask.size() == voxel_count; radius_voxels <= 255 (else Error
// InvalidArgument).
std::vector<uint8_t> erode_mask_voxels(const Geometry& geometry, std::span<const uint8_t> mask, uint32_t radius_voxels,
                                       unsigned threads = 1);

}  // namespace tessera
