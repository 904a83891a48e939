#include "tessera/quality/fidelity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/sim/phantom.h"

using namespace tessera;
using namespace tessera::test;

TEST(Fidelity, IdenticalMapsAgreeAndAScaledOneHasPerfectRButNotNrmse) {
  const Geometry g = geometry(20, 18, 16);
  const std::vector<float> a = random_field(g, 1);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.9);
  const Agreement same = compare_maps(g, a, a, mask, {0, 0, 0}, {0, 0, 0}, true);
  EXPECT_DOUBLE_EQ(same.r, 1.0);
  EXPECT_EQ(same.nrmse, 0.0);
  EXPECT_EQ(same.max_abs, 0.0);
  EXPECT_EQ(same.hfen, 0.0);
  std::vector<float> b(a);
  for (float& v : b) v *= 1.5f;
  const Agreement scaled = compare_maps(g, b, a, mask);
  EXPECT_NEAR(scaled.r, 1.0, 1e-12);
  EXPECT_NEAR(scaled.nrmse, 0.5, 1e-6);
}

TEST(Fidelity, NrmseAndRMatchTheirDefinitionsInABox) {
  const Geometry g = geometry(12, 10, 8);
  const std::vector<float> ref = random_field(g, 2), noise = random_field(g, 3);
  std::vector<float> test(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) test[i] = ref[i] + 0.1f * noise[i];
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const Dims3 lo{2, 3, 1}, hi{9, 8, 7};
  double see = 0, srr = 0, st = 0, sr = 0, stt = 0, srr2 = 0, str = 0, n = 0, mx = 0;
  for (int64_t z = lo[2]; z < hi[2]; ++z)
    for (int64_t y = lo[1]; y < hi[1]; ++y)
      for (int64_t x = lo[0]; x < hi[0]; ++x) {
        const uint64_t i = g.index(x, y, z);
        const double t = test[i], r = ref[i];
        see += (t - r) * (t - r), srr += r * r, st += t, sr += r, stt += t * t, srr2 += r * r, str += t * r, ++n;
        mx = std::max(mx, std::abs(t - r));
      }
  const Agreement a = compare_maps(g, test, ref, mask, lo, hi);
  EXPECT_EQ(a.voxels, static_cast<uint64_t>(n));
  EXPECT_NEAR(a.nrmse, std::sqrt(see / srr), 1e-9);
  EXPECT_NEAR(a.r, (n * str - st * sr) / std::sqrt((n * stt - st * st) * (n * srr2 - sr * sr)), 1e-9);
  EXPECT_NEAR(a.max_abs, mx, 1e-7);
  std::vector<uint8_t> none(g.voxel_count(), 0);
  EXPECT_THROW(compare_maps(g, test, ref, none), Error);
  EXPECT_THROW(compare_maps(g, test, std::vector<float>(3), mask), Error);
}

TEST(Fidelity, HfenSeesFineDetailThatASmoothErrorDoesNotTouch) {
  const Geometry g = geometry(24, 24, 24);
  const std::vector<float> ref = random_field(g, 4);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  std::vector<float> offset(ref), detail(ref);
  const std::vector<float> noise = random_field(g, 5);
  for (size_t i = 0; i < ref.size(); ++i) {
    offset[i] += 0.3f;           // a constant offset: no high frequency
    detail[i] += 0.3f * noise[i];  // white noise of similar size: mostly high frequency
  }
  const Dims3 lo{6, 6, 6}, hi{18, 18, 18};  // away from the borders, where the filter's zero padding sees the offset
  EXPECT_LT(compare_maps(g, offset, ref, mask, lo, hi, true).hfen, 1e-6);
  EXPECT_GT(compare_maps(g, detail, ref, mask, lo, hi, true).hfen, 0.1);
}

TEST(Fidelity, TheTrueSusceptibilityExplainsItsFieldAndZeroDoesNot) {
  Geometry g = geometry(48, 48, 48);
  PhantomOptions o;
  const Phantom p = make_phantom(g, o);
  EXPECT_LT(data_consistency_residual(g, p.chi, p.field, p.mask), 0.05);
  const std::vector<float> zero(g.voxel_count(), 0.0f);
  EXPECT_NEAR(data_consistency_residual(g, zero, p.field, p.mask), 1.0, 1e-9);
}
