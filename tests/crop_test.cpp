#include "tessera/crop.h"

#include <gtest/gtest.h>

#include <cstring>

#include "internal/step_run.h"
#include "support.h"
#include "tessera/error.h"
#include "tessera/inversion.h"

using namespace tessera;
using namespace tessera::test;

namespace {

FieldNetwork masked_network(uint32_t divisor, PadRule rule = PadRule::SmallerHalfLow) {
  FieldNetwork n{TileCost{divisor, 100}, Normalization{}, rule};
  n.masked_input = true;
  return n;
}

RunReport drive(StepRun& run, PatchRunner& net) {
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
    drive(run, conv);
  }
  const CropBox c = crop_to_support(g, mask, net, 4);
  ASSERT_TRUE(c.cropped);
  const TilePlan plan = plan_whole(g, net, Target::Native, &c);
  ASSERT_TRUE(plan.feasible);
  EXPECT_EQ(plan.patch_dims, c.patch_dims);
  EXPECT_LT(c.patch_voxels() * 3, g.voxel_count());
  StepRun run(g, field, mask, net, plan, 1, cropped);
  EXPECT_EQ(run.input_shape().dims, c.patch_dims);
  EXPECT_EQ(drive(run, conv).tiles_run, 1u);
  EXPECT_EQ(std::memcmp(whole.data(), cropped.data(), whole.size() * sizeof(float)), 0);
}

TEST(Crop, TheAutoPlanRunsTheMaskBoxWhenItIsSmallerAndCropOffRunsTheVolume) {
  InversionRequest r;
  r.geometry = geometry(96, 96, 80);
  r.custom = masked_network(8);
  r.custom.cost.bytes_per_voxel = 400;
  r.custom.context = dipole_context_profile(20);
  r.auto_tile = true;
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
  EXPECT_EQ(drive(run, id).tiles_run, 1u);
}

TEST(Crop, OverTheSinglePatchLimitAtTheAskedMarginTheLeastMarginIsTried) {
  // 2.5 GB at 1000 B/voxel holds ~2.5 M voxels: the mask's box + 8 (rounded to 8) does not fit, + 4 does.
  InversionRequest r;
  r.geometry = geometry(200, 200, 160);
  r.custom = masked_network(8);
  r.custom.cost.bytes_per_voxel = 1000;
  r.custom.context = dipole_context_profile(20);
  r.auto_tile = true;
  r.crop_margin = 8;
  const std::vector<uint8_t> mask = box_mask(r.geometry, {40, 40, 40}, {164, 164, 156});  // 124×124×116
  const CropBox at8 = crop_to_support(r.geometry, mask, r.custom, 8);
  const CropBox at4 = crop_to_support(r.geometry, mask, r.custom, 4);
  ASSERT_FALSE(plan_whole(r.geometry, r.custom, Target::Wasm, &at8).feasible);
  ASSERT_TRUE(plan_whole(r.geometry, r.custom, Target::Wasm, &at4).feasible);
  const TilePlan p = plan_inversion(r, mask, Target::Wasm);
  ASSERT_TRUE(p.feasible) << p.message;
  ASSERT_TRUE(p.whole_volume) << p.explanation;
  EXPECT_EQ(p.crop.margin, 4u);
  EXPECT_EQ(p.crop.patch_dims, at4.patch_dims);
}
