// The self-check of a tiled run: the largest box that fits the single-patch limit as a whole-volume run, centred on
// the mask, is run whole and compared with the tiled χ inside it. The box run lacks context beyond its own faces
// wherever they lie inside the volume, so the comparison keeps away from those faces by the network's reach (the
// radius holding 99 % of its dependence); faces on the volume's boundary need no margin (the whole-volume run ends
// there too). When the whole volume fits, the box is the volume and the check is exact.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/budget.h"
#include "tessera/engine/driver.h"
#include "tessera/quality/fidelity.h"
#include "tessera/common/geometry.h"
#include "tessera/engine/plan.h"

namespace tessera {

// The fewest mask voxels a self-check compares: fewer (a cube of 21 voxels in the middle of the head) measure one spot,
// not the run (on the 128×144×112 phantom a 6³ part reported NRMSE 0.154 for a run at 0.047). A mask of fewer than
// ten times this needs a tenth of its voxels.
inline constexpr uint64_t kVerifyMinVoxels = 10000;

// The mask voxels a self-check of a mask of mask_voxels must compare.
uint64_t verify_min_voxels(uint64_t mask_voxels);

struct VerifyRegion {
  bool possible = false;
  std::string message;                       // why the check cannot be made (possible == false)
  Dims3 lo{0, 0, 0}, hi{0, 0, 0};            // the box run whole, inside the volume
  Dims3 compare_lo{0, 0, 0}, compare_hi{0, 0, 0};  // the part compared, inside the box
  uint32_t margin = 0;                       // voxels kept from the box's faces that lie inside the volume
  TilePlan plan;                             // the whole-volume plan of the box
  uint64_t module_heap_bytes = 0;            // what the check adds to the module heap (the box's volumes, the comparison)
};

// Plans the self-check of a run of this network on this volume.
// geometry is valid; mask holds its voxel count of values; network.context gives the margin (empty: 64 voxels).
VerifyRegion plan_verification(const Geometry& geometry, std::span<const uint8_t> mask, const FieldNetwork& network,
                               Target target = kBuildTarget);

// The box [lo, hi) of a volume as its own volume (geometry with the box's dims; the same voxel size and B0).
Geometry box_geometry(const Geometry& geometry, const Dims3& lo, const Dims3& hi);

// The values of the box [lo, hi) of an x-fastest volume.
// data holds geometry.voxel_count() values; the box lies inside the volume.
std::vector<float> crop_box(const Geometry& geometry, std::span<const float> data, const Dims3& lo, const Dims3& hi);
std::vector<uint8_t> crop_box(const Geometry& geometry, std::span<const uint8_t> data, const Dims3& lo, const Dims3& hi);

// The tiled χ against the box's whole-volume χ over the region's comparison part, at mask voxels.
// tiled and mask hold geometry.voxel_count() values, box_chi the box's; region.possible.
// Throws Error(InvalidArgument) when the comparison part holds no mask voxel.
Agreement compare_verification(const Geometry& geometry, std::span<const float> tiled, std::span<const uint8_t> mask,
                               std::span<const float> box_chi, const VerifyRegion& region);

}  // namespace tessera
