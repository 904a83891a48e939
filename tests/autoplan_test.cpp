#include "tessera/engine/autoplan.h"
#include "tessera/engine/tiling.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "support.h"
#include "tessera/common/error.h"

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
  r.quality = Quality::Fast;  // the speed-only planner; the fidelity-first one is tested below
  return r;
}

AutoPlanRequest faithful(const Geometry& g, uint64_t bpv, uint32_t radius) {
  AutoPlanRequest r = request(g, 8, bpv, 2);
  r.quality = Quality::Faithful;
  r.network.context = dipole_context_profile(radius);
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
    // Tiles in flight within the 1.5 GB budget, or one tile at a time under the 2.5 GB single-patch limit.
    EXPECT_TRUE(best.plan.activation_bytes <= WASM_TILE_ACTIVATION_BUDGET ||
                (best.workers == 1 && best.plan.activation_bytes == best.plan.bytes_per_tile &&
                 best.plan.bytes_per_tile <= WASM_MAX_PATCH_ACTIVATION_BYTES))
        << best.explanation;
    // No other feasible (core, workers, threads) is estimated faster.
    for (uint32_t core = 8; core <= 144; core += 8) {
      const TileConfig cfg{core, 4};
      const TilePlan p = plan_tiled(g, mask, r.network, cfg, cores, Target::Wasm);
      if (!p.feasible) continue;
      for (uint32_t k = 1; k <= cores && k <= tiles_within_wasm_budget(cfg, r.network.cost); ++k)
        for (uint32_t t = 1; k * t <= cores; ++t)
          EXPECT_GE(estimate_plan_seconds(p, k, t, r.speed) * 1.0051, best.estimated_seconds)
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

TEST(AutoPlan, AFieldOfViewOverTheLimitIsCutIntoSlabsLikeACropBox) {
  // A long-reach network (radius 117) at 1,100 B/voxel with no crop box (crop off, or a margin that reaches the
  // volume's faces): nothing meets the faithful target, and the most faithful cubic tiling runs hundreds of patches.
  const Geometry g = geometry(160, 160, 128);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.85);
  AutoPlanRequest r = faithful(g, 1100, 117);
  r.network.cost.divisor = 16;
  const AutoPlan tiles = plan_auto(r, mask);
  ASSERT_TRUE(tiles.plan.feasible);
  EXPECT_EQ(tiles.plan.crop.split.pieces, 1u);
  // A field → χ network's field of view is cut into slabs as a crop box is: a few patches, each within the limit.
  r.view_slabs = true;
  const AutoPlan slabs = plan_auto(r, mask);
  ASSERT_TRUE(slabs.plan.feasible) << slabs.plan.message;
  EXPECT_FALSE(slabs.warning.empty());  // still short of the target, and it says so
  EXPECT_GE(slabs.plan.crop.split.pieces, 2u) << slabs.explanation;
  EXPECT_EQ(slabs.plan.crop.lo, (Dims3{0, 0, 0}));
  EXPECT_EQ(slabs.plan.crop.hi, g.dims);
  EXPECT_LE(slabs.plan.bytes_per_tile, WASM_MAX_PATCH_ACTIVATION_BYTES);
  EXPECT_LT(slabs.plan.tiles_active, tiles.plan.tiles_active / 10) << tiles.explanation;
  EXPECT_LT(slabs.estimated_seconds, tiles.estimated_seconds / 10);
  EXPECT_LE(slabs.plan.fidelity.nrmse, tiles.plan.fidelity.nrmse);  // chosen as the more faithful
  EXPECT_NE(slabs.explanation.find("the whole field of view"), std::string::npos) << slabs.explanation;
}

TEST(AutoPlan, FaithfulChoiceMeetsTheTargetAndNoFaithfulTilingIsEstimatedFaster) {
  const Geometry g = geometry(144, 160, 128);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.85);
  const AutoPlanRequest r = faithful(g, 1100, 40);  // 1100 B/voxel: the whole volume (3.2 GB) does not fit
  const AutoPlan a = plan_auto(r, mask);
  ASSERT_FALSE(a.whole_volume);
  ASSERT_TRUE(a.plan.feasible && a.plan.fidelity_known);
  EXPECT_TRUE(a.warning.empty()) << a.warning;
  const FidelityTarget t = fidelity_target(Quality::Faithful);
  EXPECT_LE(a.plan.fidelity.nrmse, t.max_nrmse * kFidelityMargin);
  EXPECT_GE(a.plan.fidelity.r, t.min_r);
  EXPECT_NE(a.explanation.find("predicted r"), std::string::npos) << a.explanation;
  EXPECT_NE(a.explanation.find("faithful target r ≥ 0.99, NRMSE ≤ 0.10"), std::string::npos) << a.explanation;
  // No crop or half-stride cosine tiling on the pooling grid that meets the target (with the margin) is estimated
  // faster.
  const FidelityModel model(g, mask, r.network.context);
  // Crop-and-stitch at the network's default halo 4 and core 72 (the former default) misses the target here.
  EXPECT_GT(plan_tiled(g, mask, r.network, {72, 4}, 2, Target::Wasm, &model).fidelity.nrmse, t.max_nrmse);
  for (uint32_t P = 16; P <= 128; P += 8)
    for (uint32_t h = 0; 2 * h + 8 <= P; h += 4)
      for (uint32_t half : {0u, 1u}) {
        const uint32_t core = P - 2 * h;
        const uint32_t stride = half ? core / 2 / 8 * 8 : 0;
        if (half && stride == 0) continue;
        const TileConfig cfg{core, h, stride, half ? Blend::Cosine : Blend::Crop};
        if (!on_pooling_grid(g, cfg, 8, Dims3{0, 0, 0})) continue;  // the planner's candidates sit on the grid
        const TilePlan p = plan_tiled(g, mask, r.network, cfg, 2, Target::Wasm, &model);
        if (!p.feasible || p.fidelity.nrmse > t.max_nrmse * kFidelityMargin) continue;
        for (uint32_t k = 1; k <= 2 && k <= tiles_within_wasm_budget(cfg, r.network.cost); ++k)
          for (uint32_t th = 1; k * th <= 2; ++th)
            EXPECT_GE(estimate_plan_seconds(p, k, th, r.speed) * 1.0051, a.estimated_seconds)
                << "core " << core << " halo " << h << (half ? " half stride" : "") << " beats " << a.explanation;
      }
}

TEST(AutoPlan, TheWholeVolumeWhenItFitsAndIsNoSlower) {
  const Geometry g = geometry(64, 72, 56);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.9);
  const AutoPlan a = plan_auto(faithful(g, 300, 40), mask);
  EXPECT_TRUE(a.whole_volume);
  EXPECT_TRUE(a.plan.whole_volume && a.plan.feasible);
  EXPECT_EQ(a.plan.fidelity.nrmse, 0.0);
  EXPECT_EQ(a.workers, 1u);
  EXPECT_NE(a.explanation.find("the whole volume (64×72×56"), std::string::npos) << a.explanation;
}

TEST(AutoPlan, WhenNothingFitsTheTargetTheMostFaithfulConfigRunsWithAWarning) {
  const Geometry g = geometry(96, 96, 96);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.9);
  // 40 kB/voxel: the largest patch within 2.5 GB is 39³ (32³ at divisor 8), far short of a 100-voxel radius.
  const AutoPlan a = plan_auto(faithful(g, 40000, 100), mask);
  EXPECT_FALSE(a.warning.empty());
  EXPECT_NE(a.warning.find("no tiling within the memory budget reaches the faithful target"), std::string::npos) << a.warning;
  EXPECT_LE(a.plan.patch_edge, 32u);
  // It is the most faithful of what fits: no crop tiling of a fitting patch on the pooling grid is predicted better.
  const FidelityModel model(g, mask, dipole_context_profile(100));
  int checked = 0;
  for (uint32_t P : {16u, 24u, 32u})
    for (uint32_t h = 0; 2 * h + 8 <= P; h += 2) {
      const TileConfig cfg{P - 2 * h, h};
      if (!on_pooling_grid(g, cfg, 8, Dims3{0, 0, 0})) continue;
      ++checked;
      EXPECT_GE(model.predict(cfg, P).nrmse * 1.001, a.plan.fidelity.nrmse) << P << " " << h;
    }
  EXPECT_GT(checked, 3);
  EXPECT_EQ(a.plan.grid.misaligned, 0u);
}

TEST(AutoPlan, AnUnknownReceptiveFieldIsAssumedAndSaid) {
  const Geometry g = geometry(80, 80, 80);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.9);
  AutoPlanRequest r = faithful(g, 6000, 40);  // the whole volume does not fit
  r.network.context = ContextProfile{};
  const AutoPlan a = plan_auto(r, mask);
  EXPECT_NE(a.explanation.find("receptive field is unknown: assumed 64 voxels"), std::string::npos) << a.explanation;
}

TEST(AutoPlan, AUserHaloIsKeptAndBalancedIsNoSlowerThanFaithful) {
  const Geometry g = geometry(144, 160, 128);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.85);
  AutoPlanRequest r = faithful(g, 1100, 40);
  r.halo = 12;
  r.fixed_halo = true;
  const AutoPlan fixed = plan_auto(r, mask);
  EXPECT_EQ(fixed.tile.halo, 12u);
  AutoPlanRequest b = faithful(g, 1100, 40);
  const AutoPlan faithful_plan = plan_auto(b, mask);
  b.quality = Quality::Balanced;
  const AutoPlan balanced = plan_auto(b, mask);
  EXPECT_LE(balanced.estimated_seconds, faithful_plan.estimated_seconds);
  EXPECT_LE(balanced.plan.fidelity.nrmse, fidelity_target(Quality::Balanced).max_nrmse);
  EXPECT_EQ(quality_from_name("balanced"), Quality::Balanced);
  EXPECT_THROW(quality_from_name("best"), Error);
}

TEST(AutoPlan, ThroughputFitIsExactOnPointsOfTheModel) {
  ThroughputModel truth;
  truth.seconds_per_voxel = 2.5e-6;
  truth.per_tile_seconds = 0.12;
  truth.parallel_fraction = 0.8;
  truth.worker_start_seconds = 1.7;
  ThroughputModel base;
  base.parallel_fraction = 0.8;
  base.worker_start_seconds = 1.7;
  // Points of the model at two edges on 2 threads and one on 1 thread: one tile, one worker, no start-up.
  ThroughputModel no_start = truth;
  no_start.worker_start_seconds = 0;
  std::vector<SpeedPoint> points;
  for (auto [edge, threads] : {std::pair<uint64_t, uint32_t>{32, 2}, {48, 2}, {64, 1}}) {
    points.push_back(SpeedPoint{edge, threads, estimate_tiled_seconds(edge, 1, 1, threads, no_start)});
  }
  const ThroughputModel fit = fit_throughput(points, base);
  EXPECT_NEAR(fit.seconds_per_voxel, truth.seconds_per_voxel, 1e-12);
  EXPECT_NEAR(fit.per_tile_seconds, truth.per_tile_seconds, 1e-9);
  EXPECT_DOUBLE_EQ(fit.parallel_fraction, 0.8);
  EXPECT_DOUBLE_EQ(fit.worker_start_seconds, 1.7);
  EXPECT_NEAR(estimate_tiled_seconds(96, 10, 2, 1, fit), estimate_tiled_seconds(96, 10, 2, 1, truth), 1e-9);
}

TEST(AutoPlan, ThroughputFitRefusesPointsItCannotUse) {
  const ThroughputModel base;
  auto refused = [&](std::vector<SpeedPoint> points, const char* words) {
    try {
      fit_throughput(points, base);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused({}, "at least two sizes");
  refused({{32, 1, 0.5}, {32, 1, 0.6}}, "at least two sizes");
  refused({{32, 1, 0.5}, {64, 1, 0.0}}, "not a measurement");
  refused({{32, 0, 0.5}, {64, 1, 1.0}}, "not a measurement");
  refused({{32, 1, 2.0}, {64, 1, 1.0}}, "do not grow with the patch size");
  // A negative intercept (noise) is no fixed cost: the slope through the origin.
  const ThroughputModel m = fit_throughput(std::vector<SpeedPoint>{{32, 1, 0.1}, {64, 1, 1.0}}, base);
  EXPECT_EQ(m.per_tile_seconds, 0.0);
  EXPECT_GT(m.seconds_per_voxel, 0.0);
  EXPECT_STREQ(speed_source_name(SpeedSource::Measured), "measured");
}

TEST(AutoPlan, SpeedProbeEdgesAreAFewPercentOfTheRun) {
  // Not sized to a run: the edges near 32 and 64, on the divisor.
  EXPECT_EQ(speed_probe_edges(0, 8, 400).small, 32u);
  EXPECT_EQ(speed_probe_edges(0, 8, 400).large, 64u);
  EXPECT_EQ(speed_probe_edges(0, 48, 400).small, 48u);
  EXPECT_EQ(speed_probe_edges(0, 48, 400).large, 96u);
  // Sized to runs from a small box to several slabs: on the divisor, the larger patch at most 2 % of the run's voxels
  // (32³ at the least, 64³ at the most), the smaller about half of it.
  for (uint32_t divisor : {1u, 8u, 16u}) {
    for (uint64_t voxels : {100'000ull, 2'064'384ull, 3'244'032ull, 8'257'536ull, 400'000'000ull}) {
      const SpeedProbeEdges e = speed_probe_edges(voxels, divisor, 400);
      EXPECT_EQ(e.small % divisor, 0u);
      EXPECT_EQ(e.large % divisor, 0u);
      EXPECT_LT(e.small, e.large);
      EXPECT_GE(e.large, 32u);
      EXPECT_LE(e.large, 64u);
      const double share = static_cast<double>(e.large * e.large * e.large) / static_cast<double>(voxels);
      if (e.large > 32) EXPECT_LE(share, kSpeedProbeShare) << voxels << " voxels, divisor " << divisor;
      EXPECT_LE(e.small, (e.large + divisor) / 2 + divisor);
    }
  }
  // The demo's mask box at 160×160×128 (128×144×112 voxels): 32³ and 16³, 1.6 % and 0.2 % of the run.
  EXPECT_EQ(speed_probe_edges(128ull * 144 * 112, 8, 400).large, 32u);
  EXPECT_EQ(speed_probe_edges(128ull * 144 * 112, 8, 400).small, 16u);
  // The single-patch limit caps the larger edge; below two edges the probe is refused with the edges it needs.
  EXPECT_EQ(speed_probe_edges(8'257'536, 8, 40).large, 40u);
  try {
    speed_probe_edges(2'000'000, 8, 16);
    ADD_FAILURE() << "a limit of 16³ gave two edges";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BudgetExceeded);
    EXPECT_NE(std::string(e.what()).find("needs patches of 16³ and larger, but the single-patch limit allows 16³"), std::string::npos) << e.what();
  }
}

TEST(AutoPlan, APhysicsLoopRunsWholeWhenItFits) {
  // 160×160×128 at 440 B/voxel (LPCNN-like): 1.44 GB whole fits the single-patch limit; the speed-only planner (the
  // physics loops' quality) takes a crop-and-stitch tiling, but tiled the loop is off-design.
  const Geometry g = geometry(160, 160, 128);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.8);
  AutoPlanRequest r = request(g, 8, 440, 2);
  const AutoPlan fastest = plan_auto(r, mask);
  ASSERT_FALSE(fastest.whole_volume) << fastest.explanation;
  r.whole_when_fits = true;
  const AutoPlan a = plan_auto(r, mask);
  EXPECT_TRUE(a.whole_volume && a.plan.feasible);
  EXPECT_EQ(a.workers, 1u);
  EXPECT_EQ(a.threads_per_worker, 2u);
  EXPECT_GT(a.estimated_seconds, 0.0);
  EXPECT_NE(a.explanation.find("off-design"), std::string::npos) << a.explanation;
  // Too large to run whole: the fastest tiling, as before.
  r.network.cost.bytes_per_voxel = 4000;
  const AutoPlan big = plan_auto(r, mask);
  EXPECT_FALSE(big.whole_volume);
  EXPECT_TRUE(big.plan.feasible);
}
