#include "tessera/engine/crop.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tessera/common/error.h"
#include "tessera/common/morphology.h"

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

// One slab along the cut axis: its core [c0, c1) and its patch's first voxel p0.
struct Slab {
  int64_t c0 = 0, c1 = 0, p0 = 0;
};

// The slabs of crop.split and their common patch length along the cut axis (a multiple of the divisor).
std::vector<Slab> slabs_of(const CropBox& c, uint32_t divisor, int64_t& length) {
  const BoxSplit& s = c.split;
  if (s.axis > 2) throw Error(ErrorCode::InvalidArgument, "a box split's axis is 0, 1 or 2, got " + std::to_string(s.axis));
  const int a = static_cast<int>(s.axis);
  const int64_t d = std::max<int64_t>(1, divisor);
  const int64_t P0 = c.patch_lo[a], P1 = P0 + static_cast<int64_t>(c.patch_dims[a]);
  const int64_t C0 = c.lo[a], C1 = c.hi[a], n = s.pieces, h = s.halo;
  if (n < 2 || n > C1 - C0) {
    throw Error(ErrorCode::InvalidArgument, "a box split cuts the box into 2 to " + std::to_string(C1 - C0) +
                                                " pieces along its axis, got " + std::to_string(n) + ": plan again");
  }
  std::vector<Slab> out(static_cast<size_t>(n));
  length = 0;
  for (int64_t i = 0; i < n; ++i) {
    Slab& sl = out[static_cast<size_t>(i)];
    sl.c0 = C0 + i * (C1 - C0) / n;
    sl.c1 = C0 + (i + 1) * (C1 - C0) / n;
    // The box's own faces keep its patch (the crop margin); a cut face gets the halo, rounded out to the grid.
    const int64_t lo = i == 0 ? P0 : std::max(P0, grid_floor(sl.c0 - h, P0, d));
    const int64_t hi = i == n - 1 ? P1 : std::min(P1, grid_ceil(sl.c1 + h, P0, d));
    sl.p0 = lo;
    length = std::max(length, hi - lo);
  }
  // One patch shape for every slab: each starts where it did, or earlier where it would pass the box's end.
  for (Slab& sl : out) sl.p0 = std::min(sl.p0, P1 - length);
  return out;
}

}  // namespace

CropBox crop_to_support(const Geometry& g, std::span<const uint8_t> mask, const FieldNetwork& n, uint32_t margin,
                        std::span<const float> field) {
  validate_geometry(g);
  validate_volume_sizes(g, field.empty() ? g.voxel_count() : field.size(), mask.size());
  const bool unmasked_field = !field.empty() && !n.masked_input;
  const MaskBox support =
      box_where(g, [&](uint64_t i) { return mask[i] || (unmasked_field && input_nonzero(n, field[i])); });
  if (support.empty()) throw Error(ErrorCode::InvalidArgument, "the mask is empty: nothing to crop to");
  const WholeVolumeShape s = whole_volume_shape(g, n);
  const int64_t d = std::max<int64_t>(1, n.cost.divisor);
  CropBox c;
  c.margin = margin;
  for (int a = 0; a < 3; ++a) {
    const int64_t g0 = -s.pad_low[a];                                    // the whole run's first patch voxel
    const int64_t g1 = g0 + static_cast<int64_t>(s.dims[a]);             // and its end
    const int64_t p0 = std::max(g0, grid_floor(support.lo[a] - static_cast<int64_t>(margin), g0, d));
    const int64_t p1 = std::min(g1, grid_ceil(support.hi[a] + static_cast<int64_t>(margin), g0, d));
    c.patch_lo[a] = p0;
    c.patch_dims[a] = static_cast<uint64_t>(p1 - p0);
    c.lo[a] = std::max<int64_t>(0, p0);
    c.hi[a] = std::min<int64_t>(g.dims[a], p1);
    if (c.patch_dims[a] != s.dims[a]) c.cropped = true;
  }
  return c;
}

CropBox whole_volume_box(const Geometry& g, const FieldNetwork& n) {
  const WholeVolumeShape s = whole_volume_shape(g, n);
  CropBox c;
  c.cropped = true;
  for (int a = 0; a < 3; ++a) {
    c.patch_lo[a] = -s.pad_low[a];
    c.patch_dims[a] = s.dims[a];
    c.lo[a] = 0;
    c.hi[a] = g.dims[a];
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
  if (c.split.pieces > 1) {
    int64_t length = 0;
    slabs_of(c, static_cast<uint32_t>(d), length);  // throws when the split does not fit the box
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


std::array<uint64_t, 3> box_split_patch_dims(const CropBox& c, uint32_t divisor) {
  int64_t length = 0;
  slabs_of(c, divisor, length);
  std::array<uint64_t, 3> dims = c.patch_dims;
  dims[c.split.axis] = static_cast<uint64_t>(length);
  return dims;
}

TileGrid box_split_grid(const Geometry& g, std::span<const uint8_t> mask, const CropBox& c, uint32_t divisor) {
  validate_volume_sizes(g, g.voxel_count(), mask.size());
  int64_t length = 0;
  const std::vector<Slab> slabs = slabs_of(c, divisor, length);
  const int a = static_cast<int>(c.split.axis);
  TileGrid grid;
  grid.config = TileConfig{static_cast<uint32_t>((c.hi[a] - c.lo[a] + c.split.pieces - 1) / c.split.pieces), c.split.halo};
  std::array<uint64_t, 3> dims = c.patch_dims;
  dims[a] = static_cast<uint64_t>(length);
  grid.patch_edge = std::max({dims[0], dims[1], dims[2]});
  grid.counts = {1, 1, 1};
  grid.counts[a] = slabs.size();
  for (size_t i = 0; i < slabs.size(); ++i) {
    Tile t;
    t.index = i;
    t.core_lo = c.lo;
    t.core_hi = c.hi;
    t.patch_lo = c.patch_lo;
    t.core_lo[a] = slabs[i].c0;
    t.core_hi[a] = slabs[i].c1;
    t.patch_lo[a] = slabs[i].p0;
    t.skipped = !holds_mask(g, mask, t.core_lo, t.core_hi);
    (t.skipped ? grid.skipped : grid.active) += 1;
    grid.tiles.push_back(t);
  }
  return grid;
}

std::string split_text(const BoxSplit& s) {
  static constexpr const char* kAxis[3] = {"x", "y", "z"};
  return std::to_string(s.pieces) + " slabs along " + kAxis[std::min<uint32_t>(s.axis, 2)] + ", halo " + std::to_string(s.halo);
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
