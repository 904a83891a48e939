#include "tessera/engine/crop.h"

#include <gtest/gtest.h>

#include <cstring>

#include "engine/step_run.h"
#include "support.h"
#include "tessera/common/error.h"
#include "tessera/networks/inversion.h"

using namespace tessera;
using namespace tessera::test;

namespace {

FieldNetwork masked_network(uint32_t divisor, PadRule rule = PadRule::SmallerHalfLow) {
  FieldNetwork n{TileCost{divisor, 100}, Normalization{}, rule};
  n.masked_input = true;
  return n;
}

// An automatic plan's request for a masked network of divisor 8 at this cost and theoretical reach.
InversionRequest auto_request(const Geometry& g, uint64_t bytes_per_voxel, uint32_t radius) {
  InversionRequest r;
  r.geometry = g;
  r.custom = masked_network(8);
  r.custom.cost.bytes_per_voxel = bytes_per_voxel;
  r.custom.context = dipole_context_profile(radius);
  r.auto_tile = true;
  return r;
}

RunReport drive_crop(StepRun& run, PatchRunner& net) {
  while (!run.finished()) {
    std::vector<float> input(run.input_shape().size());
    const auto patch = run.next(input);
    if (!patch) break;
    run.finish(patch->job, net.run(input, run.input_shape()));
  }
  return run.report();
}

}  // namespace

TEST(Crop, BoxHoldsTheMaskAndMarginOnTheWholeRunsPoolingGrid) {
  // 45×38×30 pads to 48×40×32 with divisor 8; the whole run's grid starts at -pad_low.
  const Geometry g = geometry(45, 38, 30);
  const Dims3 lo{13, 9, 11}, hi{27, 20, 19};
  const std::vector<uint8_t> mask = box_mask(g, lo, hi);
  for (PadRule rule : {PadRule::SmallerHalfLow, PadRule::LargerHalfLow}) {
    const FieldNetwork net = masked_network(8, rule);
    const WholeVolumeShape s = whole_volume_shape(g, net);
    for (uint32_t margin : {0u, 3u, 8u}) {
      const CropBox c = crop_to_support(g, mask, net, margin);
      ASSERT_TRUE(c.cropped) << margin;
      for (int a = 0; a < 3; ++a) {
        EXPECT_EQ((c.patch_lo[a] + s.pad_low[a]) % 8, 0) << "axis " << a << " margin " << margin;
        EXPECT_EQ(c.patch_dims[a] % 8, 0u);
        EXPECT_LE(c.patch_lo[a], lo[a] - static_cast<int64_t>(margin) < -s.pad_low[a] ? -s.pad_low[a] : lo[a] - static_cast<int64_t>(margin));
        EXPECT_GE(c.patch_lo[a] + static_cast<int64_t>(c.patch_dims[a]), std::min<int64_t>(hi[a] + margin, g.dims[a]));
        // The smallest such box: one divisor less on either side would cut into the mask + margin.
        EXPECT_GT(c.patch_lo[a] + 8, lo[a] - static_cast<int64_t>(margin));
        EXPECT_LT(c.patch_lo[a] + static_cast<int64_t>(c.patch_dims[a]) - 8, hi[a] + static_cast<int64_t>(margin));
        EXPECT_EQ(c.lo[a], std::max<int64_t>(0, c.patch_lo[a]));
        EXPECT_EQ(c.hi[a], std::min<int64_t>(g.dims[a], c.patch_lo[a] + static_cast<int64_t>(c.patch_dims[a])));
      }
      EXPECT_NO_THROW(validate_crop(g, mask, net, c));
    }
  }
  // A mask reaching every face: the whole padded volume, not a crop.
  const std::vector<uint8_t> full(g.voxel_count(), 1);
  EXPECT_FALSE(crop_to_support(g, full, masked_network(8)).cropped);
}

TEST(Crop, ANetworkReadingItsFieldUnmaskedKeepsEveryNonZeroInput) {
  const Geometry g = geometry(64, 64, 48);
  const std::vector<uint8_t> mask = box_mask(g, {24, 24, 16}, {40, 40, 32});
  std::vector<float> field(g.voxel_count(), 0.0f);
  field[g.index(2, 30, 20)] = 0.1f;  // outside the mask, far from it
  FieldNetwork unmasked = masked_network(8);
  unmasked.masked_input = false;
  const CropBox by_mask = crop_to_support(g, mask, unmasked, 8);
  const CropBox by_field = crop_to_support(g, mask, unmasked, 8, field);
  EXPECT_GT(by_mask.lo[0], 2);
  EXPECT_EQ(by_field.lo[0], 0);
  EXPECT_EQ(input_voxels_outside(g, field, mask, unmasked, by_mask), 1u);
  EXPECT_EQ(input_voxels_outside(g, field, mask, unmasked, by_field), 0u);
  // A masked network never reads it: the field changes nothing.
  EXPECT_EQ(crop_to_support(g, mask, masked_network(8), 8, field).lo, by_mask.lo);
  EXPECT_EQ(input_voxels_outside(g, field, mask, masked_network(8), by_mask), 0u);
  // A field equal to the input mean is a zero input.
  FieldNetwork shifted = unmasked;
  shifted.norm.input_mean = 0.1;
  EXPECT_EQ(input_voxels_outside(g, field, mask, shifted, by_mask), static_cast<uint64_t>(g.voxel_count() - 1 -
                                                                                           (by_mask.hi[0] - by_mask.lo[0]) * (by_mask.hi[1] - by_mask.lo[1]) * (by_mask.hi[2] - by_mask.lo[2])));
}

TEST(Crop, APlanHandedBackWithAnotherMaskOrOffTheGridIsRefused) {
  const Geometry g = geometry(48, 48, 40);
  const FieldNetwork net = masked_network(8);
  const std::vector<uint8_t> mask = box_mask(g, {16, 16, 8}, {30, 28, 24});
  const CropBox c = crop_to_support(g, mask, net, 4);
  const std::vector<uint8_t> wider = box_mask(g, {2, 16, 8}, {30, 28, 24});
  EXPECT_THROW(validate_crop(g, wider, net, c), Error);
  CropBox shifted = c;
  shifted.patch_lo[0] += 1, shifted.lo[0] += 1;
  EXPECT_THROW(validate_crop(g, mask, net, shifted), Error);
}

TEST(Crop, TheBoxRunAsOnePatchEqualsTheWholeVolumeRunOfALocalNetwork) {
  // A local network (radius 2, no bias) sees only zeros beyond the mask's box + margin, so its output is the
  // whole-volume run's bit for bit, from a patch a fraction of the volume's size.
  const Geometry g = geometry(61, 52, 40);
  const std::vector<float> field = random_field(g, 3);
  const std::vector<uint8_t> mask = box_mask(g, {20, 14, 9}, {41, 33, 26});
  const FieldNetwork net = masked_network(4);
  ReferenceConvRunner conv(2);
  std::vector<float> whole(g.voxel_count()), cropped(g.voxel_count(), 7.0f);
  {
    StepRun run(g, field, mask, net, plan_whole(g, net, Target::Native), 1, whole);
    drive_crop(run, conv);
  }
  const CropBox c = crop_to_support(g, mask, net, 4);
  ASSERT_TRUE(c.cropped);
  const TilePlan plan = plan_whole(g, net, Target::Native, &c);
  ASSERT_TRUE(plan.feasible);
  EXPECT_EQ(plan.patch_dims, c.patch_dims);
  EXPECT_LT(c.patch_voxels() * 3, g.voxel_count());
  StepRun run(g, field, mask, net, plan, 1, cropped);
  EXPECT_EQ(run.input_shape().dims, c.patch_dims);
  EXPECT_EQ(drive_crop(run, conv).tiles_run, 1u);
  EXPECT_EQ(std::memcmp(whole.data(), cropped.data(), whole.size() * sizeof(float)), 0);
}

TEST(Crop, TheAutoPlanRunsTheMaskBoxWhenItIsSmallerAndCropOffRunsTheVolume) {
  InversionRequest r = auto_request(geometry(96, 96, 80), 400, 20);
  const std::vector<uint8_t> mask = box_mask(r.geometry, {30, 30, 20}, {60, 66, 52});
  const TilePlan p = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_TRUE(p.whole_volume);
  ASSERT_TRUE(p.crop.cropped);
  EXPECT_LT(p.crop.patch_voxels() * 2, r.geometry.voxel_count());
  EXPECT_NE(p.explanation.find("bounding box"), std::string::npos) << p.explanation;
  // Handed back, the same plan; a crop made for another mask is refused.
  PlanChoice choice{true, p.tile, p.workers, p.threads_per_worker, p.tiles_in_flight, p.tiles_total, p.tiles_active, p.crop};
  EXPECT_EQ(plan_of_choice(r, mask, choice, Target::Wasm).patch_dims, p.patch_dims);
  const std::vector<uint8_t> other = box_mask(r.geometry, {2, 30, 20}, {60, 66, 52});
  EXPECT_THROW(plan_of_choice(r, other, choice, Target::Wasm), Error);
  // crop off: the whole field of view (whole, or tiles over it).
  r.crop = false;
  const TilePlan off = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(off.feasible) << off.message;
  EXPECT_FALSE(off.crop.cropped);
  // whole: true is the reference: never cropped.
  r.crop = true;
  r.auto_tile = false;
  r.whole_volume = true;
  EXPECT_FALSE(plan_inversion(r, mask, Target::Wasm).crop.cropped);
}

TEST(Crop, ARunRefusesAFieldTheBoxWouldLeaveOutNamingTheFix) {
  const Geometry g = geometry(48, 48, 40);
  FieldNetwork net = masked_network(8);
  net.masked_input = false;
  const std::vector<uint8_t> mask = box_mask(g, {16, 16, 8}, {30, 28, 24});
  std::vector<float> field(g.voxel_count(), 0.0f), chi(g.voxel_count());
  field[g.index(1, 1, 1)] = 0.5f;
  const CropBox c = crop_to_support(g, mask, net, 4);  // planned without the field
  const TilePlan plan = plan_whole(g, net, Target::Native, &c);
  try {
    StepRun run(g, field, mask, net, plan, 1, chi);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("crop: 'off'"), std::string::npos) << e.what();
  }
  // Planned with the field, the box holds it and the run goes.
  const CropBox with_field = crop_to_support(g, mask, net, 4, field);
  StepRun run(g, field, mask, net, plan_whole(g, net, Target::Native, &with_field), 1, chi);
  IdentityRunner id;
  EXPECT_EQ(drive_crop(run, id).tiles_run, 1u);
}

TEST(Crop, OverTheSinglePatchLimitAtTheAskedMarginTheLeastMarginIsTried) {
  // 2.5 GB at 1000 B/voxel holds ~2.5 M voxels: the mask's box + 8 (rounded to 8) does not fit, + the least does.
  InversionRequest r = auto_request(geometry(200, 200, 160), 1000, 20);
  r.crop_margin = 8;
  const std::vector<uint8_t> mask = box_mask(r.geometry, {40, 40, 40}, {164, 164, 156});  // 124×124×116
  const CropBox at8 = crop_to_support(r.geometry, mask, r.custom, 8);
  const CropBox least = crop_to_support(r.geometry, mask, r.custom, kMinCropMargin);
  ASSERT_FALSE(plan_whole(r.geometry, r.custom, Target::Wasm, &at8).feasible);
  ASSERT_TRUE(plan_whole(r.geometry, r.custom, Target::Wasm, &least).feasible);
  const TilePlan p = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(p.feasible) << p.message;
  ASSERT_TRUE(p.whole_volume) << p.explanation;
  EXPECT_EQ(p.crop.margin, kMinCropMargin);
  EXPECT_EQ(p.crop.patch_dims, least.patch_dims);
}

TEST(Crop, TheBoxSplitIntoSlabsCoversItsCoresOnceWithTheHaloOnTheCutFacesOnThePoolingGrid) {
  const Geometry g = geometry(90, 77, 64);
  const std::vector<uint8_t> mask = box_mask(g, {11, 7, 9}, {80, 70, 50});
  const FieldNetwork net = masked_network(8);
  const WholeVolumeShape s = whole_volume_shape(g, net);
  for (uint32_t axis = 0; axis < 3; ++axis) {
    for (uint32_t pieces : {2u, 3u, 5u}) {
      for (uint32_t halo : {0u, 6u, 13u}) {
        CropBox c = crop_to_support(g, mask, net, 4);
        c.split = BoxSplit{axis, pieces, halo};
        const TileGrid grid = box_split_grid(g, mask, c, 8);
        const std::array<uint64_t, 3> dims = box_split_patch_dims(c, 8);
        ASSERT_EQ(grid.tiles.size(), pieces);
        EXPECT_EQ(grid.active, pieces);
        std::vector<uint8_t> covered(g.voxel_count(), 0);
        for (const Tile& t : grid.tiles) {
          for (int a = 0; a < 3; ++a) {
            EXPECT_EQ((t.patch_lo[a] + s.pad_low[a]) % 8, 0) << "axis " << a;
            EXPECT_EQ(dims[a] % 8, 0u);
            // Inside the box's patch; on the other axes the box's patch itself.
            EXPECT_GE(t.patch_lo[a], c.patch_lo[a]);
            EXPECT_LE(t.patch_lo[a] + static_cast<int64_t>(dims[a]), c.patch_lo[a] + static_cast<int64_t>(c.patch_dims[a]));
            if (a != static_cast<int>(axis)) {
              EXPECT_EQ(t.patch_lo[a], c.patch_lo[a]);
              EXPECT_EQ(dims[a], c.patch_dims[a]);
            }
          }
          // The halo on a cut face: at least `halo` voxels of the box past the core, where the box has them.
          const int64_t p0 = t.patch_lo[axis], p1 = p0 + static_cast<int64_t>(dims[axis]);
          const int64_t box0 = c.patch_lo[axis], box1 = box0 + static_cast<int64_t>(c.patch_dims[axis]);
          EXPECT_LE(p0, std::max(box0, t.core_lo[axis] - static_cast<int64_t>(halo)));
          EXPECT_GE(p1, std::min(box1, t.core_hi[axis] + static_cast<int64_t>(halo)));
          for (int64_t z = t.core_lo[2]; z < t.core_hi[2]; ++z)
            for (int64_t y = t.core_lo[1]; y < t.core_hi[1]; ++y)
              for (int64_t x = t.core_lo[0]; x < t.core_hi[0]; ++x) ++covered[g.index(x, y, z)];
        }
        // Every voxel of the box written exactly once, nothing outside it.
        for (int64_t z = 0; z < g.dims[2]; ++z)
          for (int64_t y = 0; y < g.dims[1]; ++y)
            for (int64_t x = 0; x < g.dims[0]; ++x) {
              const bool in = x >= c.lo[0] && x < c.hi[0] && y >= c.lo[1] && y < c.hi[1] && z >= c.lo[2] && z < c.hi[2];
              ASSERT_EQ(covered[g.index(x, y, z)], in ? 1 : 0) << x << "," << y << "," << z;
            }
        EXPECT_NO_THROW(validate_crop(g, mask, net, c));
      }
    }
  }
  CropBox bad = crop_to_support(g, mask, net, 4);
  bad.split = BoxSplit{3, 2, 4};
  EXPECT_THROW(validate_crop(g, mask, net, bad), Error);
  bad.split = BoxSplit{0, 1000, 4};
  EXPECT_THROW(validate_crop(g, mask, net, bad), Error);
}

TEST(Crop, SlabsWithAHaloPastTheNetworksReachGiveTheOnePatchBoxRunOfALocalNetwork) {
  // A local network (radius 2): slabs whose cut faces carry a halo of 2 or more see exactly what the one-patch box run
  // sees around every voxel they write, so the result is the box run's bit for bit; with no halo it differs.
  const Geometry g = geometry(61, 52, 40);
  const std::vector<float> field = random_field(g, 5);
  const std::vector<uint8_t> mask = box_mask(g, {10, 8, 6}, {51, 45, 35});
  const FieldNetwork net = masked_network(4);
  ReferenceConvRunner conv(2);
  const CropBox c = crop_to_support(g, mask, net, 4);
  std::vector<float> box(g.voxel_count());
  {
    StepRun run(g, field, mask, net, plan_whole(g, net, Target::Native, &c), 1, box);
    drive_crop(run, conv);
  }
  for (uint32_t axis = 0; axis < 3; ++axis) {
    for (uint32_t halo : {0u, 2u}) {
      CropBox split = c;
      split.split = BoxSplit{axis, 3, halo};
      const TilePlan plan = plan_box_split(g, mask, net, split, 2, Target::Native);
      ASSERT_TRUE(plan.feasible) << plan.message;
      EXPECT_FALSE(plan.whole_volume);
      std::vector<float> out(g.voxel_count(), 7.0f);
      StepRun run(g, field, mask, net, plan, 1, out);
      EXPECT_EQ(run.input_shape().dims, plan.patch_dims);
      EXPECT_EQ(drive_crop(run, conv).tiles_run, 3u);
      const bool same = std::memcmp(box.data(), out.data(), box.size() * sizeof(float)) == 0;
      EXPECT_EQ(same, halo >= 2) << "axis " << axis << " halo " << halo;
    }
  }
}

TEST(Crop, ABoxOverTheSinglePatchLimitRunsAsSlabsWhenFasterThanTilesAndTheChoiceRoundTrips) {
  // 2.5 GB at 1600 B/voxel holds ~1.56 M voxels: the mask's box (≈ 2.3 M) does not fit, two or three slabs do; a
  // cubic tiling at the same halo would run far more voxels.
  InversionRequest r = auto_request(geometry(200, 200, 160), 1600, 12);
  const std::vector<uint8_t> mask = box_mask(r.geometry, {40, 36, 20}, {164, 170, 150});
  const CropBox box = crop_to_support(r.geometry, mask, r.custom, r.crop_margin);  // the plan's box
  ASSERT_FALSE(plan_whole(r.geometry, r.custom, Target::Wasm, &box).feasible);
  const TilePlan p = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(p.feasible) << p.message;
  EXPECT_FALSE(p.whole_volume);
  ASSERT_TRUE(p.crop.cropped) << p.explanation;
  ASSERT_GE(p.crop.split.pieces, 2u) << p.explanation;
  EXPECT_EQ(p.tiles_active, p.crop.split.pieces);
  EXPECT_LE(p.bytes_per_tile, WASM_MAX_PATCH_ACTIVATION_BYTES);
  EXPECT_NE(p.explanation.find("slabs along"), std::string::npos) << p.explanation;
  EXPECT_TRUE(p.fidelity_known);
  EXPECT_LE(p.fidelity.nrmse, fidelity_target(Quality::Faithful).max_nrmse);
  // The slabs run fewer patch voxels than the tiling the planner would take with crop off.
  r.crop = false;
  const TilePlan tiled = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(tiled.feasible) << tiled.message;
  const auto voxels = [](const TilePlan& q) { return q.tiles_active * q.patch_dims[0] * q.patch_dims[1] * q.patch_dims[2]; };
  EXPECT_LT(voxels(p) * 2, voxels(tiled)) << tiled.explanation;
  EXPECT_LT(p.estimated_seconds, tiled.estimated_seconds);
  // Handed back: the same slabs; with another mask refused.
  r.crop = true;
  PlanChoice choice{false, p.tile, p.workers, p.threads_per_worker, p.tiles_in_flight, p.tiles_total, p.tiles_active, p.crop};
  const TilePlan again = plan_of_choice(r, mask, choice, Target::Wasm);
  EXPECT_EQ(again.patch_dims, p.patch_dims);
  ASSERT_EQ(again.grid.tiles.size(), p.grid.tiles.size());
  for (size_t i = 0; i < p.grid.tiles.size(); ++i) EXPECT_EQ(again.grid.tiles[i].patch_lo, p.grid.tiles[i].patch_lo);
  const std::vector<uint8_t> other = box_mask(r.geometry, {2, 36, 20}, {164, 170, 150});
  EXPECT_THROW(plan_of_choice(r, other, choice, Target::Wasm), Error);
  // A split still over the limit is refused with the fix.
  CropBox one = p.crop;
  one.split.pieces = 2;
  one.split.axis = 0;
  r.custom.cost.bytes_per_voxel = 4000;
  const TilePlan over = plan_box_split(r.geometry, mask, r.custom, one, 1, Target::Wasm);
  EXPECT_FALSE(over.feasible);
  EXPECT_NE(over.message.find("cut it into more pieces"), std::string::npos) << over.message;
}

TEST(Crop, AMeasuredReachInsideTheFitLiftsTheCautionAndThePlanRunsFewerVoxels) {
  // The same 199-voxel graph reach, then a measured context inside the fit (a trained deep U-Net of that graph measured
  // radius90 15): the request's context replaces the graph's, the caution goes, and the plan
  // meets the target running fewer voxels, with no warning.
  InversionRequest r = auto_request(geometry(200, 200, 160), 1600, 199);
  const std::vector<uint8_t> mask = box_mask(r.geometry, {40, 36, 20}, {164, 170, 150});
  const TilePlan graph = plan_inversion(r, mask, Target::Wasm);
  r.custom.context = dipole_context_profile(12);
  const TilePlan measured = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(graph.feasible && measured.feasible) << graph.message << measured.message;
  EXPECT_TRUE(graph.fidelity.beyond_fit);
  EXPECT_FALSE(graph.fidelity_warning.empty());
  EXPECT_FALSE(measured.fidelity.beyond_fit);
  EXPECT_TRUE(measured.fidelity_warning.empty()) << measured.fidelity_warning;
  EXPECT_LE(measured.fidelity.nrmse, fidelity_target(Quality::Faithful).max_nrmse);
  EXPECT_LT(voxels_run(measured), voxels_run(graph)) << graph.explanation << " | " << measured.explanation;
}

TEST(Crop, ANetworkBeyondTheFidelityFitTakesTheMostFaithfulSlabsAndSaysWhy) {
  // A reach of 199 voxels (the deep stand-in's graph radius) at 1600 B/voxel: no split meets the faithful target once
  // the model's caution is applied, so the run takes the most faithful one and warns, naming the caution.
  InversionRequest r = auto_request(geometry(200, 200, 160), 1600, 199);
  const std::vector<uint8_t> mask = box_mask(r.geometry, {40, 36, 20}, {164, 170, 150});
  const TilePlan p = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(p.feasible) << p.message;
  ASSERT_GE(p.crop.split.pieces, 2u) << p.explanation;
  EXPECT_TRUE(p.fidelity.beyond_fit);
  EXPECT_GT(p.fidelity.nrmse, fidelity_target(Quality::Faithful).max_nrmse * kFidelityMargin);
  EXPECT_NE(p.fidelity_warning.find("the run takes the most faithful one"), std::string::npos) << p.fidelity_warning;
  EXPECT_NE(p.fidelity_warning.find("reaches further than the fidelity model was fitted on"), std::string::npos)
      << p.fidelity_warning;
  // The warning names the fix: a measured reach replaces the graph's.
  EXPECT_NE(p.fidelity_warning.find("measure its reach (receptiveField's probe as the request's context; CLI --probe)"),
            std::string::npos)
      << p.fidelity_warning;
  // No split of the box (the fewest pieces that fit, per halo and axis) is predicted more faithful, and the chosen one
  // keeps more context than the thinnest halo.
  const CropBox box = crop_to_support(r.geometry, mask, r.custom, r.crop_margin);  // the plan's box
  const FidelityModel model(r.geometry, mask, r.custom.context);
  int checked = 0;
  for (uint32_t halo : {0u, 2u, 8u, 16u, 32u, 48u, 64u})
    for (uint32_t axis = 0; axis < 3; ++axis)
      for (uint32_t n = 2; n <= 16; ++n) {
        CropBox c = box;
        c.split = BoxSplit{axis, n, halo};
        const TilePlan s = plan_box_split(r.geometry, mask, r.custom, c, 1, Target::Wasm, &model);
        if (!s.feasible) continue;
        ++checked;
        EXPECT_GE(s.fidelity.nrmse * 1.001, p.fidelity.nrmse) << "halo " << halo << " axis " << axis << " pieces " << n;
        if (halo == 0) EXPECT_GT(s.fidelity.nrmse, p.fidelity.nrmse * 1.1);
        break;
      }
  EXPECT_GT(checked, 6);
  EXPECT_GT(p.crop.split.halo, 0u);
}

TEST(Crop, AMarginUnderTheLeastMeasuredFaithfulIsWarnedAboutAndTheDefaultIsNot) {
  // The box fits as one patch at any margin: the warning comes from the margin alone.
  InversionRequest r = auto_request(geometry(96, 96, 80), 370, 12);
  const std::vector<uint8_t> mask = box_mask(r.geometry, {20, 22, 18}, {70, 74, 60});
  const TilePlan usual = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(usual.feasible && usual.crop.cropped) << usual.explanation;
  EXPECT_EQ(usual.crop.margin, kCropMargin);
  EXPECT_EQ(usual.fidelity_warning, "");
  for (uint32_t margin = 0; margin < kMinCropMargin; ++margin) {
    r.crop_margin = margin;
    const TilePlan p = plan_inversion(r, mask, Target::Wasm);
    ASSERT_TRUE(p.feasible && p.crop.cropped) << p.explanation;
    EXPECT_EQ(p.crop.margin, margin);
    EXPECT_NE(p.fidelity_warning.find("the crop margin of " + std::to_string(margin) + " voxel"), std::string::npos) << p.fidelity_warning;
    EXPECT_NE(p.fidelity_warning.find("leave cropMargin at its default"), std::string::npos) << p.fidelity_warning;
  }
  r.crop_margin = kMinCropMargin;
  EXPECT_EQ(plan_inversion(r, mask, Target::Wasm).fidelity_warning, "");
}
