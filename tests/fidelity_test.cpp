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

TEST(ChallengeScores, IdenticalVolumesScorePerfectly) {
  const Geometry g = geometry(14, 12, 10);
  const std::vector<float> t = random_field(g, 6);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.8);
  const ChallengeScores s = challenge_scores(g, t, t, mask);
  EXPECT_EQ(s.nrmse, 0.0);
  EXPECT_EQ(s.nrmse_detrended, 0.0);
  EXPECT_EQ(s.hfen, 0.0);
  EXPECT_NEAR(s.cc, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.xsim, 1.0);
  uint64_t inside = 0;
  for (uint8_t m : mask) inside += m != 0;
  EXPECT_EQ(s.voxels, inside);
}

TEST(ChallengeScores, AnAffineCopyIsPerfectOnceDetrendedButNotDemeaned) {
  const Geometry g = geometry(16, 14, 12);
  const std::vector<float> t = random_field(g, 7);
  std::vector<float> r(t.size());
  for (size_t i = 0; i < t.size(); ++i) r[i] = 2.0f * t[i] + 3.0f;
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.9);
  const ChallengeScores s = challenge_scores(g, r, t, mask);
  // r − mean r = 2 (t − mean t): the demeaned error is t − mean t itself.
  EXPECT_NEAR(s.nrmse, 100.0, 1e-3);
  EXPECT_NEAR(s.nrmse_detrended, 0.0, 1e-3);
  EXPECT_NEAR(s.cc, 1.0, 1e-9);
  // LoG of a constant is 0 with mirrored edges, so LoG(r) − LoG(t) = LoG(t) everywhere, edges included.
  EXPECT_NEAR(s.hfen, 100.0, 1e-3);
}

TEST(ChallengeScores, XsimOfTwoVoxelsIsTheHandComputedValue) {
  // Both voxels' windows hold both voxels: means 0.05 and 0.1, variances 0.0025 and 0.01, covariance 0.005.
  const Geometry g = geometry(2, 1, 1);
  const std::vector<float> r = {0.0f, 0.1f}, t = {0.0f, 0.2f};
  const std::vector<uint8_t> mask = {1, 1};
  const double expected = (2 * 0.05 * 0.1 + 1e-4) * (2 * 0.005 + 1e-6) / ((0.05 * 0.05 + 0.1 * 0.1 + 1e-4) * (0.0025 + 0.01 + 1e-6));
  EXPECT_NEAR(challenge_scores(g, r, t, mask).xsim, expected, 1e-6);
}

TEST(ChallengeScores, XsimWindowsStopAtTheVolumesEdge) {
  // Every voxel's window by brute force: the voxels within 2 of it along each axis that lie inside the volume.
  const Geometry g = geometry(7, 6, 5);
  const std::vector<float> t = random_field(g, 8), noise = random_field(g, 9);
  std::vector<float> r(t.size());
  for (size_t i = 0; i < t.size(); ++i) r[i] = 0.8f * t[i] + 0.3f * noise[i];
  std::vector<uint8_t> mask(g.voxel_count(), 0);
  for (size_t i = 0; i < mask.size(); i += 3) mask[i] = 1;
  double total = 0;
  int counted = 0;
  for (int64_t z = 0; z < 5; ++z)
    for (int64_t y = 0; y < 6; ++y)
      for (int64_t x = 0; x < 7; ++x) {
        if (!mask[g.index(x, y, z)]) continue;
        double n = 0, a = 0, b = 0, aa = 0, bb = 0, ab = 0;
        for (int64_t w = z - 2; w <= z + 2; ++w)
          for (int64_t v = y - 2; v <= y + 2; ++v)
            for (int64_t u = x - 2; u <= x + 2; ++u) {
              if (u < 0 || v < 0 || w < 0 || u >= 7 || v >= 6 || w >= 5) continue;
              const double p = r[g.index(u, v, w)], q = t[g.index(u, v, w)];
              n += 1, a += p, b += q, aa += p * p, bb += q * q, ab += p * q;
            }
        const double ma = a / n, mb = b / n, va = aa / n - ma * ma, vb = bb / n - mb * mb, c = ab / n - ma * mb;
        total += (2 * ma * mb + 1e-4) * (2 * c + 1e-6) / ((ma * ma + mb * mb + 1e-4) * (va + vb + 1e-6));
        ++counted;
      }
  EXPECT_NEAR(challenge_scores(g, r, t, mask).xsim, total / counted, 1e-12);
}

TEST(ChallengeScores, TheSameBitsForAnyThreadCount) {
  const Geometry g = geometry(40, 36, 30);
  const std::vector<float> t = random_field(g, 10), noise = random_field(g, 11);
  std::vector<float> r(t.size());
  for (size_t i = 0; i < t.size(); ++i) r[i] = 0.7f * t[i] + 0.2f * noise[i];
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.85);
  const ChallengeScores one = challenge_scores(g, r, t, mask, 1), four = challenge_scores(g, r, t, mask, 4);
  EXPECT_EQ(one.nrmse, four.nrmse);
  EXPECT_EQ(one.nrmse_detrended, four.nrmse_detrended);
  EXPECT_EQ(one.hfen, four.hfen);
  EXPECT_EQ(one.cc, four.cc);
  EXPECT_EQ(one.xsim, four.xsim);
  EXPECT_GT(one.nrmse, 0.0);
  EXPECT_LT(one.cc, 1.0);
}

TEST(ChallengeScores, RefusesAnEmptyMaskAConstantReferenceAndNonFiniteValues) {
  const Geometry g = geometry(6, 6, 6);
  const std::vector<float> t = random_field(g, 12);
  const std::vector<uint8_t> all(g.voxel_count(), 1), none(g.voxel_count(), 0);
  EXPECT_THROW(challenge_scores(g, t, t, none), Error);
  EXPECT_THROW(challenge_scores(g, t, std::vector<float>(t.size(), 0.5f), all), Error);
  std::vector<float> bad(t);
  bad[5] = NAN;
  EXPECT_THROW(challenge_scores(g, bad, t, all), Error);
  EXPECT_THROW(challenge_scores(g, t, std::vector<float>(3), all), Error);
}
