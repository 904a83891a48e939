// The field of view a run can leave out: a field -> chi network's input is zero outside the mask's bounding box (a
// network that reads its field masked, or a field that is zero there), so the empty voxels around the head need not
// run. A crop is one patch on the whole-volume run's pooling grid; only the network's bias response to the left-out
// zeros differs from the whole-volume run (NRMSE 0.007-0.027 measured on three phantoms).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "tessera/engine/driver.h"
#include "tessera/common/geometry.h"
#include "tessera/engine/tiling.h"

namespace tessera {

// A box over the single-patch limit runs as slabs: cut along one axis into `pieces` cores, each patch the box's extent
// on the other axes (whose faces keep the crop margin) and at least `halo` voxels of context past its core on a cut
// face, on the pooling grid. Only the cut faces lack context, so a box costs far fewer patch voxels than a cubic
// tiling of the volume at the same halo (2 slabs ran 1.4× native where cubic tiles ran 0.19×).
struct BoxSplit {
  uint32_t axis = 0;    // 0 x, 1 y, 2 z
  uint32_t pieces = 1;  // 1: the box runs as one patch
  uint32_t halo = 0;    // context past a core on its cut faces (voxels, before the grid rounding)
};

struct CropBox {
  bool cropped = false;                       // smaller than the whole volume's padded shape
  Dims3 lo{0, 0, 0}, hi{0, 0, 0};             // the voxels the run writes, [lo, hi), inside the volume
  Dims3 patch_lo{0, 0, 0};                    // the patch's first voxel, on the whole-volume run's pooling grid (may be < 0)
  std::array<uint64_t, 3> patch_dims{0, 0, 0};  // multiples of the divisor
  uint32_t margin = 0;                        // voxels kept around the support on every side (before the grid rounding)
  BoxSplit split;                             // pieces > 1: the box runs as slabs (box_split_grid)

  uint64_t patch_voxels() const { return patch_dims[0] * patch_dims[1] * patch_dims[2]; }
};

// Voxels kept around the mask's bounding box before rounding out to the pooling grid (NRMSE measured against
// the whole-volume run inside the mask): at 2 the demo U-Net's box differs by NRMSE 0.016 / 0.027 / 0.019 on the three
// phantoms and the xQSM-shaped stand-in's by 0.012 / 0.009 / 0.006 (at 4: 0.014 and 0.007 where the grid gives a larger
// box, the same elsewhere), within the faithful target (0.10) with room; at 0 the demo's was 0.075 and 0.110.
inline constexpr uint32_t kCropMargin = 2;
// The least margin measured faithful, which a plan falls back to when the box at a larger asked margin is over the
// single-patch limit; under it the plan warns that its prediction leaves the box's own error out.
inline constexpr uint32_t kMinCropMargin = 2;

// The smallest box on the whole-volume run's pooling grid that holds every voxel where the network's input is not
// zero (the mask's voxels; for a network that reads its field unmasked, also every voxel where field is given and its
// normalised value is not 0) with margin voxels to spare on every side; cropped is false when that is the whole
// padded volume.
// geometry is valid; mask holds its voxel count of values, at least one set; field is empty or holds as many values.
CropBox crop_to_support(const Geometry& geometry, std::span<const uint8_t> mask, const FieldNetwork& network,
                        uint32_t margin = kCropMargin, std::span<const float> field = {});

// The whole padded volume as a box to cut into slabs (cropped set: the run gathers it as a crop box, which is the
// whole-volume run's patch).
// geometry is valid.
CropBox whole_volume_box(const Geometry& geometry, const FieldNetwork& network);

// Checks a crop box handed back by a caller (from a plan): on the pooling grid, inside the padded volume, holding
// every mask voxel. Throws Error(InvalidArgument) saying to plan again.
// geometry is valid; mask holds its voxel count of values.
void validate_crop(const Geometry& geometry, std::span<const uint8_t> mask, const FieldNetwork& network, const CropBox& crop);

// Voxels outside crop's [lo, hi) where the network's input is not zero (a network that reads its field unmasked).
// field and mask hold geometry's voxel count of values.
uint64_t input_voxels_outside(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                              const FieldNetwork& network, const CropBox& crop);

// The tiles of crop.split: one per piece (core: the box's voxels between two cuts; patch on the pooling grid, as far as
// the box's patch on the other axes), every patch box_split_patch_dims; a tile whose core holds no mask voxel skipped.
// geometry is valid; mask holds its voxel count of values; crop is on the grid of divisor (validate_crop);
// 2 <= crop.split.pieces <= the box's core extent on crop.split.axis < 3.
TileGrid box_split_grid(const Geometry& geometry, std::span<const uint8_t> mask, const CropBox& crop, uint32_t divisor);

// The patch dims every slab of crop.split runs at (the box's, the cut axis shortened).
// The preconditions of box_split_grid.
std::array<uint64_t, 3> box_split_patch_dims(const CropBox& crop, uint32_t divisor);

// "2 slabs along y, halo 20": how plans name a split.
std::string split_text(const BoxSplit& split);

// "x 24-136, y 8-160, z 16-128 (128×152×112 padded, 48% of the volume)": how plans and errors name a crop.
std::string crop_text(const Geometry& geometry, const CropBox& crop);

}  // namespace tessera
