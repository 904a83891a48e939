// A local field (the output of background field removal) and the exact spherical erosion the methods share.
// Volumes are x-fastest.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tessera/common/geometry.h"

namespace tessera {

// A local field and the mask it is defined on (zero outside it).
struct LocalField {
  std::vector<float> field;   // the total field's unit
  std::vector<uint8_t> mask;  // 0 or 1
};

// The mask eroded by a sphere of radius_mm: voxels whose every neighbour within radius_mm (in mm, |d|² <= r²) is
// inside the mask; voxels beyond the volume's faces count as outside. Exact (a Euclidean distance transform).
// geometry valid; mask.size() == voxel_count (else Error InvalidArgument).
std::vector<uint8_t> erode_mask(const Geometry& geometry, std::span<const uint8_t> mask, double radius_mm,
                                unsigned threads = 1);

}  // namespace tessera
