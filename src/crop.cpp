#include "tessera/crop.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tessera/error.h"

namespace tessera {

namespace {

// Floor and ceiling of v on the grid {g0 + k·d}.
int64_t grid_floor(int64_t v, int64_t g0, int64_t d) {
  const int64_t k = v - g0;
  return g0 + (k >= 0 ? k / d : -((-k + d - 1) / d)) * d;
}
int64_t grid_ceil(int64_t v, int64_t g0, int64_t d) { return grid_floor(v + d - 1, g0, d); }

// Is the network's input at this voxel non-zero? The same arithmetic as gather_patch (tessera/tiling.h).
bool input_nonzero(const FieldNetwork& n, float f) {
  return (f - static_cast<float>(n.norm.input_mean)) / static_cast<float>(n.norm.input_std) != 0.0f;
}

}  // namespace

CropBox crop_to_support(const Geometry& g, std::span<const uint8_t> mask, const FieldNetwork& n, uint32_t margin,
                        std::span<const float> field) {
  validate_geometry(g);
  validate_volume_sizes(g, field.empty() ? g.voxel_count() : field.size(), mask.size());
  const bool unmasked_field = !field.empty() && !n.masked_input;
  Dims3 lo{g.dims[0], g.dims[1], g.dims[2]}, hi{-1, -1, -1};
  for (int64_t z = 0; z < g.dims[2]; ++z) {
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      const uint64_t row = g.index(0, y, z);
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        if (!mask[row + x] && !(unmasked_field && input_nonzero(n, field[row + x]))) continue;
        lo[0] = std::min(lo[0], x), hi[0] = std::max(hi[0], x);
        lo[1] = std::min(lo[1], y), hi[1] = std::max(hi[1], y);
        lo[2] = std::min(lo[2], z), hi[2] = std::max(hi[2], z);
      }
    }
  }
  if (hi[0] < 0) throw Error(ErrorCode::InvalidArgument, "the mask is empty: nothing to crop to");
  const WholeVolumeShape s = whole_volume_shape(g, n);
  const int64_t d = std::max<int64_t>(1, n.cost.divisor);
  CropBox c;
  c.margin = margin;
  for (int a = 0; a < 3; ++a) {
    const int64_t g0 = -s.pad_low[a];                                    // the whole run's first patch voxel
    const int64_t g1 = g0 + static_cast<int64_t>(s.dims[a]);             // and its end
    const int64_t p0 = std::max(g0, grid_floor(lo[a] - static_cast<int64_t>(margin), g0, d));
    const int64_t p1 = std::min(g1, grid_ceil(hi[a] + 1 + static_cast<int64_t>(margin), g0, d));
    c.patch_lo[a] = p0;
    c.patch_dims[a] = static_cast<uint64_t>(p1 - p0);
    c.lo[a] = std::max<int64_t>(0, p0);
    c.hi[a] = std::min<int64_t>(g.dims[a], p1);
    if (c.patch_dims[a] != s.dims[a]) c.cropped = true;
  }
  return c;
}

void validate_crop(const Geometry& g, std::span<const uint8_t> mask, const FieldNetwork& n, const CropBox& c) {
  if (!c.cropped) return;
  const WholeVolumeShape s = whole_volume_shape(g, n);
  const int64_t d = std::max<int64_t>(1, n.cost.divisor);
  for (int a = 0; a < 3; ++a) {
    const int64_t g0 = -s.pad_low[a], p1 = c.patch_lo[a] + static_cast<int64_t>(c.patch_dims[a]);
    const bool ok = c.patch_lo[a] >= g0 && (c.patch_lo[a] - g0) % d == 0 && c.patch_dims[a] % d == 0 &&
                    c.patch_dims[a] > 0 && p1 <= g0 + static_cast<int64_t>(s.dims[a]) &&
                    c.lo[a] == std::max<int64_t>(0, c.patch_lo[a]) && c.hi[a] == std::min<int64_t>(g.dims[a], p1) &&
                    c.lo[a] < c.hi[a];
    if (!ok) {
      throw Error(ErrorCode::InvalidArgument, "the plan's crop box (" + crop_text(g, c) +
                                                  ") is not on this volume's pooling grid: it was made for another "
                                                  "volume or network; plan again");
    }
  }
  for (int64_t z = 0; z < g.dims[2]; ++z) {
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      const uint8_t* row = mask.data() + g.index(0, y, z);
      const bool inside_yz = y >= c.lo[1] && y < c.hi[1] && z >= c.lo[2] && z < c.hi[2];
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        if (row[x] && !(inside_yz && x >= c.lo[0] && x < c.hi[0])) {
          throw Error(ErrorCode::InvalidArgument, "the mask has voxels outside the plan's crop box (" + crop_text(g, c) +
                                                      "), e.g. (" + std::to_string(x) + ", " + std::to_string(y) + ", " +
                                                      std::to_string(z) + "): the plan was made for another mask; plan again");
        }
      }
    }
  }
}

uint64_t input_voxels_outside(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                              const FieldNetwork& n, const CropBox& c) {
  validate_volume_sizes(g, field.size(), mask.size());
  if (!c.cropped || n.masked_input) return 0;  // masked: zero outside the mask, and the box holds the mask
  uint64_t count = 0;
  for (int64_t z = 0; z < g.dims[2]; ++z) {
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      const uint64_t row = g.index(0, y, z);
      const bool inside_yz = y >= c.lo[1] && y < c.hi[1] && z >= c.lo[2] && z < c.hi[2];
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        if (inside_yz && x >= c.lo[0] && x < c.hi[0]) continue;
        if (input_nonzero(n, field[row + x])) ++count;
      }
    }
  }
  return count;
}

std::string crop_text(const Geometry& g, const CropBox& c) {
  const double share = static_cast<double>(c.patch_voxels()) / static_cast<double>(std::max<uint64_t>(1, g.voxel_count()));
  char buf[160];
  std::snprintf(buf, sizeof buf, "x %lld-%lld, y %lld-%lld, z %lld-%lld; %llu×%llu×%llu padded, %.0f%% of the volume",
                static_cast<long long>(c.lo[0]), static_cast<long long>(c.hi[0]), static_cast<long long>(c.lo[1]),
                static_cast<long long>(c.hi[1]), static_cast<long long>(c.lo[2]), static_cast<long long>(c.hi[2]),
                static_cast<unsigned long long>(c.patch_dims[0]), static_cast<unsigned long long>(c.patch_dims[1]),
                static_cast<unsigned long long>(c.patch_dims[2]), 100.0 * share);
  return buf;
}

}  // namespace tessera
