#include "tessera/autoplan.h"

#include <gtest/gtest.h>

#include "support.h"
#include "tessera/error.h"

using namespace tessera;
using namespace tessera::test;

namespace {
AutoPlanRequest request(const Geometry& g, uint32_t divisor, uint64_t bpv, uint32_t cores) {
  AutoPlanRequest r;
  r.geometry = g;
  r.network = FieldNetwork{TileCost{divisor, bpv}, {}, PadRule::SmallerHalfLow};
  r.halo = 4;
  r.hardware_threads = cores;
  r.target = Target::Wasm;
  return r;
}
}  // namespace

TEST(AutoPlan, EstimateCountsWavesAndThreads) {
  ThroughputModel s;
  s.seconds_per_voxel = 1e-6;
  s.parallel_fraction = 1.0;
  s.worker_start_seconds = 0.0;
  s.per_tile_seconds = 0.0;
  const double one = 64.0 * 64 * 64 * 1e-6;
  EXPECT_DOUBLE_EQ(estimate_tiled_seconds(64, 10, 4, 1, s), 3 * one);  // 10 tiles on 4 workers: 3 waves
  EXPECT_DOUBLE_EQ(estimate_tiled_seconds(64, 8, 4, 1, s), 2 * one);
  EXPECT_DOUBLE_EQ(estimate_tiled_seconds(64, 8, 1, 2, s), 8 * one / 2);
  EXPECT_DOUBLE_EQ(estimate_tiled_seconds(64, 0, 4, 1, s), 0.0);
}

TEST(AutoPlan, ChoiceIsTheFastestFeasibleConfigUnderTheModel) {
  const Geometry g = geometry(128, 144, 112);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.85);
  for (uint32_t cores : {1u, 2u, 8u}) {
    const AutoPlanRequest r = request(g, 8, 1100, cores);
    const AutoPlan best = plan_auto(r, mask);
    ASSERT_TRUE(best.plan.feasible);
    EXPECT_LE(best.workers * best.threads_per_worker, cores);
    EXPECT_LE(best.workers, tiles_within_wasm_budget(best.tile, r.network.cost));
    EXPECT_LE(best.plan.activation_bytes, WASM_TILE_ACTIVATION_BUDGET);
    // No other feasible (core, workers, threads) is estimated faster.
    for (uint32_t core = 8; core <= 144; core += 8) {
      const TileConfig cfg{core, 4};
      const TilePlan p = plan_tiled(g, mask, r.network, cfg, cores, Target::Wasm);
      if (!p.feasible) continue;
      for (uint32_t k = 1; k <= cores && k <= tiles_within_wasm_budget(cfg, r.network.cost); ++k)
        for (uint32_t t = 1; k * t <= cores; ++t)
          EXPECT_GE(estimate_tiled_seconds(p.patch_edge, p.tiles_active, k, t, r.speed) * 1.0051, best.estimated_seconds)
              << "core " << core << " k " << k << " t " << t << " beats " << best.explanation;
    }
  }
}

TEST(AutoPlan, BudgetCapsWorkersAndHugePatchesAreNeverChosen) {
  const Geometry g = geometry(256, 256, 176);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.9);
  const AutoPlan a = plan_auto(request(g, 8, 1100, 16), mask);
  EXPECT_LE(a.plan.patch_edge, 128u);  // 131 is the largest edge within 2.5 GB at 1100 B/voxel
  EXPECT_LE(a.workers, tiles_within_wasm_budget(a.tile, TileCost{8, 1100}));
  EXPECT_NE(a.explanation.find("estimated"), std::string::npos) << a.explanation;
  EXPECT_NE(a.explanation.find("core " + std::to_string(a.tile.core)), std::string::npos) << a.explanation;
}

TEST(AutoPlan, UserOverridesAreKeptAndAnInfeasibleCoreIsRefused) {
  const Geometry g = geometry(120, 120, 100);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  AutoPlanRequest r = request(g, 8, 1100, 4);
  r.fixed_core = 40;
  r.fixed_workers = 3;
  const AutoPlan a = plan_auto(r, mask);
  EXPECT_EQ(a.tile.core, 40u);
  EXPECT_EQ(a.workers, 3u);
  EXPECT_EQ(a.threads_per_worker, 1u);
  r.fixed_core = 128;
  r.halo = 8;
  r.fixed_workers = 0;
  try {
    plan_auto(r, mask);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BudgetExceeded);
    EXPECT_NE(std::string(e.what()).find("largest core that fits is 112"), std::string::npos) << e.what();
  }
}

TEST(AutoPlan, SmallVolumesGetPatchesNoLargerThanNeeded) {
  const Geometry g = geometry(20, 24, 16);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const AutoPlan a = plan_auto(request(g, 8, 1100, 2), mask);
  EXPECT_LE(a.plan.patch_edge, 32u);  // 24 + 2·4 = 32 covers the volume in one tile
  EXPECT_GE(a.plan.tiles_active, 1u);
}

TEST(AutoPlan, ExplanationSaysWhenOneTileIsOverTheInFlightBudget) {
  // A 128³ patch at 1120 B/voxel + 76 MB is 2.4 GB: over 1.5 GB in flight, under the 2.5 GB patch limit.
  const Geometry g = geometry(120, 120, 112);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  AutoPlanRequest r = request(g, 8, 1120, 2);
  r.network.cost.fixed_bytes = 76'000'000;
  r.fixed_core = 120;
  const AutoPlan a = plan_auto(r, mask);
  EXPECT_NE(a.explanation.find("over the 1.5 GB in-flight budget, so tiles run one at a time"), std::string::npos)
      << a.explanation;
  EXPECT_EQ(a.workers, 1u);
  r.fixed_core = 24;
  const AutoPlan b = plan_auto(r, mask);
  EXPECT_NE(b.explanation.find("fit the 1.5 GB budget"), std::string::npos) << b.explanation;
}
