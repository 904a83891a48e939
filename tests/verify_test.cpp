#include "tessera/engine/verify.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/engine/fidelity_model.h"
#include "tessera/networks/inversion.h"

using namespace tessera;
using namespace tessera::test;

namespace {
FieldNetwork network(uint64_t bytes_per_voxel, uint32_t radius) {
  FieldNetwork n;
  n.cost = TileCost{8, bytes_per_voxel, 0};
  n.context = dipole_context_profile(radius);
  return n;
}
}  // namespace

TEST(Verify, TheLargestBoxThatRunsWholeCentredOnTheMaskKeepsTheReachFromItsInnerFaces) {
  const Geometry g = geometry(200, 180, 150);
  std::vector<uint8_t> mask(g.voxel_count(), 0);
  // A brain off-centre: x 60..180, y 30..150, z 20..130.
  for (int64_t z = 20; z < 130; ++z)
    for (int64_t y = 30; y < 150; ++y)
      for (int64_t x = 60; x < 180; ++x) mask[g.index(x, y, z)] = 1;
  const FieldNetwork n = network(1100, 40);  // 2.5 GB / 1100 B: 131³, 128 at divisor 8
  const VerifyRegion v = plan_verification(g, mask, n, Target::Wasm);
  ASSERT_TRUE(v.possible) << v.message;
  EXPECT_TRUE(v.plan.feasible && v.plan.whole_volume);
  EXPECT_LE(v.plan.activation_bytes, WASM_MAX_PATCH_ACTIVATION_BYTES);
  const uint32_t margin = context_radius_holding(n.context, 0.99);
  EXPECT_EQ(v.margin, margin);
  for (int a = 0; a < 3; ++a) {
    EXPECT_GE(v.lo[a], 0);
    EXPECT_LE(v.hi[a], g.dims[a]);
    EXPECT_EQ(v.hi[a] - v.lo[a], std::min<int64_t>(128, g.dims[a])) << a;
    // Centred on the mask's box (as far as the volume allows).
    const int64_t mid = (v.lo[a] + v.hi[a]) / 2;
    EXPECT_LE(std::abs(mid - std::clamp<int64_t>(mid, 0, g.dims[a])), 1);
    // A face inside the volume is kept `margin` away; a face on the volume's boundary is not.
    EXPECT_EQ(v.compare_lo[a], std::max<int64_t>(v.lo[a] > 0 ? v.lo[a] + margin : 0, a == 0 ? 60 : a == 1 ? 30 : 20));
    EXPECT_LE(v.compare_hi[a], v.hi[a] < g.dims[a] ? v.hi[a] - margin : v.hi[a]);
  }
  // x: the mask's centre is 120, the box 56..184; y: centre 90 → 26..154; z: 150 < 128? no: 128 of 150, centre 75 → 11..139.
  EXPECT_EQ(v.lo[0], 56);
  EXPECT_EQ(v.lo[1], 26);
  EXPECT_EQ(v.lo[2], 11);
}

TEST(Verify, WhenTheWholeVolumeFitsTheBoxIsTheVolumeAndNothingIsTrimmed) {
  const Geometry g = geometry(64, 56, 48);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.8);
  const VerifyRegion v = plan_verification(g, mask, network(300, 40), Target::Wasm);
  ASSERT_TRUE(v.possible);
  EXPECT_EQ(v.lo, (Dims3{0, 0, 0}));
  EXPECT_EQ(v.hi, g.dims);
  // Every mask voxel is compared: the comparison box is the mask's own.
  for (int a = 0; a < 3; ++a) EXPECT_EQ(v.compare_hi[a] - v.compare_lo[a] > 0, true);
}

TEST(Verify, ABoxTooSmallForTheReachIsSaidNotChecked) {
  const Geometry g = geometry(128, 128, 128);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.9);
  // 40 kB/voxel: 39³ → 32³; a 100-voxel reach leaves nothing inside.
  const VerifyRegion v = plan_verification(g, mask, network(40000, 100), Target::Wasm);
  EXPECT_FALSE(v.possible);
  EXPECT_NE(v.message.find("the check cannot be made"), std::string::npos) << v.message;
  const std::vector<uint8_t> empty(g.voxel_count(), 0);
  EXPECT_FALSE(plan_verification(g, empty, network(1100, 10), Target::Wasm).possible);
}

TEST(Verify, TheComparisonIsCompareMapsOverTheRegionAndCropsAreExact) {
  const Geometry g = geometry(40, 36, 30);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.9);
  const std::vector<float> a = random_field(g, 3), b = random_field(g, 4);
  VerifyRegion v;
  v.possible = true;
  v.lo = {4, 2, 3};
  v.hi = {36, 30, 27};
  v.compare_lo = {10, 8, 9};
  v.compare_hi = {30, 24, 21};
  const std::vector<float> box_b = crop_box(g, std::span<const float>(b), v.lo, v.hi);
  const Geometry bg = box_geometry(g, v.lo, v.hi);
  ASSERT_EQ(box_b.size(), bg.voxel_count());
  EXPECT_EQ(box_b[bg.index(5, 6, 7)], b[g.index(9, 8, 10)]);
  // The tiled map's box against the box's own map equals compare_maps over the same voxels of the whole volume.
  std::vector<float> b_full(g.voxel_count(), 0.0f);
  for (int64_t z = 0; z < bg.dims[2]; ++z)
    for (int64_t y = 0; y < bg.dims[1]; ++y)
      for (int64_t x = 0; x < bg.dims[0]; ++x) b_full[g.index(x + 4, y + 2, z + 3)] = box_b[bg.index(x, y, z)];
  const Agreement got = compare_verification(g, a, mask, box_b, v);
  const Agreement want = compare_maps(g, a, b_full, mask, v.compare_lo, v.compare_hi);
  EXPECT_EQ(got.voxels, want.voxels);
  EXPECT_DOUBLE_EQ(got.r, want.r);
  EXPECT_DOUBLE_EQ(got.nrmse, want.nrmse);
  EXPECT_THROW(crop_box(g, std::span<const float>(a), Dims3{0, 0, 0}, Dims3{41, 1, 1}), Error);
}

TEST(Verify, APlanAsksForItsCheckAndCountsItsMemory) {
  const Geometry g = geometry(160, 192, 144);
  InversionRequest r;
  r.geometry = g;
  r.custom = network(1100, 40);
  r.tile = TileConfig{56, 8};
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.85);
  const TilePlan plain = plan_inversion(r, mask, Target::Wasm);
  EXPECT_EQ(plain.verify, nullptr);
  r.verify = true;
  const TilePlan checked = plan_inversion(r, mask, Target::Wasm);
  ASSERT_NE(checked.verify, nullptr);
  EXPECT_TRUE(checked.verify->possible) << checked.verify->message;
  EXPECT_GT(checked.module_heap_bytes, plain.module_heap_bytes + dipole_workspace_bytes(g, 2));
  EXPECT_GE(checked.peak_bytes, checked.verify->plan.activation_bytes + checked.module_heap_bytes);
  // A whole-volume run is its own check.
  r.whole_volume = true;
  r.custom.cost.bytes_per_voxel = 100;
  const TilePlan whole = plan_inversion(r, mask, Target::Wasm);
  ASSERT_NE(whole.verify, nullptr);
  EXPECT_FALSE(whole.verify->possible);
  EXPECT_NE(whole.verify->message.find("the whole-volume run itself"), std::string::npos);
}

TEST(Verify, TheDataConsistencyResidualOverTheMasksBoxEqualsTheWholeVolumes) {
  // χ zero outside the mask: the forward model over the box (padded 2×) against the whole volume (padded 2×) differ
  // only by the periodic wrap of the far field, far below the residual.
  const Geometry g = geometry(48, 44, 40);
  std::vector<uint8_t> mask(g.voxel_count(), 0);
  for (int64_t z = 12; z < 30; ++z)
    for (int64_t y = 10; y < 32; ++y)
      for (int64_t x = 14; x < 34; ++x) mask[g.index(x, y, z)] = 1;
  std::vector<float> chi = random_field(g, 7), field(g.voxel_count());
  for (uint64_t i = 0; i < chi.size(); ++i) chi[i] = mask[i] ? 0.05f * chi[i] : 0.0f;
  const std::vector<float> f = forward_field(g, chi, 2);
  for (uint64_t i = 0; i < f.size(); ++i) field[i] = mask[i] ? f[i] : 0.0f;
  // A perturbed χ: the residual against the field of the true one.
  std::vector<float> off = chi;
  for (uint64_t i = 0; i < off.size(); ++i) off[i] *= mask[i] ? 0.9f : 0.0f;
  const double res = data_consistency_residual(g, off, field, mask);
  EXPECT_NEAR(res, 0.1, 0.02);
  // The definition over the whole volume (its own 2× padding).
  const std::vector<float> model = forward_field(g, off, 2);
  double n = 0, mf = 0, mm = 0, num = 0, den = 0;
  for (uint64_t i = 0; i < mask.size(); ++i)
    if (mask[i]) ++n, mf += field[i], mm += model[i];
  mf /= n, mm /= n;
  for (uint64_t i = 0; i < mask.size(); ++i)
    if (mask[i]) {
      const double e = (model[i] - mm) - (field[i] - mf);
      num += e * e, den += (field[i] - mf) * (field[i] - mf);
    }
  EXPECT_NEAR(res, std::sqrt(num / den), 0.01 * res);
  EXPECT_LT(data_consistency_residual(g, chi, field, mask), 0.01);
}

TEST(Verify, AComparisonOfTooFewMaskVoxelsIsSaidNotChecked) {
  // 2200 B/voxel: 104³ runs whole; a reach of 49 voxels kept from its inner faces leaves a 6³ part of the head.
  const Geometry g = geometry(128, 144, 112);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.9);
  FieldNetwork n = network(2200, 51);
  const VerifyRegion v = plan_verification(g, mask, n, Target::Wasm);
  EXPECT_FALSE(v.possible);
  EXPECT_NE(v.message.find("mask voxels (at least 10000 are needed)"), std::string::npos) << v.message;
  // With a shorter reach the part is large enough.
  n.context = dipole_context_profile(20);
  const VerifyRegion near = plan_verification(g, mask, n, Target::Wasm);
  ASSERT_TRUE(near.possible) << near.message;
  uint64_t compared = 0;
  for (int64_t z = near.compare_lo[2]; z < near.compare_hi[2]; ++z)
    for (int64_t y = near.compare_lo[1]; y < near.compare_hi[1]; ++y)
      for (int64_t x = near.compare_lo[0]; x < near.compare_hi[0]; ++x) compared += mask[g.index(x, y, z)];
  EXPECT_GE(compared, kVerifyMinVoxels);
  // A small mask needs a tenth of its voxels.
  EXPECT_EQ(verify_min_voxels(2000), 200u);
  EXPECT_EQ(verify_min_voxels(5'000'000), kVerifyMinVoxels);
}
