// SWI and the minimum-intensity projection: hand-computed mask values, a known minIP, an independent reference
// implementation on a small case, thread bit-identity, cancel, and the phantom scan from wrapped phase.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "support.h"
#include "tessera/common/error.h"
#include "tessera/contrast/min_intensity_projection.h"
#include "tessera/contrast/swi.h"
#include "tessera/pipeline/swi_from_phase.h"
#include "tessera/sim/phantom.h"

namespace {

using tessera::Geometry;
using tessera::SwiParams;

using tessera::test::kPi;

TEST(Swi, NegativePhaseMaskByHand) {
  EXPECT_EQ(tessera::negative_phase_mask(0.0), 1.0);
  EXPECT_EQ(tessera::negative_phase_mask(1.2), 1.0);
  EXPECT_DOUBLE_EQ(tessera::negative_phase_mask(-kPi / 2), 0.5);
  EXPECT_DOUBLE_EQ(tessera::negative_phase_mask(-kPi / 4), 0.75);
  EXPECT_EQ(tessera::negative_phase_mask(-kPi), 0.0);
  EXPECT_EQ(tessera::negative_phase_mask(-4.0), 0.0);
}

// Three echoes of phase c + a·(−1)^x scaled by TE/TE3 (a frequency), magnitudes 3, 2, 1: the combined phase at TE3 is
// c + a·(−1)^x, its Gaussian smoothing in the volume's interior c (the alternating part averages out), so the
// high-passed phase is ±a and the mask by hand ((π − a)/π)^4 on odd x (−a) with paramagnetic negative, 1 on even x.
TEST(Swi, AlternatingStepPhaseGivesTheMaskByHand) {
  const Geometry g = tessera::test::geometry(48, 40, 3);
  const uint64_t n = g.voxel_count();
  const std::vector<double> te = {0.005, 0.010, 0.015};
  const double a = kPi / 2, c = 0.7;
  std::vector<float> mag(3 * n), phase(3 * n);
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t x = static_cast<int64_t>(i % 48);
    const double p = c + (x % 2 == 0 ? a : -a);
    for (int e = 0; e < 3; ++e) {
      mag[e * n + i] = static_cast<float>(3 - e);
      phase[e * n + i] = static_cast<float>(p * te[e] / te[2]);
    }
  }
  const double rss = std::sqrt(14.0);
  for (bool positive : {false, true}) {
    SwiParams p;
    p.paramagnetic_positive = positive;
    const auto r = tessera::swi(g, mag, phase, te, {}, p);
    for (int64_t z = 0; z < 3; ++z) {
      for (int64_t y = 18; y < 22; ++y) {
        for (int64_t x = 20; x < 28; ++x) {
          const uint64_t i = g.index(x, y, z);
          const bool negative = x % 2 == 1;
          const double hp = negative ? -a : a;
          // paramagnetic negative: odd x darkened by 0.5; positive: even x by 0.5 (the mask of −φ)
          const double w = (negative != positive) ? 0.5 : 1.0;
          ASSERT_NEAR(r.phase_rad[i], hp, 1e-4) << x << "," << y << "," << z;
          ASSERT_NEAR(r.phase_mask[i], w, 1e-4);
          ASSERT_NEAR(r.magnitude[i], rss, 1e-5);
          ASSERT_NEAR(r.swi[i], rss * std::pow(w, 4.0), 1e-4);
        }
      }
    }
  }
}

TEST(MinIntensityProjection, KnownVolumeAndSlabInMm) {
  Geometry g = tessera::test::geometry(5, 6, 20);
  g.voxel_mm = {1.0, 1.0, 2.0};  // 8 mm = 4 slices: slice z sees z − 1 … z + 2
  std::vector<float> v(g.voxel_count());
  for (int64_t z = 0; z < 20; ++z)
    for (int64_t y = 0; y < 6; ++y)
      for (int64_t x = 0; x < 5; ++x) v[g.index(x, y, z)] = static_cast<float>(100 + z);
  v[g.index(2, 3, 10)] = 1.0f;
  const std::vector<float> p = tessera::min_intensity_projection(g, v, 8.0);
  for (int64_t z = 0; z < 20; ++z) {
    EXPECT_EQ(p[g.index(0, 0, z)], static_cast<float>(100 + std::max<int64_t>(0, z - 1))) << z;
    EXPECT_EQ(p[g.index(2, 3, z)], (z >= 8 && z <= 11) ? 1.0f : static_cast<float>(100 + std::max<int64_t>(0, z - 1))) << z;
  }
  EXPECT_EQ(tessera::min_ip_slices(8.0, 2.0), 4u);
  EXPECT_EQ(tessera::min_ip_slices(8.0, 0.5), 16u);
  EXPECT_EQ(tessera::min_ip_slices(8.0, 10.0), 1u);
  const std::string bad = tessera::test::error_of([&] { tessera::min_intensity_projection(g, v, 0.0); },
                                                  tessera::ErrorCode::InvalidArgument);
  EXPECT_NE(bad.find("swi.minIpSlab must be in (0, 1000] mm"), std::string::npos) << bad;
}

// An independent SWI: per voxel the frequency Σφ|S|TE/Σ|S|TE², the 2-D Gaussian (σ voxels, cut at 4σ per axis)
// normalised convolution over the mask by direct summation in double, Haacke's mask of φ, RSS magnitude.
std::vector<double> reference_swi(const Geometry& g, const std::vector<float>& mag, const std::vector<float>& ph,
                                  const std::vector<double>& te, const std::vector<uint8_t>& mask, double sigma,
                                  double power) {
  const uint64_t n = g.voxel_count();
  const size_t ne = te.size();
  std::vector<double> phi(n, 0.0), rss(n, 0.0);
  std::vector<bool> in(n, false);
  for (uint64_t i = 0; i < n; ++i) {
    double num = 0, den = 0, ss = 0;
    for (size_t e = 0; e < ne; ++e) {
      num += ph[e * n + i] * mag[e * n + i] * te[e];
      den += mag[e * n + i] * te[e] * te[e];
      ss += mag[e * n + i] * mag[e * n + i];
    }
    rss[i] = std::sqrt(ss);
    in[i] = mask[i] && den > 0;
    phi[i] = in[i] ? num / den * te.back() : 0.0;
  }
  const int r = static_cast<int>(std::ceil(4 * sigma));
  std::vector<double> out(n);
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const uint64_t i = g.index(x, y, z);
        double w = 1.0;
        if (in[i]) {
          double sn = 0, sd = 0;
          for (int dy = -r; dy <= r; ++dy)
            for (int dx = -r; dx <= r; ++dx) {
              const int64_t xx = x + dx, yy = y + dy;
              if (xx < 0 || yy < 0 || xx >= g.dims[0] || yy >= g.dims[1]) continue;
              const uint64_t j = g.index(xx, yy, z);
              if (!in[j]) continue;
              const double k = std::exp(-(dx * dx + dy * dy) / (2 * sigma * sigma));
              sn += k * phi[j];
              sd += k;
            }
          const double hp = phi[i] - sn / sd;  // Haacke's mask of φ (paramagnetic negative, the default)
          w = hp >= 0 ? 1.0 : hp <= -kPi ? 0.0 : (kPi + hp) / kPi;
        }
        out[i] = rss[i] * std::pow(w, power);
      }
  return out;
}

TEST(Swi, MatchesAnIndependentImplementation) {
  const Geometry g = tessera::test::geometry(30, 26, 5);
  const uint64_t n = g.voxel_count();
  const std::vector<double> te = {0.004, 0.009, 0.014, 0.019};
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<float> mag(te.size() * n), ph(te.size() * n);
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t x = static_cast<int64_t>(i % 30), y = static_cast<int64_t>((i / 30) % 26);
    const double freq = 2 * kPi * (8.0 * std::sin(0.2 * x) + 5.0 * std::cos(0.15 * y) + 30.0 * u(rng));  // rad/s
    for (size_t e = 0; e < te.size(); ++e) {
      mag[e * n + i] = static_cast<float>(std::exp(-25.0 * te[e]) * (1.0 + 0.2 * u(rng)));
      ph[e * n + i] = static_cast<float>(0.3 + freq * te[e]);
    }
  }
  const std::vector<uint8_t> mask = tessera::test::ellipsoid_mask(g, 0.9);
  SwiParams p;
  p.high_pass_sigma_xy_voxels = 2.5;
  p.mask_power = 3.0;
  const auto r = tessera::swi(g, mag, ph, te, mask, p);
  const std::vector<double> ref = reference_swi(g, mag, ph, te, mask, 2.5, 3.0);
  double worst = 0, peak = 0;
  uint64_t darkened = 0;
  for (uint64_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::abs(r.swi[i] - ref[i]));
    peak = std::max(peak, std::abs(ref[i]));
    darkened += r.phase_mask[i] < 0.99f;
  }
  std::printf("[ swi ] against the independent implementation: max |difference| %.3g of a peak %.3g (%llu voxels darkened)\n",
              worst, peak, static_cast<unsigned long long>(darkened));
  EXPECT_LT(worst, 1e-4 * peak);
  EXPECT_GT(darkened, n / 10);  // the case exercises the mask
}

TEST(Swi, BitIdenticalForOneAndTwoThreadsAndCancelsBetweenSteps) {
  const Geometry g = tessera::test::geometry(40, 40, 12);  // 19200 voxels: two parallel blocks
  const uint64_t n = g.voxel_count();
  const std::vector<double> te = {0.004, 0.008, 0.012};
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<float> mag(3 * n), ph(3 * n);
  for (uint64_t i = 0; i < 3 * n; ++i) {
    mag[i] = static_cast<float>(1.0 + 0.5 * u(rng));
    ph[i] = static_cast<float>(2.0 * u(rng));
  }
  SwiParams p;
  p.high_pass_sigma_z_voxels = 1.0;
  const auto one = tessera::swi(g, mag, ph, te, {}, p, 1);
  const auto two = tessera::swi(g, mag, ph, te, {}, p, 2);
  EXPECT_EQ(0, std::memcmp(one.swi.data(), two.swi.data(), n * 4));
  EXPECT_EQ(0, std::memcmp(one.phase_rad.data(), two.phase_rad.data(), n * 4));
  const auto m1 = tessera::min_intensity_projection(g, one.swi, 8.0, 1);
  const auto m2 = tessera::min_intensity_projection(g, one.swi, 8.0, 2);
  EXPECT_EQ(0, std::memcmp(m1.data(), m2.data(), n * 4));

  tessera::Swi s(g, mag, ph, te, {}, p);
  EXPECT_EQ(s.total_steps(), 3u + 3u + 1u);  // echoes, three smoothing axes, the mask
  std::atomic<bool> cancel{false};
  const std::string message = tessera::test::error_of(
      [&] { tessera::run_to_end(s, [&](uint64_t done, uint64_t) { cancel = done >= 4; }, &cancel); },
      tessera::ErrorCode::Cancelled);
  EXPECT_EQ(s.steps_done(), 4u);
  EXPECT_NE(message.find("4 of 7"), std::string::npos) << message;
}

TEST(Swi, RefusesBadInputInWords) {
  const Geometry g = tessera::test::geometry(6, 6, 3);
  const std::vector<double> te = {0.004, 0.008};
  std::vector<float> mag(2 * g.voxel_count(), 1.0f), ph(2 * g.voxel_count(), 0.0f);
  SwiParams p;
  p.mask_power = 0.0;
  std::string m = tessera::test::error_of([&] { tessera::swi(g, mag, ph, te, {}, p); }, tessera::ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("swi.maskPower"), std::string::npos) << m;
  const std::vector<double> one = {0.004};
  m = tessera::test::error_of([&] { tessera::swi(g, mag, ph, one, {}); }, tessera::ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("the magnitude holds 2 echo(es)"), std::string::npos) << m;
  mag[5] = -1.0f;
  m = tessera::test::error_of([&] { tessera::swi(g, mag, ph, te, {}); }, tessera::ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("finite and ≥ 0"), std::string::npos) << m;
}

// The phantom head scanned (wrapped phase, SNR 100): SWI from phase through the echo fit. SWI never exceeds the
// combined magnitude, nothing is NaN, and the veins (their high-passed phase is negative here) are darkened by the
// default (Haacke's) mask more than white matter.
TEST(SwiFromPhase, PhantomScanDarkensVeins) {
  Geometry g;
  g.dims = {64, 64, 48};
  g.voxel_mm = {3.0, 3.0, 3.0};
  tessera::AcquisitionOptions o;
  o.seed = 2;
  o.snr = 100.0;
  const tessera::PhantomAcquisition a = tessera::make_acquisition(g, o);
  tessera::SwiRequest req;
  req.te_s = a.te_s;
  tessera::SwiFromPhase run(g, a.phase, a.magnitude, a.brain_mask, req);
  const uint32_t planned = run.total_steps();
  tessera::run_to_end(run);
  EXPECT_EQ(run.steps_done(), planned);
  const tessera::SwiRunResult r = run.take_result();
  const uint64_t n = g.voxel_count();
  double vein = 0, wm = 0, vein_hp = 0, wm_hp = 0, vein_abs = 0, wm_abs = 0;
  uint64_t nv = 0, nw = 0;
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(r.swi.swi[i]) && std::isfinite(r.min_ip[i]));
    ASSERT_LE(r.swi.swi[i], r.swi.magnitude[i]);
    ASSERT_LE(r.min_ip[i], r.swi.swi[i]);
    if (!a.brain_mask[i]) continue;
    if (a.tissue[i] == static_cast<uint8_t>(tessera::Tissue::Vein)) {
      vein += r.swi.phase_mask[i];
      vein_hp += r.swi.phase_rad[i];
      vein_abs += std::abs(r.swi.phase_rad[i]);
      ++nv;
    } else if (a.tissue[i] == static_cast<uint8_t>(tessera::Tissue::WhiteMatter)) {
      wm += r.swi.phase_mask[i];
      wm_hp += r.swi.phase_rad[i];
      wm_abs += std::abs(r.swi.phase_rad[i]);
      ++nw;
    }
  }
  ASSERT_GT(nv, 0u);
  std::printf("[ swi ] phantom: veins (%llu voxels) mean phase mask %.3f, high-passed phase mean %.3f |mean| %.3f rad; "
              "white matter mask %.3f, phase %.3f |%.3f| rad\n",
              static_cast<unsigned long long>(nv), vein / nv, vein_hp / nv, vein_abs / nv, wm / nw, wm_hp / nw, wm_abs / nw);
  EXPECT_LT(vein / nv, wm / nw - 0.05);
  EXPECT_GT(tessera::swi_from_phase_workspace_bytes(g, req, true), n * 40);
}

}  // namespace
