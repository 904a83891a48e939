// The inversion entry points (src/inversion.cpp): requests refused before anything runs.
#include "tessera/networks/inversion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support.h"
#include "tessera/common/error.h"
#include "tessera/registry/registry.h"

using namespace tessera;
using namespace tessera::test;

namespace {

// Runs f, which must throw Error(InvalidArgument) naming the empty mask and the fix; returns the message.
template <typename F>
std::string refused_empty_mask(F&& f, const char* what) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << what << ": " << e.what();
    const std::string m = e.what();
    EXPECT_NE(m.find("the mask holds no voxel"), std::string::npos) << what << ": " << m;
    EXPECT_NE(m.find("check the mask file"), std::string::npos) << what << ": " << m;
    return m;
  }
  ADD_FAILURE() << what << ": an all-zero mask was accepted";
  return "";
}

}  // namespace

TEST(Inversion, AllZeroMaskIsRefusedByPlanAndRun) {
  const Geometry g = geometry(24, 20, 16);
  const std::vector<uint8_t> empty(g.voxel_count(), 0);
  std::vector<uint8_t> one(g.voxel_count(), 0);
  one[g.index(12, 10, 8)] = 1;

  InversionRequest r;
  r.geometry = g;
  r.model = &model_spec("demo-unet");
  // Auto-planned, a fixed tile, the whole volume: every plan refuses the empty mask and accepts one voxel.
  r.auto_tile = true;
  const std::string m = refused_empty_mask([&] { plan_inversion(r, empty, Target::Wasm); }, "auto");
  EXPECT_NE(m.find("24×20×16"), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(g.voxel_count())), std::string::npos) << m;
  EXPECT_TRUE(plan_inversion(r, one, Target::Wasm).feasible);
  r.auto_tile = false;
  r.tile = {8, 2};
  refused_empty_mask([&] { plan_inversion(r, empty, Target::Wasm); }, "tiled");
  const TilePlan tiled = plan_inversion(r, one, Target::Wasm);
  ASSERT_TRUE(tiled.feasible) << tiled.message;
  EXPECT_EQ(tiled.tiles_active, 1u);
  // The run path (prepare_run hands the plan back to plan_of_choice): a plan made on a real mask, run on an empty one.
  const PlanChoice c{false, tiled.tile, tiled.workers, tiled.threads_per_worker, tiled.tiles_in_flight, tiled.tiles_total,
                     tiled.tiles_active};
  refused_empty_mask([&] { plan_of_choice(r, empty, c, Target::Wasm); }, "plan_of_choice");
  EXPECT_EQ(plan_of_choice(r, one, c, Target::Wasm).tiles_active, 1u);
  r.whole_volume = true;
  refused_empty_mask([&] { plan_inversion(r, empty, Target::Wasm); }, "whole");

  // A phase network (whole volume only) too.
  InversionRequest p;
  p.geometry = g;
  p.model = &model_spec("iqsm");
  p.auto_tile = true;
  p.phase.te_s = {0.02};
  refused_empty_mask([&] { plan_inversion(p, empty, Target::Wasm); }, "iqsm");

  // No mask given (an empty span) is not an empty mask.
  EXPECT_NO_THROW(validate_mask_not_empty(g, {}));
  EXPECT_NO_THROW(validate_mask_not_empty(g, one));
}

TEST(Inversion, PlanEstimatesWithTheMeasuredSpeedAndSaysSo) {
  const Geometry g = geometry(96, 96, 64);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  InversionRequest r;
  r.geometry = g;
  r.custom = FieldNetwork{TileCost{8, 1100}, {}, PadRule::SmallerHalfLow};
  r.auto_tile = true;
  r.quality = Quality::Fast;
  const TilePlan by_default = plan_inversion(r, mask, Target::Wasm);
  EXPECT_EQ(by_default.estimate_source, "default");

  // A custom network whose graph does a tenth of the default speed's work per voxel: its estimate is its plan's time at
  // the graph's MACs per voxel.
  r.graph_macs_per_voxel = ThroughputModel{}.seconds_per_voxel / kSecondsPerMac / 10;
  const TilePlan by_graph = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(by_graph.feasible) << by_graph.message;
  EXPECT_EQ(by_graph.estimate_source, "graph");
  ThroughputModel graph_speed;
  graph_speed.seconds_per_voxel = r.graph_macs_per_voxel * kSecondsPerMac;
  EXPECT_NEAR(by_graph.estimated_seconds,
              estimate_plan_seconds(by_graph, by_graph.workers, by_graph.threads_per_worker, graph_speed), 1e-6);
  EXPECT_LT(by_graph.estimated_seconds, by_default.estimated_seconds);

  // A registry field network: the graph the request carries, else its registry's work per voxel; a physics loop
  // (several calls per patch) keeps its registry figure.
  r.model = &model_spec("demo-unet");
  ASSERT_GT(r.model->macs_per_voxel, 0);
  EXPECT_EQ(plan_inversion(r, mask, Target::Wasm).estimate_source, "graph");
  r.graph_macs_per_voxel = 0;
  const TilePlan registry = plan_inversion(r, mask, Target::Wasm);
  EXPECT_EQ(registry.estimate_source, "graph");
  graph_speed.seconds_per_voxel = r.model->macs_per_voxel * kSecondsPerMac;
  if (!registry.whole_volume) {
    EXPECT_NEAR(registry.estimated_seconds,
                estimate_plan_seconds(registry, registry.workers, registry.threads_per_worker, graph_speed), 1e-6);
  }
  InversionRequest loop = r;
  loop.model = &model_spec("lpcnn");
  loop.graph_macs_per_voxel = 1e5;
  ASSERT_GT(loop.model->seconds_per_voxel, 0);
  EXPECT_EQ(plan_inversion(loop, mask, Target::Wasm).estimate_source, "registry");

  // A machine ten times slower than the registry's figure: the estimate is the fitted model's for the chosen config.
  r.measured_speed = {{32, 1, 0.2 + 32.0 * 32 * 32 * 4e-4}, {64, 1, 0.2 + 64.0 * 64 * 64 * 4e-4}};
  r.measured_start_seconds = 0.5;
  const TilePlan measured = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(measured.feasible) << measured.message;
  EXPECT_EQ(measured.estimate_source, "measured");
  ThroughputModel base;
  base.worker_start_seconds = 0.5;
  const ThroughputModel fit = fit_throughput(r.measured_speed, base);
  EXPECT_NEAR(fit.seconds_per_voxel, 4e-4, 1e-12);
  ASSERT_FALSE(measured.whole_volume);
  EXPECT_NEAR(measured.estimated_seconds,
              estimate_plan_seconds(measured, measured.workers, measured.threads_per_worker, fit), 1e-6);
  EXPECT_GT(measured.estimated_seconds, registry.estimated_seconds);

  // Unusable points are refused by name, not planned with.
  r.measured_speed = {{32, 1, 0.5}};
  EXPECT_THROW(plan_inversion(r, mask, Target::Wasm), Error);
}

TEST(Inversion, PhysicsLoopsAutoPlanTheWholeVolumeWhenItFits) {
  const Geometry g = geometry(96, 96, 80);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.8);
  for (const char* id : {"lpcnn", "modl-qsm"}) {
    InversionRequest r;
    r.model = &model_spec(id);
    r.geometry = g;
    r.auto_tile = true;
    r.hardware_threads = 2;
    const TilePlan p = plan_inversion(r, mask, Target::Wasm);
    EXPECT_TRUE(p.feasible && p.whole_volume) << id << ": " << p.explanation;
    // A core the user fixes is still obeyed (the loop per patch, off-design, as before).
    r.fixed_core = 32;
    const TilePlan t = plan_inversion(r, mask, Target::Wasm);
    EXPECT_FALSE(t.whole_volume) << id;
    EXPECT_EQ(t.tile.core, 32u) << id;
  }
}

TEST(Inversion, EveryPlanStatesTheThreadsItsWorkersRun) {
  const Geometry g = geometry(24, 20, 16);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  InversionRequest r;
  r.geometry = g;
  r.model = &model_spec("demo-unet");
  r.tile.core = 8;
  r.tile.halo = 4;
  r.tile_given = true;
  // A fixed tile and the whole volume: the schema's default, or the request's threads.
  EXPECT_EQ(plan_inversion(r, mask, Target::Wasm).threads_per_worker, defaults::kThreadsPerWorker);
  r.whole_volume = true;
  EXPECT_EQ(plan_inversion(r, mask, Target::Wasm).threads_per_worker, defaults::kThreadsPerWorker);
  r.fixed_threads = 3;
  EXPECT_EQ(plan_inversion(r, mask, Target::Wasm).threads_per_worker, 3u);
  r.whole_volume = false;
  EXPECT_EQ(plan_inversion(r, mask, Target::Wasm).threads_per_worker, 3u);
}
