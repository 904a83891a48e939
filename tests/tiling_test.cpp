#include "tessera/engine/tiling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "support.h"
#include "tessera/engine/crop.h"
#include "tessera/common/error.h"

using namespace tessera;
using namespace tessera::test;

TEST(Tiling, CoresPartitionTheVolume) {
  for (const auto& d : std::vector<Dims3>{{1, 1, 1}, {13, 7, 5}, {64, 64, 64}, {65, 30, 9}}) {
    for (uint32_t core : {1u, 4u, 7u, 56u, 200u}) {
      const Geometry g = geometry(d[0], d[1], d[2]);
      const std::vector<uint8_t> mask(g.voxel_count(), 1);
      const TileGrid grid = make_tile_grid(g, mask, {core, 3}, 8);
      std::vector<int> hits(g.voxel_count(), 0);
      for (const Tile& t : grid.tiles) {
        for (int a = 0; a < 3; ++a) {
          EXPECT_EQ(t.core_lo[a] % core, 0);  // core-aligned from 0
          EXPECT_LE(t.core_hi[a], g.dims[a]);  // clamped at the edges
          // The patch holds the core and its halo; it moves off core_lo − halo only onto the pooling grid.
          EXPECT_LE(t.patch_lo[a], t.core_lo[a] - 3);
          EXPECT_GE(t.patch_lo[a] + static_cast<int64_t>(grid.patch_edge), t.core_lo[a] + static_cast<int64_t>(core) + 3);
          if (t.patch_lo[a] != t.core_lo[a] - 3) EXPECT_EQ(((t.patch_lo[a] % 8) + 8) % 8, 0);
          EXPECT_LE(t.core_hi[a] - t.core_lo[a], static_cast<int64_t>(core));
        }
        for (int64_t z = t.core_lo[2]; z < t.core_hi[2]; ++z)
          for (int64_t y = t.core_lo[1]; y < t.core_hi[1]; ++y)
            for (int64_t x = t.core_lo[0]; x < t.core_hi[0]; ++x) ++hits[g.index(x, y, z)];
      }
      for (int h : hits) ASSERT_EQ(h, 1) << "dims " << d[0] << "×" << d[1] << "×" << d[2] << " core " << core;
      EXPECT_EQ(grid.active + grid.skipped, grid.tiles.size());
      EXPECT_EQ(grid.patch_edge, tile_patch_size({core, 3}, 8));
    }
  }
}

TEST(Tiling, TilesWithoutMaskVoxelsAreSkipped) {
  const Geometry g = geometry(40, 40, 40);
  std::vector<uint8_t> mask(g.voxel_count(), 0);
  mask[g.index(25, 5, 35)] = 1;  // one voxel: only the tile holding it runs
  const TileGrid grid = make_tile_grid(g, mask, {10, 2}, 1);
  EXPECT_EQ(grid.tiles.size(), 64u);
  EXPECT_EQ(grid.active, 1u);
  EXPECT_EQ(grid.skipped, 63u);
  for (const Tile& t : grid.tiles) {
    const bool holds = t.core_lo[0] == 20 && t.core_lo[1] == 0 && t.core_lo[2] == 30;
    EXPECT_EQ(t.skipped, !holds);
  }
}

TEST(Tiling, GatherReordersToNetworkLayoutWithZerosOutside) {
  const Geometry g = geometry(5, 4, 3);
  std::vector<float> field(g.voxel_count());
  for (size_t i = 0; i < field.size(); ++i) field[i] = static_cast<float>(i + 1);
  const std::array<uint64_t, 3> dims{8, 6, 4};
  const Dims3 origin{-2, -1, 0};
  std::vector<float> patch(8 * 6 * 4, -99.0f);
  Normalization norm{0.5, 2.0, 1.0, 0.0};
  gather_patch(g, field, origin, dims, norm, patch);
  for (uint64_t px = 0; px < 8; ++px)
    for (uint64_t py = 0; py < 6; ++py)
      for (uint64_t pz = 0; pz < 4; ++pz) {
        const int64_t x = origin[0] + static_cast<int64_t>(px), y = origin[1] + static_cast<int64_t>(py),
                      z = origin[2] + static_cast<int64_t>(pz);
        const bool inside = x >= 0 && y >= 0 && z >= 0 && x < 5 && y < 4 && z < 3;
        const float expected = inside ? (field[g.index(x, y, z)] - 0.5f) / 2.0f : 0.0f;
        ASSERT_EQ(patch[(px * 6 + py) * 4 + pz], expected) << px << "," << py << "," << pz;
      }
}

TEST(Tiling, ScatterWritesCoreAtMaskVoxelsOnly) {
  const Geometry g = geometry(6, 6, 6);
  std::vector<uint8_t> mask(g.voxel_count(), 0);
  for (size_t i = 0; i < mask.size(); i += 3) mask[i] = 1;
  const std::array<uint64_t, 3> dims{6, 6, 6};
  std::vector<float> patch(216);
  for (size_t i = 0; i < patch.size(); ++i) patch[i] = static_cast<float>(i);
  std::vector<float> chi(g.voxel_count(), -1.0f);
  const Normalization norm{0, 1, 2.0, 1.0};
  scatter_core(g, mask, {1, 1, 1}, {4, 5, 6}, {0, 0, 0}, dims, norm, patch, chi);
  for (int64_t z = 0; z < 6; ++z)
    for (int64_t y = 0; y < 6; ++y)
      for (int64_t x = 0; x < 6; ++x) {
        const uint64_t i = g.index(x, y, z);
        const bool in_core = x >= 1 && x < 4 && y >= 1 && y < 5 && z >= 1;
        const float net = patch[static_cast<size_t>((x * 6 + y) * 6 + z)];
        const float expected = !in_core ? -1.0f : (mask[i] ? 2.0f * net + 1.0f : 0.0f);
        ASSERT_EQ(chi[i], expected);
      }
}

TEST(Tiling, CoreZeroIsRefused) {
  const Geometry g = geometry(4, 4, 4);
  const std::vector<uint8_t> mask(64, 1);
  try {
    make_tile_grid(g, mask, {0, 4}, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("core must be at least 1"), std::string::npos);
  }
}

TEST(Tiling, MaskRunsCountTheGridsActiveTiles) {
  // A non-convex mask (an ellipsoid with a hole and a stray voxel) against make_tile_grid, for strides and edges.
  const Geometry g = geometry(37, 29, 23);
  std::vector<uint8_t> mask = ellipsoid_mask(g, 0.8);
  for (int64_t z = 8; z < 14; ++z)
    for (int64_t y = 10; y < 18; ++y)
      for (int64_t x = 12; x < 24; ++x) mask[g.index(x, y, z)] = 0;
  mask[g.index(36, 0, 22)] = 1;
  const MaskRuns runs(g, mask);
  for (uint32_t core : {1u, 3u, 8u, 13u, 29u, 40u}) {
    for (uint32_t stride : {0u, 1u, 2u, core / 2, core - 1}) {
      if (stride > core || (stride == 0 && core == 0)) continue;
      const TileConfig cfg{core, 2, stride, stride && stride < core ? Blend::Cosine : Blend::Crop};
      EXPECT_EQ(runs.active_tiles(cfg), make_tile_grid(g, mask, cfg, 8).active) << "core " << core << " stride " << stride;
    }
  }
  const std::vector<uint8_t> empty(g.voxel_count(), 0);
  EXPECT_EQ(MaskRuns(g, empty).active_tiles(TileConfig{8, 2}), 0u);
}

TEST(Tiling, PatchesSitOnTheWholeVolumesPoolingGridWhenTheRoundingLeavesRoom) {
  const Geometry g = geometry(100, 90, 77);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  // Whole-volume padding to 8 (smaller half low): 104 (pad 4 → 2 low), 96 (6 → 3), 80 (3 → 1).
  const Dims3 pad_low{2, 3, 1};
  // core 40 + 2·6 = 52 → 56: 4 voxels of slack, enough for any phase only when the offset is at most 4.
  const TileGrid grid = make_tile_grid(g, mask, TileConfig{40, 6}, 8, pad_low);
  for (const Tile& t : grid.tiles) {
    for (int a = 0; a < 3; ++a) {
      const int64_t want = t.core_lo[a] - 6;
      const int64_t off = (((want + pad_low[a]) % 8) + 8) % 8;
      if (off <= 4) {
        EXPECT_EQ(t.patch_lo[a], want - off) << "axis " << a;
        EXPECT_EQ(((t.patch_lo[a] + pad_low[a]) % 8 + 8) % 8, 0);
      } else {
        EXPECT_EQ(t.patch_lo[a], want);
      }
    }
  }
  // core 48 + 2·4 = 56: no slack; only a grid that is already in phase is aligned (48k − 4 + pad is never ≡ 0 here).
  const TileGrid tight = make_tile_grid(g, mask, TileConfig{48, 4}, 8, pad_low);
  EXPECT_EQ(tight.misaligned, tight.active);
  const TileGrid in_phase = make_tile_grid(g, mask, TileConfig{48, 4}, 8, Dims3{4, 4, 4});
  EXPECT_EQ(in_phase.misaligned, 0u);
  for (const Tile& t : in_phase.tiles) EXPECT_EQ(t.patch_lo[0], t.core_lo[0] - 4);
}

namespace {

// The first voxel of a patch before it is shrunk, by make_tile_grid's documented placement (tiling.h): on the whole
// volume's pooling grid within the rounding slack, else core_lo − halo.
int64_t placed_patch(int64_t core_lo, const TileConfig& cfg, int64_t edge, int64_t d, int64_t pad_low) {
  const int64_t want = core_lo - cfg.halo, off = ((want + pad_low) % d + d) % d;
  return want - off >= core_lo + cfg.core + cfg.halo - edge ? want - off : want;
}

// A non-convex mask off the volume's centre: an ellipsoid in the low corner with a hole, and a stray voxel.
std::vector<uint8_t> lopsided_mask(const Geometry& g) {
  std::vector<uint8_t> mask(g.voxel_count(), 0);
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const double u = (x - 0.4 * g.dims[0]) / (0.35 * g.dims[0]), v = (y - 0.45 * g.dims[1]) / (0.4 * g.dims[1]),
                     w = (z - 0.4 * g.dims[2]) / (0.38 * g.dims[2]);
        mask[g.index(x, y, z)] = u * u + v * v + w * w <= 1.0 ? 1 : 0;
      }
  for (int64_t z = 6; z < 10; ++z)
    for (int64_t y = 8; y < 14; ++y)
      for (int64_t x = 9; x < 15; ++x) mask[g.index(x, y, z)] = 0;
  mask[g.index(g.dims[0] - 1, 0, g.dims[2] - 1)] = 1;
  return mask;
}

}  // namespace

TEST(Tiling, ShrunkPatchesHoldEveryServedVoxelsReachOnTheGridInsideTheOldPatch) {
  const Geometry g = geometry(37, 29, 23);
  const std::vector<uint8_t> mask = lopsided_mask(g);
  uint64_t shrunk = 0, checked = 0;
  for (const Dims3& pad_low : {Dims3{0, 0, 0}, Dims3{2, 3, 1}}) {
    for (uint32_t d : {1u, 4u, 8u}) {
      for (uint32_t core : {5u, 8u, 13u}) {
        for (uint32_t halo : {0u, 3u, 6u}) {
          for (uint32_t stride : {0u, core / 2}) {
            const TileConfig cfg{core, halo, stride, stride ? Blend::Cosine : Blend::Crop};
            const TileGrid grid = make_tile_grid(g, mask, cfg, d, pad_low);
            const int64_t E = static_cast<int64_t>(grid.patch_edge);
            ASSERT_EQ(E % d, 0);
            const int64_t reach = std::max(halo, kShrinkReach);  // the halo, at least kShrinkReach
            for (const Tile& t : grid.tiles) {
              Dims3 lo{INT64_MAX, INT64_MAX, INT64_MAX}, hi{INT64_MIN, INT64_MIN, INT64_MIN};  // served voxels' box
              for (int64_t z = t.core_lo[2]; z < t.core_hi[2]; ++z)
                for (int64_t y = t.core_lo[1]; y < t.core_hi[1]; ++y)
                  for (int64_t x = t.core_lo[0]; x < t.core_hi[0]; ++x) {
                    if (!mask[g.index(x, y, z)]) continue;
                    const int64_t v[3] = {x, y, z};
                    for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], v[a]), hi[a] = std::max(hi[a], v[a] + 1);
                  }
              if (t.skipped) {
                EXPECT_GT(lo[0], hi[0]) << tile_text(t) << " is skipped but holds a mask voxel";
                continue;
              }
              ++checked;
              ASSERT_LE(lo[0], hi[0]) << tile_text(t) << " is active without a mask voxel";
              bool smaller = false;
              for (int a = 0; a < 3; ++a) {
                const int64_t P0 = placed_patch(t.core_lo[a], cfg, E, d, pad_low[a]), P1 = P0 + E;
                const int64_t p0 = t.patch_lo[a], p1 = p0 + static_cast<int64_t>(t.patch_dims[a]);
                const std::string where = tile_text(t) + " axis " + std::to_string(a) + " core " + std::to_string(core) +
                                          " halo " + std::to_string(halo) + " stride " + std::to_string(stride) +
                                          " divisor " + std::to_string(d);
                // Inside the old patch, on its pooling grid.
                EXPECT_GE(p0, P0) << where;
                EXPECT_LE(p1, P1) << where;
                EXPECT_EQ((p0 - P0) % d, 0) << where;
                EXPECT_EQ(t.patch_dims[a] % d, 0u) << where;
                // Every served voxel keeps its reach (as far as the old patch reached).
                EXPECT_LE(p0, std::max(P0, lo[a] - reach)) << where;
                EXPECT_GE(p1, std::min(P1, hi[a] + reach)) << where;
                // And no more than the grid asks for.
                EXPECT_GT(p0, lo[a] - reach - static_cast<int64_t>(d)) << where;
                EXPECT_LT(p1, hi[a] + reach + static_cast<int64_t>(d)) << where;
                smaller = smaller || p1 - p0 < E;
              }
              shrunk += smaller ? 1 : 0;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000u);
  EXPECT_GT(shrunk, checked / 4) << "the mask leaves most patches whole: the test checks little";
}

TEST(Tiling, ATileWhoseCoreIsFullOfMaskKeepsItsWholePatch) {
  const Geometry g = geometry(40, 30, 20);  // multiples of the core: no core is cut by the volume's edge
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  for (const Dims3& pad_low : {Dims3{0, 0, 0}, Dims3{2, 3, 1}}) {
    for (const TileConfig& cfg : {TileConfig{10, 3}, TileConfig{10, 0}, TileConfig{10, 4, 5, Blend::Cosine}}) {
      const TileGrid grid = make_tile_grid(g, mask, cfg, 8, pad_low);
      const int64_t E = static_cast<int64_t>(grid.patch_edge);
      for (const Tile& t : grid.tiles) {
        if (t.core_hi[0] - t.core_lo[0] < 10 || t.core_hi[1] - t.core_lo[1] < 10 || t.core_hi[2] - t.core_lo[2] < 10) continue;
        EXPECT_EQ(t.patch_dims, (std::array<uint64_t, 3>{grid.patch_edge, grid.patch_edge, grid.patch_edge})) << tile_text(t);
        for (int a = 0; a < 3; ++a) EXPECT_EQ(t.patch_lo[a], placed_patch(t.core_lo[a], cfg, E, 8, pad_low[a])) << tile_text(t);
      }
    }
  }
}

TEST(Tiling, MaskRunsCountTheShrunkPatchVoxelsOfTheGrid) {
  const Geometry g = geometry(37, 29, 23);
  const std::vector<uint8_t> mask = lopsided_mask(g);
  const MaskRuns runs(g, mask);
  for (const Dims3& pad_low : {Dims3{0, 0, 0}, Dims3{2, 3, 1}}) {
    for (uint32_t d : {1u, 8u}) {
      for (uint32_t core : {1u, 3u, 8u, 13u, 40u}) {
        for (uint32_t stride : {0u, 1u, core / 2, core - 1}) {
          if (stride > core) continue;
          const TileConfig cfg{core, 2, stride, stride && stride < core ? Blend::Cosine : Blend::Crop};
          const TileGrid grid = make_tile_grid(g, mask, cfg, d, pad_low);
          const uint64_t e = grid.patch_edge;
          EXPECT_EQ(runs.patch_voxels(cfg, d, pad_low), active_patch_voxels(grid, {e, e, e}))
              << "core " << core << " stride " << stride << " divisor " << d;
        }
      }
    }
  }
  const std::vector<uint8_t> empty(g.voxel_count(), 0);
  EXPECT_TRUE(MaskRuns(g, empty).patch_voxels(TileConfig{8, 2}, 8, {0, 0, 0}).empty());
}

TEST(Tiling, ServedWindowsHoldEveryCoreWithAMaskVoxelAndItsServedBox) {
  const Geometry g = geometry(37, 29, 23);
  const std::vector<uint8_t> mask = lopsided_mask(g);
  const MaskRuns runs(g, mask);
  for (uint32_t core : {1u, 5u, 8u, 13u, 40u}) {
    for (uint32_t step : {1u, std::max(1u, core / 2), core}) {
      const ServedWindows w = runs.served_windows(core, step);
      ASSERT_EQ(w.at.size(), w.boxes.size());
      size_t next = 0;
      int64_t n[3];
      for (int a = 0; a < 3; ++a) n[a] = windows_along(g.dims[a], core, step);
      for (int64_t k = 0; k < n[2]; ++k)
        for (int64_t j = 0; j < n[1]; ++j)
          for (int64_t i = 0; i < n[0]; ++i) {
            // The brute-force box of the mask voxels in this core.
            Dims3 lo{INT64_MAX, INT64_MAX, INT64_MAX}, hi{INT64_MIN, INT64_MIN, INT64_MIN};
            const int64_t c0[3] = {i * step, j * step, k * step};
            for (int64_t z = c0[2]; z < std::min<int64_t>(c0[2] + core, g.dims[2]); ++z)
              for (int64_t y = c0[1]; y < std::min<int64_t>(c0[1] + core, g.dims[1]); ++y)
                for (int64_t x = c0[0]; x < std::min<int64_t>(c0[0] + core, g.dims[0]); ++x) {
                  if (!mask[g.index(x, y, z)]) continue;
                  const int64_t v[3] = {x, y, z};
                  for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], v[a]), hi[a] = std::max(hi[a], v[a] + 1);
                }
            const std::string where = "core " + std::to_string(core) + " step " + std::to_string(step) + " window " +
                                      std::to_string(i) + "," + std::to_string(j) + "," + std::to_string(k);
            if (lo[0] > hi[0]) continue;  // no mask voxel: not listed
            ASSERT_LT(next, w.at.size()) << where;
            EXPECT_EQ(w.at[next], (std::array<uint32_t, 3>{static_cast<uint32_t>(i), static_cast<uint32_t>(j), static_cast<uint32_t>(k)})) << where;
            EXPECT_EQ(w.boxes[next].lo, lo) << where;
            EXPECT_EQ(w.boxes[next].hi, hi) << where;
            ++next;
          }
      EXPECT_EQ(next, w.at.size()) << "core " << core << " step " << step << ": windows without a mask voxel listed";
    }
  }
  // The patch voxels from windows of another core or step are refused, not miscounted.
  try {
    runs.patch_voxels(TileConfig{8, 2}, 8, {0, 0, 0}, runs.served_windows(8, 4));
    FAIL() << "windows of step 4 taken for stride 8";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("another core or step"), std::string::npos) << e.what();
  }
}
