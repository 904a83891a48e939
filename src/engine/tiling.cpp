#include "tessera/engine/tiling.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "tessera/engine/crop.h"
#include "tessera/common/error.h"

namespace tessera {

namespace {

// A box no voxel has widened yet: any voxel sets both ends.
constexpr ServedBox kNoVoxel{{INT64_MAX, INT64_MAX, INT64_MAX}, {INT64_MIN, INT64_MIN, INT64_MIN}};

// Range of patch coordinates [a, b) whose volume coordinate origin + i lies inside [0, n).
void valid_range(int64_t origin, uint64_t dim, int64_t n, int64_t& a, int64_t& b) {
  a = std::max<int64_t>(0, -origin);
  b = std::min<int64_t>(static_cast<int64_t>(dim), n - origin);
  if (b < a) b = a;
}

}  // namespace

int64_t windows_along(int64_t n, int64_t core, int64_t step) { return 1 + (std::max<int64_t>(0, n - core) + step - 1) / step; }

std::string tile_text(const Tile& t) {
  auto range = [](int64_t a, int64_t b) { return std::to_string(a) + "-" + std::to_string(b); };
  return "tile " + std::to_string(t.index) + " (core x " + range(t.core_lo[0], t.core_hi[0]) + ", y " +
         range(t.core_lo[1], t.core_hi[1]) + ", z " + range(t.core_lo[2], t.core_hi[2]) + ")";
}

bool holds_mask(const Geometry& g, std::span<const uint8_t> mask, const Dims3& lo, const Dims3& hi) {
  for (int64_t z = lo[2]; z < hi[2]; ++z) {
    for (int64_t y = lo[1]; y < hi[1]; ++y) {
      const uint8_t* row = mask.data() + g.index(0, y, z);
      uint8_t any = 0;  // a whole row at a time: a loop without an exit vectorises
      for (int64_t x = lo[0]; x < hi[0]; ++x) any |= row[x];
      if (any) return true;
    }
  }
  return false;
}

void shrink_patch(Tile& t, const std::array<uint64_t, 3>& dims, const ServedBox& box, uint32_t reach, uint32_t divisor) {
  if (box.empty()) return;
  const int64_t d = std::max<uint32_t>(1, divisor), r = reach;
  for (int a = 0; a < 3; ++a) {
    const int64_t p0 = t.patch_lo[a], p1 = p0 + static_cast<int64_t>(dims[a]);
    const int64_t want0 = std::max(p0, box.lo[a] - r), want1 = std::min(p1, box.hi[a] + r);
    const int64_t lo = p0 + (want0 - p0) / d * d;                          // down to the patch's grid, not below p0
    const int64_t hi = std::min(p1, p0 + (want1 - p0 + d - 1) / d * d);    // up to it, not past p1
    t.patch_lo[a] = lo;
    t.patch_dims[a] = static_cast<uint64_t>(hi - lo);
  }
}

uint32_t patch_reach(const TileConfig& cfg) { return std::max(cfg.halo, kShrinkReach); }

std::vector<uint64_t> active_patch_voxels(const TileGrid& grid, const std::array<uint64_t, 3>& common) {
  std::vector<uint64_t> voxels;
  voxels.reserve(grid.active);
  for (const Tile& t : grid.tiles) {
    if (t.skipped) continue;
    const std::array<uint64_t, 3> d = tile_patch_dims(t, common);
    voxels.push_back(d[0] * d[1] * d[2]);
  }
  return voxels;
}

std::vector<const Tile*> active_tiles(const TileGrid& grid) {
  std::vector<const Tile*> active;
  active.reserve(grid.active);
  for (const Tile& t : grid.tiles) {
    if (!t.skipped) active.push_back(&t);
  }
  return active;
}

TileGrid whole_volume_grid(const Geometry& g, const Dims3& patch_lo, uint64_t patch_edge) {
  TileGrid grid;
  grid.patch_edge = patch_edge;
  grid.counts = {1, 1, 1};
  Tile t;
  t.core_hi = g.dims;
  t.patch_lo = patch_lo;
  grid.tiles.push_back(t);
  grid.active = 1;
  return grid;
}

namespace {
// The patch origin for a core starting at core_lo: on the whole volume's pooling grid within the rounding slack.
int64_t place_patch(int64_t core_lo, int64_t core, int64_t halo, int64_t edge, int64_t divisor, int64_t pad_low, bool& aligned) {
  const int64_t want = core_lo - halo;
  const int64_t earliest = core_lo + core + halo - edge;  // the patch still covers core + halo above
  const int64_t off = ((want + pad_low) % divisor + divisor) % divisor;
  aligned = want - off >= earliest;
  return aligned ? want - off : want;
}
}  // namespace

TileGrid make_tile_grid(const Geometry& g, std::span<const uint8_t> mask, TileConfig cfg, uint32_t divisor, const Dims3& pad_low) {
  validate_tile_config(cfg);
  TileGrid grid;
  grid.config = cfg;
  grid.patch_edge = tile_patch_size(cfg, divisor);
  const int64_t core = cfg.core;
  const int64_t step = cfg.step();
  for (int a = 0; a < 3; ++a) {
    grid.counts[a] = static_cast<uint64_t>(windows_along(g.dims[a], core, step));
  }
  grid.tiles.reserve(grid.counts[0] * grid.counts[1] * grid.counts[2]);
  const ServedWindows served = MaskRuns(g, mask).served_windows(cfg.core, cfg.step());
  size_t w = 0;
  uint64_t index = 0;
  for (uint64_t tz = 0; tz < grid.counts[2]; ++tz) {
    for (uint64_t ty = 0; ty < grid.counts[1]; ++ty) {
      for (uint64_t tx = 0; tx < grid.counts[0]; ++tx) {
        Tile t;
        t.index = index++;
        t.patch_dims = {grid.patch_edge, grid.patch_edge, grid.patch_edge};
        const uint64_t tc[3] = {tx, ty, tz};
        bool aligned = true;
        for (int a = 0; a < 3; ++a) {
          t.core_lo[a] = static_cast<int64_t>(tc[a]) * step;
          t.core_hi[a] = std::min<int64_t>(t.core_lo[a] + core, g.dims[a]);
          bool on_grid = true;
          t.patch_lo[a] = place_patch(t.core_lo[a], core, cfg.halo, static_cast<int64_t>(grid.patch_edge),
                                      std::max<int64_t>(1, divisor), pad_low[a], on_grid);
          aligned = aligned && on_grid;
        }
        // The served windows are the active tiles in grid order.
        t.skipped = !(w < served.at.size() && served.at[w] == std::array<uint32_t, 3>{static_cast<uint32_t>(tx),
                                                                                      static_cast<uint32_t>(ty),
                                                                                      static_cast<uint32_t>(tz)});
        if (!t.skipped) {
          shrink_patch(t, {grid.patch_edge, grid.patch_edge, grid.patch_edge}, served.boxes[w++], patch_reach(cfg), divisor);
        }
        (t.skipped ? grid.skipped : grid.active) += 1;
        if (!t.skipped && !aligned) ++grid.misaligned;
        grid.tiles.push_back(t);
      }
    }
  }
  return grid;
}

bool on_pooling_grid(const Geometry& g, TileConfig cfg, uint32_t divisor, const Dims3& pad_low) {
  validate_tile_config(cfg);
  const int64_t d = std::max<uint32_t>(1, divisor);
  const int64_t edge = static_cast<int64_t>(tile_patch_size(cfg, divisor));
  const int64_t step = cfg.step();
  for (int a = 0; a < 3; ++a) {
    const int64_t n = windows_along(g.dims[a], cfg.core, step);
    // Patch offsets repeat with the core start modulo the divisor: d windows cover every case.
    for (int64_t k = 0; k < std::min<int64_t>(n, d); ++k) {
      bool aligned = true;
      place_patch(k * step, cfg.core, cfg.halo, edge, d, pad_low[a], aligned);
      if (!aligned) return false;
    }
  }
  return true;
}

MaskRuns::MaskRuns(const Geometry& g, std::span<const uint8_t> mask) : dims_(g.dims) {
  validate_geometry(g);
  if (mask.size() != g.voxel_count()) validate_volume_sizes(g, g.voxel_count(), mask.size());
  const uint64_t rows = static_cast<uint64_t>(g.dims[1]) * static_cast<uint64_t>(g.dims[2]);
  row_start_.reserve(rows + 1);
  for (uint64_t row = 0; row < rows; ++row) {
    row_start_.push_back(static_cast<uint32_t>(runs_.size()));
    const uint8_t* m = mask.data() + row * static_cast<uint64_t>(g.dims[0]);
    for (int64_t x = 0; x < g.dims[0];) {
      if (!m[x]) {
        ++x;
        continue;
      }
      const int64_t a = x;
      while (x < g.dims[0] && m[x]) ++x;
      runs_.push_back({static_cast<int32_t>(a), static_cast<int32_t>(x)});
    }
  }
  row_start_.push_back(static_cast<uint32_t>(runs_.size()));
}

namespace {
// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
}  // namespace

uint64_t MaskRuns::active_tiles(const TileConfig& cfg) const {
  validate_tile_config(cfg);
  const int64_t core = cfg.core, step = cfg.step();
  int64_t n[3];
  for (int a = 0; a < 3; ++a) n[a] = windows_along(dims_[a], core, step);
  std::vector<int32_t> diff(static_cast<size_t>(n[0]) + 1);
  uint64_t active = 0;
  for (int64_t k = 0; k < n[2]; ++k) {
    const int64_t z0 = k * step, z1 = std::min(z0 + core, dims_[2]);
    for (int64_t j = 0; j < n[1]; ++j) {
      const int64_t y0 = j * step, y1 = std::min(y0 + core, dims_[1]);
      std::fill(diff.begin(), diff.end(), 0);
      bool any = false;
      for (int64_t z = z0; z < z1; ++z) {
        for (int64_t y = y0; y < y1; ++y) {
          const uint64_t row = static_cast<uint64_t>(y + dims_[1] * z);
          for (uint32_t r = row_start_[row]; r < row_start_[row + 1]; ++r) {
            // Windows i with i·step < b and i·step + core > a.
            const int64_t lo = std::max<int64_t>(0, floor_div(runs_[r][0] - core, step) + 1);
            const int64_t hi = std::min<int64_t>(n[0] - 1, (runs_[r][1] - 1) / step);
            if (lo > hi) continue;
            ++diff[static_cast<size_t>(lo)];
            --diff[static_cast<size_t>(hi + 1)];
            any = true;
          }
        }
      }
      if (!any) continue;
      int32_t cover = 0;
      for (int64_t i = 0; i < n[0]; ++i) {
        cover += diff[static_cast<size_t>(i)];
        if (cover > 0) ++active;
      }
    }
  }
  return active;
}

ServedWindows MaskRuns::served_windows(uint32_t core_voxels, uint32_t step_voxels) const {
  if (core_voxels < 1 || step_voxels < 1) throw Error(ErrorCode::InvalidArgument, "served_windows: core and step must be >= 1");
  const int64_t core = core_voxels, step = step_voxels;
  int64_t n[3];
  for (int a = 0; a < 3; ++a) n[a] = windows_along(dims_[a], core, step);
  ServedWindows out;
  out.core = core_voxels;
  out.step = step_voxels;
  std::vector<ServedBox> boxes(static_cast<size_t>(n[0]));
  for (int64_t k = 0; k < n[2]; ++k) {
    const int64_t z0 = k * step, z1 = std::min(z0 + core, dims_[2]);
    for (int64_t j = 0; j < n[1]; ++j) {
      const int64_t y0 = j * step, y1 = std::min(y0 + core, dims_[1]);
      std::fill(boxes.begin(), boxes.end(), kNoVoxel);
      for (int64_t z = z0; z < z1; ++z) {
        for (int64_t y = y0; y < y1; ++y) {
          const uint64_t row = static_cast<uint64_t>(y + dims_[1] * z);
          for (uint32_t r = row_start_[row]; r < row_start_[row + 1]; ++r) {
            const int64_t a = runs_[r][0], b = runs_[r][1];
            const int64_t lo = std::max<int64_t>(0, floor_div(a - core, step) + 1);
            const int64_t hi = std::min<int64_t>(n[0] - 1, (b - 1) / step);
            for (int64_t i = lo; i <= hi; ++i) {
              ServedBox& box = boxes[static_cast<size_t>(i)];
              box.lo[0] = std::min(box.lo[0], std::max(a, i * step));
              box.hi[0] = std::max(box.hi[0], std::min(b, i * step + core));
              box.lo[1] = std::min(box.lo[1], y), box.hi[1] = std::max(box.hi[1], y + 1);
              box.lo[2] = std::min(box.lo[2], z), box.hi[2] = std::max(box.hi[2], z + 1);
            }
          }
        }
      }
      for (int64_t i = 0; i < n[0]; ++i) {
        if (boxes[static_cast<size_t>(i)].empty()) continue;
        out.at.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(j), static_cast<uint32_t>(k)});
        out.boxes.push_back(boxes[static_cast<size_t>(i)]);
      }
    }
  }
  return out;
}

std::vector<uint64_t> MaskRuns::patch_voxels(const TileConfig& cfg, uint32_t divisor, const Dims3& pad_low) const {
  validate_tile_config(cfg);
  return patch_voxels(cfg, divisor, pad_low, served_windows(cfg.core, static_cast<uint32_t>(cfg.step())));
}

std::vector<uint64_t> MaskRuns::patch_voxels(const TileConfig& cfg, uint32_t divisor, const Dims3& pad_low,
                                             const ServedWindows& windows) const {
  validate_tile_config(cfg);
  const int64_t core = cfg.core, step = cfg.step(), d = std::max<uint32_t>(1, divisor);
  if (windows.core != cfg.core || windows.step != step) {
    throw Error(ErrorCode::InvalidArgument, "patch_voxels: the served windows are of another core or step");
  }
  const uint64_t edge = tile_patch_size(cfg, divisor);
  const std::array<uint64_t, 3> full{edge, edge, edge};
  std::array<std::vector<int64_t>, 3> start;  // the unshrunk patch's first voxel of each window, per axis
  for (int a = 0; a < 3; ++a) {
    const int64_t n = windows_along(dims_[a], core, step);
    for (int64_t k = 0; k < n; ++k) {
      bool aligned = true;
      start[a].push_back(place_patch(k * step, core, cfg.halo, static_cast<int64_t>(edge), d, pad_low[a], aligned));
    }
  }
  std::vector<uint64_t> voxels;
  voxels.reserve(windows.boxes.size());
  for (size_t w = 0; w < windows.boxes.size(); ++w) {
    const std::array<uint32_t, 3>& at = windows.at[w];
    Tile t;
    t.patch_lo = {start[0][at[0]], start[1][at[1]], start[2][at[2]]};
    t.patch_dims = full;
    shrink_patch(t, full, windows.boxes[w], patch_reach(cfg), divisor);
    voxels.push_back(t.patch_dims[0] * t.patch_dims[1] * t.patch_dims[2]);
  }
  return voxels;
}

void gather_patch(const Geometry& g, std::span<const float> field, const Dims3& origin,
                  const std::array<uint64_t, 3>& dims, const Normalization& norm, std::span<float> out,
                  std::span<const uint8_t> mask) {
  std::fill(out.begin(), out.end(), 0.0f);
  int64_t ax, bx, ay, by, az, bz;
  valid_range(origin[0], dims[0], g.dims[0], ax, bx);
  valid_range(origin[1], dims[1], g.dims[1], ay, by);
  valid_range(origin[2], dims[2], g.dims[2], az, bz);
  const float mean = static_cast<float>(norm.input_mean);
  const float stdev = static_cast<float>(norm.input_std);
  const uint64_t sy = dims[2], sx = dims[1] * dims[2];  // network strides (z fastest)
  // Read the volume contiguously along x; the patch is written with stride sx.
  for (int64_t pz = az; pz < bz; ++pz) {
    for (int64_t py = ay; py < by; ++py) {
      const uint64_t row = g.index(0, origin[1] + py, origin[2] + pz);
      const float* src = field.data() + row;
      float* dst = out.data() + static_cast<uint64_t>(py) * sy + static_cast<uint64_t>(pz);
      if (mask.empty()) {
        for (int64_t px = ax; px < bx; ++px) dst[static_cast<uint64_t>(px) * sx] = (src[origin[0] + px] - mean) / stdev;
      } else {
        const uint8_t* m = mask.data() + row;
        for (int64_t px = ax; px < bx; ++px) {
          const int64_t x = origin[0] + px;
          dst[static_cast<uint64_t>(px) * sx] = m[x] ? (src[x] - mean) / stdev : 0.0f;
        }
      }
    }
  }
}

void scatter_core(const Geometry& g, std::span<const uint8_t> mask, const Dims3& core_lo, const Dims3& core_hi,
                  const Dims3& origin, const std::array<uint64_t, 3>& dims, const Normalization& norm,
                  std::span<const float> patch, std::span<float> chi) {
  const float scale = static_cast<float>(norm.output_scale);
  const float offset = static_cast<float>(norm.output_offset);
  const uint64_t sy = dims[2], sx = dims[1] * dims[2];
  for (int64_t z = core_lo[2]; z < core_hi[2]; ++z) {
    for (int64_t y = core_lo[1]; y < core_hi[1]; ++y) {
      const uint64_t row = g.index(0, y, z);
      const float* src = patch.data() + static_cast<uint64_t>(y - origin[1]) * sy + static_cast<uint64_t>(z - origin[2]);
      for (int64_t x = core_lo[0]; x < core_hi[0]; ++x) {
        const uint64_t i = row + static_cast<uint64_t>(x);
        chi[i] = mask[i] ? scale * src[static_cast<uint64_t>(x - origin[0]) * sx] + offset : 0.0f;
      }
    }
  }
}

void gather_host_patch(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                       const Dims3& origin, uint64_t edge, std::span<float> field_out, std::span<uint8_t> mask_out) {
  std::fill(field_out.begin(), field_out.end(), 0.0f);
  std::fill(mask_out.begin(), mask_out.end(), uint8_t{0});
  int64_t ax, bx, ay, by, az, bz;
  valid_range(origin[0], edge, g.dims[0], ax, bx);
  valid_range(origin[1], edge, g.dims[1], ay, by);
  valid_range(origin[2], edge, g.dims[2], az, bz);
  for (int64_t pz = az; pz < bz; ++pz) {
    for (int64_t py = ay; py < by; ++py) {
      const uint64_t src = g.index(origin[0] + ax, origin[1] + py, origin[2] + pz);
      const uint64_t dst = static_cast<uint64_t>(ax) + edge * (static_cast<uint64_t>(py) + edge * static_cast<uint64_t>(pz));
      const uint64_t n = static_cast<uint64_t>(bx - ax);
      std::copy_n(field.data() + src, n, field_out.data() + dst);
      std::copy_n(mask.data() + src, n, mask_out.data() + dst);
    }
  }
}

void scatter_host_core(const Geometry& g, std::span<const uint8_t> mask, const Tile& t, uint64_t edge,
                       std::span<const float> patch, std::span<float> out) {
  for (int64_t z = t.core_lo[2]; z < t.core_hi[2]; ++z) {
    for (int64_t y = t.core_lo[1]; y < t.core_hi[1]; ++y) {
      const uint64_t row = g.index(0, y, z);
      const uint64_t prow = edge * (static_cast<uint64_t>(y - t.patch_lo[1]) + edge * static_cast<uint64_t>(z - t.patch_lo[2]));
      for (int64_t x = t.core_lo[0]; x < t.core_hi[0]; ++x) {
        const uint64_t i = row + static_cast<uint64_t>(x);
        out[i] = mask[i] ? patch[prow + static_cast<uint64_t>(x - t.patch_lo[0])] : 0.0f;
      }
    }
  }
}

}  // namespace tessera
