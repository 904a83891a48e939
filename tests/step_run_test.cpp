#include "engine/step_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "support.h"
#include "tessera/engine/crop.h"
#include "tessera/common/error.h"
#include "tessera/networks/inversion.h"

using namespace tessera;
using namespace tessera::test;

namespace {

FieldNetwork conv_network(uint32_t divisor) {
  FieldNetwork n{TileCost{divisor, 1100}, Normalization{}, PadRule::SmallerHalfLow};
  n.norm.input_mean = 0.25;
  n.norm.input_std = 2.0;
  n.norm.output_scale = 0.5;
  n.norm.output_offset = 0.125;
  return n;
}

// Drives a StepRun like the JavaScript pool: takes patches while it may, finishes them in a shuffled order
// (seeded), and checks the in-flight cap on the way.
RunReport drive(StepRun& run, PatchRunner& net, uint64_t seed, uint32_t cap) {
  std::mt19937_64 rng(seed);
  std::map<uint64_t, std::vector<float>> out;  // job -> output, not yet handed back
  while (!run.finished()) {
    for (;;) {
      std::vector<float> input(run.input_shape().size());
      const auto patch = run.next(input);
      if (!patch) break;
      // A shrunk patch comes in the run's own buffer, with its shape.
      out[patch->job] = patch->input.empty() ? net.run(input, run.input_shape()) : net.run(patch->input, patch->shape);
      EXPECT_LE(run.in_flight(), cap);
    }
    if (out.empty()) break;
    auto it = out.begin();
    std::advance(it, static_cast<long>(rng() % out.size()));
    run.finish(it->first, it->second);
    out.erase(it);
  }
  return run.report();
}

// The plan with every patch back where make_tile_grid places it before shrinking, at the common edge: the grid of an
// all-ones mask (a full core keeps its patch's start), the plan's tiles skipped as they were.
TilePlan unshrunk(const TilePlan& plan, const Geometry& g, const FieldNetwork& net) {
  TilePlan full = plan;
  const std::vector<uint8_t> ones(g.voxel_count(), 1);
  const TileGrid grid = make_tile_grid(g, ones, plan.tile, net.cost.divisor, whole_volume_shape(g, net).pad_low);
  for (size_t i = 0; i < full.grid.tiles.size(); ++i) {
    full.grid.tiles[i].patch_lo = grid.tiles[i].patch_lo;
    full.grid.tiles[i].patch_dims = {0, 0, 0};
  }
  return full;
}

}  // namespace

TEST(StepRun, AShrunkPatchGivesTheUnshrunkChiWhereTheNetworkLooksNoFurtherThanTheHalo) {
  const Geometry g = geometry(31, 27, 21);
  const std::vector<float> field = random_field(g, 13);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.7);
  const FieldNetwork net = conv_network(4);
  // Halo = the least reach a shrunk patch keeps: the shrunk patches keep exactly the halo.
  constexpr uint32_t kHalo = kShrinkReach;
  for (const TileConfig& cfg : {TileConfig{10, kHalo}, TileConfig{12, kHalo, 6, Blend::Cosine}}) {
    const TilePlan plan = plan_tiled(g, mask, net, cfg, 3, Target::Native);
    ASSERT_TRUE(plan.feasible) << plan.message;
    uint64_t shrunk = 0;
    for (const Tile& t : plan.grid.tiles) shrunk += !t.skipped && t.patch_dims != plan.patch_dims ? 1 : 0;
    ASSERT_GT(shrunk, plan.tiles_active / 4) << "the mask leaves the patches whole: nothing to compare";
    const TilePlan full = unshrunk(plan, g, net);
    for (int radius : {int{kHalo}, int{kHalo} + 1}) {
      ReferenceConvRunner conv(radius);
      std::vector<float> cut(g.voxel_count()), whole(g.voxel_count());
      StepRun a(g, field, mask, net, plan, 1, cut);
      EXPECT_EQ(drive(a, conv, 5, plan.tiles_in_flight).tiles_run, plan.tiles_active);
      StepRun b(g, field, mask, net, full, 1, whole);
      drive(b, conv, 5, full.tiles_in_flight);
      const bool same = std::memcmp(cut.data(), whole.data(), cut.size() * sizeof(float)) == 0;
      // Radius = the halo: every output reads only inputs the shrunk patch holds. One more reads past it.
      EXPECT_EQ(same, radius <= int{kHalo}) << "core " << cfg.core << " stride " << cfg.stride << " radius " << radius;
      if (radius == int{kHalo}) {
        // The threaded driver hands the run's own buffers to its threads: the same χ.
        std::vector<float> threaded(g.voxel_count());
        tiled_field_inversion(g, field, mask, net, cfg, conv, threads(3), threaded);
        EXPECT_EQ(std::memcmp(cut.data(), threaded.data(), cut.size() * sizeof(float)), 0) << "core " << cfg.core;
      }
    }
  }
}

TEST(StepRun, AShrunkPatchsOutputIsCheckedAgainstItsOwnShape) {
  const Geometry g = geometry(41, 35, 27);
  const std::vector<float> field = random_field(g, 13);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.7);
  const FieldNetwork net = conv_network(4);
  const TilePlan plan = plan_tiled(g, mask, net, {10, 3}, 1, Target::Native);
  std::vector<float> chi(g.voxel_count());
  StepRun run(g, field, mask, net, plan, 1, chi);
  std::vector<float> input(run.input_shape().size());
  for (;;) {
    const auto p = run.next(input);
    ASSERT_TRUE(p) << "no shrunk patch in this plan";
    if (p->input.empty()) {
      run.finish(p->job, std::vector<float>(input.size()));
      continue;
    }
    EXPECT_LT(p->shape.size(), run.input_shape().size());
    run.finish(p->job, std::vector<float>(run.input_shape().size()));  // the common patch's size: wrong for this one
    ASSERT_TRUE(run.finished());
    const std::string m = error_of([&] { run.report(); }, ErrorCode::RunnerFailed);
    EXPECT_NE(m.find(tile_text(plan.grid.tiles[p->tile])), std::string::npos) << m;
    EXPECT_NE(m.find("expected " + std::to_string(p->shape.size())), std::string::npos) << m;
    break;
  }
}

TEST(StepRun, EqualsTheThreadedDriverBitForBitInAnyCompletionOrder) {
  const Geometry g = geometry(37, 29, 22);
  const std::vector<float> field = random_field(g, 11);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.9);
  const FieldNetwork net = conv_network(4);
  ReferenceConvRunner conv(2);
  std::vector<float> threaded(g.voxel_count());
  tiled_field_inversion(g, field, mask, net, {10, 3}, conv, threads(3), threaded);

  const TilePlan plan = plan_tiled(g, mask, net, {10, 3}, 3, Target::Native);
  ASSERT_TRUE(plan.feasible);
  ASSERT_GT(plan.tiles_skipped, 0u);
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<float> chi(g.voxel_count(), 7.0f);
    StepRun run(g, field, mask, net, plan, 1, chi);
    EXPECT_EQ(run.input_shape().dims, (std::array<uint64_t, 3>{16, 16, 16}));
    const RunReport r = drive(run, conv, seed, plan.tiles_in_flight);
    EXPECT_EQ(r.tiles_run, plan.tiles_active);
    EXPECT_EQ(r.tiles_total, plan.tiles_total);
    EXPECT_EQ(r.tiles_skipped, plan.tiles_skipped);
    EXPECT_EQ(r.max_in_flight, plan.tiles_in_flight);
    EXPECT_EQ(std::memcmp(chi.data(), threaded.data(), chi.size() * sizeof(float)), 0) << "seed " << seed;
  }
}

TEST(StepRun, HandsOutNoMoreThanThePlansTilesInFlight) {
  const Geometry g = geometry(64, 64, 64);
  const std::vector<float> field = random_field(g, 2);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const FieldNetwork net = conv_network(8);
  TilePlan plan = plan_tiled(g, mask, net, {24, 4}, 2, Target::Wasm);
  ASSERT_EQ(plan.tiles_in_flight, 2u);
  std::vector<float> chi(g.voxel_count());
  StepRun run(g, field, mask, net, plan, 1, chi);
  std::vector<float> input(run.input_shape().size());
  const auto a = run.next(input);
  const auto b = run.next(input);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(run.next(input)) << "a third patch while two are out";
  EXPECT_EQ(run.in_flight(), 2u);
  run.finish(b->job, std::vector<float>(input.size()));
  EXPECT_TRUE(run.next(input)) << "a finished patch frees its slot at once";
  EXPECT_EQ(a->tile, 0u);
  EXPECT_EQ(b->tile, 1u);
}

TEST(StepRun, WholeVolumePlanIsOneStepEqualToTheWholeVolumeDriver) {
  const Geometry g = geometry(21, 18, 11);
  const std::vector<float> field = random_field(g, 5);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 1.0);
  for (PadRule rule : {PadRule::SmallerHalfLow, PadRule::LargerHalfLow}) {
    FieldNetwork net = conv_network(8);
    net.pad = rule;
    ReferenceConvRunner conv(1);
    std::vector<float> expected(g.voxel_count()), chi(g.voxel_count());
    whole_volume_inversion(g, field, mask, net, conv, threads(1), expected);
    const TilePlan plan = plan_whole(g, net, Target::Wasm);
    StepRun run(g, field, mask, net, plan, 1, chi);
    EXPECT_EQ(run.input_shape().dims, (std::array<uint64_t, 3>{24, 24, 16}));
    const RunReport r = drive(run, conv, 1, 1);
    EXPECT_EQ(r.tiles_run, 1u);
    EXPECT_EQ(std::memcmp(chi.data(), expected.data(), chi.size() * sizeof(float)), 0);
  }
}

TEST(StepRun, AWrongOutputOrAFailureStopsTheRunNamingTheTile) {
  const Geometry g = geometry(40, 40, 40);
  const std::vector<float> field = random_field(g, 3);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const FieldNetwork net = conv_network(1);
  const TilePlan plan = plan_tiled(g, mask, net, {20, 2}, 2, Target::Native);
  std::vector<float> chi(g.voxel_count());
  {
    StepRun run(g, field, mask, net, plan, 1, chi);
    std::vector<float> input(run.input_shape().size());
    const auto a = run.next(input);
    const auto b = run.next(input);
    run.finish(a->job, std::vector<float>(5));
    EXPECT_FALSE(run.next(input)) << "no new patch after a failure";
    EXPECT_FALSE(run.finished()) << "b is still out";
    run.finish(b->job, input);
    ASSERT_TRUE(run.finished());
    const std::string m = error_of([&] { run.report(); }, ErrorCode::RunnerFailed);
    EXPECT_NE(m.find("tile 0 (core x 0-20, y 0-20, z 0-20)"), std::string::npos) << m;
    EXPECT_NE(m.find("returned 5 values, expected 13824"), std::string::npos) << m;
  }
  {
    StepRun run(g, field, mask, net, plan, 1, chi);
    std::vector<float> input(run.input_shape().size());
    const auto a = run.next(input);
    run.fail(a->job, ErrorCode::RunnerFailed, "the worker ran out of memory");
    ASSERT_TRUE(run.finished());
    const std::string m = error_of([&] { run.report(); }, ErrorCode::RunnerFailed);
    EXPECT_NE(m.find("tile 0 (core x 0-20, y 0-20, z 0-20): the worker ran out of memory"), std::string::npos) << m;
  }
  {
    StepRun run(g, field, mask, net, plan, 1, chi);
    std::vector<float> input(run.input_shape().size());
    const auto a = run.next(input);
    run.cancel();
    EXPECT_FALSE(run.next(input));
    run.finish(a->job, input);
    const std::string m = error_of([&] { run.report(); }, ErrorCode::Cancelled);
    EXPECT_NE(m.find("cancelled after 1 of 8 tiles"), std::string::npos) << m;
  }
}

TEST(StepRun, RefusesAPlanThatIsNotForThisVolume) {
  const Geometry g = geometry(40, 40, 40);
  const std::vector<float> field = random_field(g, 3);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const FieldNetwork net = conv_network(1);
  const Geometry og = geometry(40, 40, 30);
  const TilePlan other = plan_tiled(og, std::vector<uint8_t>(og.voxel_count(), 1), net, {20, 2}, 2, Target::Native);
  std::vector<float> chi(g.voxel_count());
  error_of([&] { StepRun run(g, field, mask, net, other, 1, chi); }, ErrorCode::InvalidArgument);
  TilePlan refused = plan_tiled(g, mask, net, {0, 2}, 2, Target::Native);
  error_of([&] { StepRun run(g, field, mask, net, refused, 1, chi); }, ErrorCode::BudgetExceeded);
  std::vector<float> bad = field;
  bad[100] = std::numeric_limits<float>::quiet_NaN();
  const TilePlan plan = plan_tiled(g, mask, net, {20, 2}, 2, Target::Native);
  error_of([&] { StepRun run(g, bad, mask, net, plan, 1, chi); }, ErrorCode::NonFiniteInput);
}

TEST(StepRun, APlanHandedBackIsObeyedOrRefused) {
  const Geometry g = geometry(96, 96, 80);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.8);
  InversionRequest r;
  r.geometry = g;
  r.custom = conv_network(8);
  r.auto_tile = true;
  r.hardware_threads = 2;
  r.fixed_workers = 2;  // two workers asked for: a tiling (the mask's box as one patch runs on one)
  const TilePlan chosen = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(chosen.feasible) << chosen.message;
  ASSERT_FALSE(chosen.whole_volume) << chosen.explanation;
  PlanChoice c{false, chosen.tile, chosen.workers, chosen.threads_per_worker, chosen.tiles_in_flight, chosen.tiles_total,
               chosen.tiles_active};
  const TilePlan obeyed = plan_of_choice(r, mask, c, Target::Wasm);
  EXPECT_EQ(obeyed.tile.core, chosen.tile.core);
  EXPECT_EQ(obeyed.tiles_in_flight, chosen.tiles_in_flight);
  EXPECT_EQ(obeyed.grid.tiles.size(), chosen.grid.tiles.size());

  // Fewer tiles in flight than the budget allows: obeyed; more: refused.
  if (chosen.tiles_in_flight > 1) {
    PlanChoice fewer = c;
    fewer.tiles_in_flight = 1;
    EXPECT_EQ(plan_of_choice(r, mask, fewer, Target::Wasm).tiles_in_flight, 1u);
  }
  PlanChoice greedy = c;
  greedy.tiles_in_flight = 99;
  EXPECT_NE(error_of([&] { plan_of_choice(r, mask, greedy, Target::Wasm); }, ErrorCode::InvalidArgument)
                .find("at most"),
            std::string::npos);
  // Made for another mask: the counts differ.
  PlanChoice fixed{false, {24, 4}, 2, 1, 2, 0, 0};
  const TilePlan p24 = plan_tiled(g, mask, r.custom, fixed.tile, 2, Target::Wasm);
  fixed.tiles_total = p24.tiles_total;
  fixed.tiles_active = p24.tiles_active;
  EXPECT_EQ(plan_of_choice(r, mask, fixed, Target::Wasm).tiles_active, p24.tiles_active);
  std::vector<uint8_t> corner(g.voxel_count(), 0);
  corner[0] = 1;
  EXPECT_NE(error_of([&] { plan_of_choice(r, corner, fixed, Target::Wasm); }, ErrorCode::InvalidArgument).find("plan again"),
            std::string::npos);
}
