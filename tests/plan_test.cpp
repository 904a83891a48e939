#include "tessera/engine/plan.h"

#include <gtest/gtest.h>

#include "support.h"

using namespace tessera;
using namespace tessera::test;

TEST(Plan, TiledPlanCountsTilesAndMemory) {
  const Geometry g = geometry(100, 90, 80);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.8);
  const FieldNetwork net{TileCost{8, 1100}, {}, PadRule::SmallerHalfLow};
  const TilePlan p = plan_tiled(g, mask, net, {56, 4}, 4, Target::Wasm);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_EQ(p.patch_edge, 64u);
  EXPECT_EQ(p.bytes_per_tile, 64ull * 64 * 64 * 1100);
  EXPECT_EQ(p.tiles_in_flight, 4u);  // min(4 workers, 5 within budget)
  EXPECT_EQ(p.tiles_total, 8u);
  const TileGrid grid = make_tile_grid(g, mask, {56, 4}, 8);
  EXPECT_EQ(p.tiles_active, grid.active);
  EXPECT_EQ(p.tiles_skipped, grid.skipped);
  EXPECT_EQ(p.activation_bytes, p.bytes_per_tile * std::min<uint64_t>(4, grid.active));
  EXPECT_LE(p.activation_bytes, WASM_TILE_ACTIVATION_BUDGET);
  EXPECT_EQ(p.peak_bytes, p.activation_bytes + p.module_heap_bytes);
  EXPECT_GE(p.module_heap_bytes, WASM_MODULE_BASELINE_BYTES + g.voxel_count() * 9);
}

TEST(Plan, InfeasibleConfigCarriesTheAdviceInsteadOfThrowing) {
  const Geometry g = geometry(200, 200, 150);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const FieldNetwork net{TileCost{8, 1100}, {}, PadRule::SmallerHalfLow};
  const TilePlan p = plan_tiled(g, mask, net, TileConfig{}, 2, Target::Wasm);
  EXPECT_FALSE(p.feasible);
  EXPECT_NE(p.message.find("largest core that fits is 112"), std::string::npos) << p.message;
  const TilePlan zero = plan_tiled(g, mask, net, {0, 4}, 2, Target::Wasm);
  EXPECT_FALSE(zero.feasible);
  EXPECT_NE(zero.message.find("core must be at least 1"), std::string::npos);
  // Natively there is no single-patch limit.
  EXPECT_TRUE(plan_tiled(g, mask, net, TileConfig{}, 2, Target::Native).feasible);
}

TEST(Plan, WholeVolumePlan) {
  const Geometry small = geometry(60, 70, 50);
  const FieldNetwork net{TileCost{16, 563}, {}, PadRule::SmallerHalfLow};
  const TilePlan p = plan_whole(small, net, Target::Wasm);
  ASSERT_TRUE(p.feasible);
  EXPECT_EQ(p.patch_dims, (std::array<uint64_t, 3>{64, 80, 64}));
  EXPECT_EQ(p.bytes_per_tile, 64ull * 80 * 64 * 563);
  const TilePlan big = plan_whole(geometry(256, 256, 176), FieldNetwork{TileCost{8, 1100}, {}, PadRule::SmallerHalfLow},
                                  Target::Wasm);
  EXPECT_FALSE(big.feasible);
  EXPECT_NE(big.message.find("run it tiled"), std::string::npos);
}

TEST(Plan, CarriesTheTilesItsRunGoesThrough) {
  // 160×192×144 at core 72 / halo 8: 3×3×2 core-aligned tiles, the last of each axis clamped to the volume.
  const Geometry g = geometry(160, 192, 144);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.8);
  const FieldNetwork net{TileCost{8, 1100}, {}, PadRule::SmallerHalfLow};
  const TilePlan p = plan_tiled(g, mask, net, {72, 8}, 2, Target::Wasm);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_EQ(p.grid.counts, (std::array<uint64_t, 3>{3, 3, 2}));
  ASSERT_EQ(p.grid.tiles.size(), p.tiles_total);
  EXPECT_EQ(p.tiles_total, 18u);
  uint64_t active = 0, voxels = 0;
  for (const Tile& t : p.grid.tiles) {
    active += t.skipped ? 0 : 1;
    uint64_t v = 1;
    const std::array<uint64_t, 3> d = tile_patch_dims(t, p.patch_dims);
    for (int a = 0; a < 3; ++a) {
      // The patch core - 8 .. core - 8 + edge, or inside it where the tile's mask voxels need less (shrink_patch).
      EXPECT_GE(t.patch_lo[a], t.core_lo[a] - 8);
      EXPECT_LE(t.patch_lo[a] + static_cast<int64_t>(d[a]), t.core_lo[a] - 8 + static_cast<int64_t>(p.patch_edge));
      if (t.skipped) EXPECT_EQ(t.patch_lo[a], t.core_lo[a] - 8);
      EXPECT_LE(t.core_hi[a], g.dims[a]);
      v *= static_cast<uint64_t>(t.core_hi[a] - t.core_lo[a]);
    }
    voxels += v;
  }
  EXPECT_EQ(active, p.tiles_active);
  EXPECT_EQ(voxels, g.voxel_count());  // the cores cover the volume exactly once
  EXPECT_EQ(p.grid.tiles.back().core_hi, g.dims);

  const TilePlan whole = plan_whole(g, net, Target::Native);
  ASSERT_EQ(whole.grid.tiles.size(), 1u);
  EXPECT_EQ(whole.grid.tiles[0].core_hi, g.dims);
  EXPECT_EQ(whole.grid.tiles[0].patch_lo, (Dims3{0, 0, 0}));  // 160, 192, 144 are multiples of 8
}

TEST(Plan, CountsTheVoxelsItsRunComputesPatchByPatch) {
  const Geometry g = geometry(100, 90, 80);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.8);
  const FieldNetwork net{TileCost{8, 1100}, {}, PadRule::SmallerHalfLow};
  const TilePlan p = plan_tiled(g, mask, net, {24, 8}, 2, Target::Native);
  ASSERT_TRUE(p.feasible) << p.message;
  // The sum over the active tiles of their own patches, none larger than the plan's edge³, the edge tiles cut.
  uint64_t sum = 0, cut = 0;
  for (const Tile& t : p.grid.tiles) {
    if (t.skipped) continue;
    const std::array<uint64_t, 3> d = tile_patch_dims(t, p.patch_dims);
    for (int a = 0; a < 3; ++a) EXPECT_LE(d[a], p.patch_edge) << tile_text(t);
    sum += d[0] * d[1] * d[2];
    cut += d[0] * d[1] * d[2] < p.patch_edge * p.patch_edge * p.patch_edge ? 1 : 0;
  }
  EXPECT_EQ(voxels_run(p), sum);
  EXPECT_GT(cut, 0u) << "an ellipsoid's surface tiles should be cut";
  EXPECT_LT(voxels_run(p), p.tiles_active * p.patch_edge * p.patch_edge * p.patch_edge);
  // A whole-volume plan runs its padded volume once.
  const TilePlan whole = plan_whole(g, net, Target::Native);
  EXPECT_EQ(voxels_run(whole), whole.patch_dims[0] * whole.patch_dims[1] * whole.patch_dims[2]);
}
