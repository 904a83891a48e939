#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "support.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/sim/phantom.h"

namespace {

using tessera::AcquisitionOptions;
using tessera::Geometry;
using tessera::PhantomAcquisition;
using tessera::Tissue;

using tessera::test::kPi;

Geometry head_geometry() {
  Geometry g;
  g.dims = {64, 64, 48};
  g.voxel_mm = {3.0, 3.0, 3.0};
  return g;
}

AcquisitionOptions options(uint64_t seed, double snr, unsigned threads = 1) {
  AcquisitionOptions o;
  o.seed = seed;
  o.snr = snr;
  o.threads = threads;
  return o;
}

// The noiseless acquisition of seed 5, shared by the tests that only read it.
const PhantomAcquisition& noiseless() {
  static const PhantomAcquisition acq = tessera::make_acquisition(head_geometry(), options(5, 0.0));
  return acq;
}

// The same scan with noise (snr 50), on 3 threads.
const PhantomAcquisition& noisy() {
  static const PhantomAcquisition acq = tessera::make_acquisition(head_geometry(), options(5, 50.0, 3));
  return acq;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The mask eroded by a ball of radius r voxels (brute force; small volumes only).
std::vector<uint8_t> erode(const Geometry& g, const std::vector<uint8_t>& m, int r) {
  std::vector<uint8_t> out(m.size(), 0);
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        if (!m[g.index(x, y, z)]) continue;
        bool inside = true;
        for (int dz = -r; dz <= r && inside; ++dz)
          for (int dy = -r; dy <= r && inside; ++dy)
            for (int dx = -r; dx <= r && inside; ++dx) {
              if (dx * dx + dy * dy + dz * dz > r * r) continue;
              const int64_t xx = x + dx, yy = y + dy, zz = z + dz;
              if (xx < 0 || yy < 0 || zz < 0 || xx >= g.dims[0] || yy >= g.dims[1] || zz >= g.dims[2] ||
                  !m[g.index(xx, yy, zz)]) {
                inside = false;
              }
            }
        out[g.index(x, y, z)] = inside ? 1 : 0;
      }
  return out;
}

// Angle between two phases, in [0, pi].
double angle_between(double a, double b) { return std::fabs(std::remainder(a - b, 2.0 * kPi)); }

TEST(Acquisition, HeadSusceptibilitiesAreTheCitedValues) {
  // Schenck 1996 Med Phys 23:815: air +0.36 ppm, water -9.05 ppm (SI volume susceptibilities).
  EXPECT_NEAR(tessera::head_chi::air, 0.36 - (-9.05), 1e-5);
  // Skull bone about -2 ppm relative to water (Hopkins & Wehrli 1997; Buch et al. 2015).
  EXPECT_NEAR(tessera::head_chi::bone, -2.0, 0.3);
  EXPECT_EQ(tessera::head_chi::soft_tissue, 0.0f);

  const Geometry g = head_geometry();
  const auto& a = noiseless();
  const auto brain = tessera::make_phantom_chi(g, 5);
  ASSERT_TRUE(same_bits(a.brain_chi, brain.chi));
  ASSERT_TRUE(same_bits(a.brain_mask, brain.mask));
  uint64_t counts[tessera::kTissueCount] = {};
  for (size_t i = 0; i < a.chi.size(); ++i) {
    const auto t = static_cast<Tissue>(a.tissue[i]);
    ++counts[a.tissue[i]];
    if (a.brain_mask[i]) {
      ASSERT_EQ(a.chi[i], a.brain_chi[i]);
      ASSERT_GE(a.tissue[i], static_cast<uint8_t>(Tissue::Csf));
    } else if (t == Tissue::Air) {
      ASSERT_EQ(a.chi[i], tessera::head_chi::air);
    } else if (t == Tissue::Bone) {
      ASSERT_EQ(a.chi[i], tessera::head_chi::bone);
    } else {
      ASSERT_TRUE(t == Tissue::SoftTissue || t == Tissue::Csf) << static_cast<int>(t);
      ASSERT_EQ(a.chi[i], tessera::head_chi::soft_tissue);
    }
    ASSERT_EQ(a.head_mask[i], t == Tissue::Air ? 0 : 1);
  }
  for (Tissue t : {Tissue::Air, Tissue::Bone, Tissue::SoftTissue, Tissue::Csf, Tissue::WhiteMatter}) {
    EXPECT_GT(counts[static_cast<int>(t)], 0u) << static_cast<int>(t);
  }
  EXPECT_EQ(a.chi[0], tessera::head_chi::air);  // a corner of the field of view

  // Along each ray from the centre (left, right, back, front, up): brain, then skull before the first air voxel.
  const int64_t cx = g.dims[0] / 2, cy = g.dims[1] / 2, cz = g.dims[2] / 2;
  const int64_t dirs[5][3] = {{-1, 0, 0}, {1, 0, 0}, {0, -1, 0}, {0, 1, 0}, {0, 0, 1}};
  for (const auto& d : dirs) {
    bool bone = false, air = false;
    for (int64_t s = 0;; ++s) {
      const int64_t x = cx + d[0] * s, y = cy + d[1] * s, z = cz + d[2] * s;
      if (x < 0 || y < 0 || z < 0 || x >= g.dims[0] || y >= g.dims[1] || z >= g.dims[2]) break;
      const auto t = static_cast<Tissue>(a.tissue[g.index(x, y, z)]);
      if (t == Tissue::Bone) bone = true;
      if (t == Tissue::Air) {
        air = true;
        break;
      }
    }
    EXPECT_TRUE(bone && air) << "ray " << d[0] << " " << d[1] << " " << d[2];
  }

  // Air cavities: air within 6 mm of the brain exists (the sinuses, ear canals, mastoids), while the skin is
  // 9 mm (scaled) away from the brain; outside the head there is no tissue within 6 mm of the border of the field.
  uint64_t near_air = 0;
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        if (a.tissue[g.index(x, y, z)] != static_cast<uint8_t>(Tissue::Air)) continue;
        bool near = false;
        for (int dz = -2; dz <= 2 && !near; ++dz)
          for (int dy = -2; dy <= 2 && !near; ++dy)
            for (int dx = -2; dx <= 2 && !near; ++dx) {
              const int64_t xx = x + dx, yy = y + dy, zz = z + dz;
              if (dx * dx + dy * dy + dz * dz > 4 || xx < 0 || yy < 0 || zz < 0 || xx >= g.dims[0] ||
                  yy >= g.dims[1] || zz >= g.dims[2])
                continue;
              near = a.brain_mask[g.index(xx, yy, zz)] != 0;
            }
        near_air += near ? 1 : 0;
      }
  EXPECT_GT(near_air, 20u);
}

TEST(Acquisition, FieldsAddUpAndTheLocalFieldIsMakePhantoms) {
  const Geometry g = head_geometry();
  const auto& a = noiseless();
  const size_t n = a.chi.size();
  ASSERT_EQ(a.total_field.size(), n);
  ASSERT_EQ(a.local_field.size(), n);
  ASSERT_EQ(a.background_field.size(), n);
  for (size_t i = 0; i < n; ++i) {
    const double sum = static_cast<double>(a.local_field[i]) + static_cast<double>(a.background_field[i]);
    const double scale = std::fabs(a.total_field[i]) + std::fabs(a.local_field[i]) + 1e-6;
    ASSERT_LE(std::fabs(sum - a.total_field[i]), 2e-7 * scale) << i;
  }
  // make_phantom's field (no noise, the same padding) is the local field inside its mask, to the bit.
  tessera::PhantomOptions po;
  po.seed = 5;
  const auto ph = tessera::make_phantom(g, po);
  uint64_t outside_nonzero = 0;
  for (size_t i = 0; i < n; ++i) {
    if (ph.mask[i]) {
      ASSERT_EQ(std::memcmp(&ph.field[i], &a.local_field[i], sizeof(float)), 0) << i;
    } else if (a.local_field[i] != 0.0f) {
      ++outside_nonzero;
    }
  }
  EXPECT_GT(outside_nonzero, n / 2);  // defined everywhere, not masked

  // The head is diamagnetic relative to air (chi' = -9.41 ppm): its dipole field in the air is negative just above
  // and below the head along B0 (z) and positive beside it, each some ppm (a sphere: -2/3 and +1/3 of 9.41 at the
  // surface, relative to the field inside).
  const auto deep = erode(g, a.brain_mask, 5);
  double inside = 0.0;
  uint64_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (deep[i]) {
      inside += a.total_field[i];
      ++count;
    }
  }
  ASSERT_GT(count, 1000u);
  inside /= static_cast<double>(count);
  auto first_air = [&](int dx, int dz) {
    int64_t x = g.dims[0] / 2, z = g.dims[2] / 2;
    while (a.tissue[g.index(x, g.dims[1] / 2, z)] != static_cast<uint8_t>(Tissue::Air)) {
      x += dx;
      z += dz;
    }
    return static_cast<double>(a.total_field[g.index(x, g.dims[1] / 2, z)]) - inside;
  };
  const double above = first_air(0, 1), beside = first_air(1, 0);
  std::printf("total field at the air above the head %.2f ppm, beside it %.2f ppm (relative to the deep brain)\n",
              above, beside);
  EXPECT_LT(above, -2.0);
  EXPECT_GT(beside, 1.0);
}

// The background's sources all lie outside the brain, so inside it the field is harmonic whatever B0's direction: the
// 7-point Laplacian of a head scanned 30° off the axes is as small deep in the brain as upright's (a discrete kernel
// with the oblique cross terms' jump at the Nyquist frequency rang there voxel to voxel, ±0.1 ppm).
TEST(Acquisition, BackgroundHarmonicInTheBrainForAnObliqueB0) {
  auto laplacian_rms = [](double tilt_degrees, double& step_rms) {
    Geometry g = head_geometry();
    const double t = tilt_degrees * kPi / 180.0;
    g.b0_dir = {0.0, std::sin(t), std::cos(t)};
    const PhantomAcquisition a = tessera::make_acquisition(g, options(5, 0.0));
    const auto deep = erode(g, a.brain_mask, 5);
    const auto& f = a.background_field;
    double l2 = 0.0, s2 = 0.0;
    uint64_t count = 0;
    for (int64_t z = 1; z + 1 < g.dims[2]; ++z)
      for (int64_t y = 1; y + 1 < g.dims[1]; ++y)
        for (int64_t x = 1; x + 1 < g.dims[0]; ++x) {
          const uint64_t i = g.index(x, y, z);
          if (!deep[i]) continue;
          const double l = f[g.index(x + 1, y, z)] + f[g.index(x - 1, y, z)] + f[g.index(x, y + 1, z)] +
                           f[g.index(x, y - 1, z)] + f[g.index(x, y, z + 1)] + f[g.index(x, y, z - 1)] - 6.0 * f[i];
          const double s = f[g.index(x + 1, y, z)] - f[i];
          l2 += l * l, s2 += s * s, ++count;
        }
    step_rms = std::sqrt(s2 / static_cast<double>(count));
    return std::sqrt(l2 / static_cast<double>(count));
  };
  double upright_step, oblique_step;
  const double upright = laplacian_rms(0.0, upright_step), oblique = laplacian_rms(30.0, oblique_step);
  std::printf("background deep in the brain: RMS Laplacian %.4f ppm upright, %.4f ppm at 30 deg; RMS x step %.4f / "
              "%.4f ppm\n", upright, oblique, upright_step, oblique_step);
  EXPECT_LT(oblique, 1.5 * upright);
  EXPECT_LT(oblique_step, 2.0 * upright_step);
}

TEST(Acquisition, BackgroundLargeNearTheCavitiesAndSmoothDeepInTheBrain) {
  const Geometry g = head_geometry();
  const auto& a = noiseless();
  const auto deep = erode(g, a.brain_mask, 5);  // 15 mm inside the brain
  float lo = 1e9f, hi = -1e9f, brain_max = 0.0f, tissue_max = 0.0f;
  for (size_t i = 0; i < a.chi.size(); ++i) {
    const float b = a.background_field[i];
    if (deep[i]) {
      lo = std::min(lo, b);
      hi = std::max(hi, b);
    }
    if (a.brain_mask[i]) brain_max = std::max(brain_max, std::fabs(b));
    if (a.head_mask[i]) tissue_max = std::max(tissue_max, std::fabs(b));
  }
  std::printf("background: deep brain [%.3f, %.3f] ppm, max |bg| in the brain %.2f ppm, in the head's tissue %.2f ppm\n",
              lo, hi, brain_max, tissue_max);
  // Deep in the brain the background is nearly uniform (a uniform ellipsoid has a uniform field inside) ...
  EXPECT_LT(hi - lo, 0.5f);
  // ... the air-tissue interfaces next to the brain reach ppm (9.41 ppm air: of the order of 9.41/3).
  EXPECT_GT(brain_max, 1.0f);
  EXPECT_GT(tissue_max, 2.0f);
  EXPECT_LT(tissue_max, 9.41f);
}

TEST(Acquisition, PhaseIsTheWrappedFieldAtEachEchoWithoutNoise) {
  const Geometry g = head_geometry();
  const auto& a = noiseless();
  const size_t n = a.chi.size();
  ASSERT_EQ(a.te_s.size(), 5u);
  ASSERT_EQ(a.phase.size(), 5 * n);
  ASSERT_EQ(a.magnitude.size(), 5 * n);
  EXPECT_EQ(a.b0_tesla, 3.0);
  EXPECT_EQ(a.noise_sigma, 0.0);
  const double gamma_bar = 42.577478518e6;  // Hz/T, CODATA 2018
  double worst = 0.0;
  for (size_t e = 0; e < a.te_s.size(); ++e) {
    for (size_t i = 0; i < n; ++i) {
      const double want = a.phase_offset[i] + 2.0 * kPi * gamma_bar * a.b0_tesla * a.te_s[e] * a.total_field[i] * 1e-6;
      const float got = a.phase[e * n + i];
      ASSERT_LE(std::fabs(got), static_cast<float>(kPi));
      worst = std::max(worst, angle_between(got, want));
    }
  }
  EXPECT_LE(worst, 2e-6);
  // The receive phase is smooth: a quadratic in x, y and z, so third differences along each axis vanish.
  float spread = 0.0f;
  for (size_t i = 1; i < n; ++i) spread = std::max(spread, std::fabs(a.phase_offset[i] - a.phase_offset[0]));
  EXPECT_GT(spread, 0.1f);
  const int64_t step[3] = {1, g.dims[0], g.dims[0] * g.dims[1]};
  for (int axis = 0; axis < 3; ++axis) {
    for (int64_t z = 0; z + (axis == 2 ? 3 : 0) < g.dims[2]; z += 5)
      for (int64_t y = 0; y + (axis == 1 ? 3 : 0) < g.dims[1]; y += 5)
        for (int64_t x = 0; x + (axis == 0 ? 3 : 0) < g.dims[0]; x += 5) {
          const size_t i = g.index(x, y, z);
          const double d3 = a.phase_offset[i + 3 * step[axis]] - 3.0 * a.phase_offset[i + 2 * step[axis]] +
                            3.0 * a.phase_offset[i + step[axis]] - a.phase_offset[i];
          ASSERT_LE(std::fabs(d3), 5e-6) << axis;
        }
  }
}

TEST(Acquisition, MagnitudeDecaysWithTheTissuesT2star) {
  const auto& a = noiseless();
  const size_t n = a.chi.size();
  // Peters et al. 2007 Magn Reson Imaging 25:748, 3 T: frontal white matter 53 ms, cortical grey matter 66 ms.
  EXPECT_NEAR(tessera::tissue_signal(Tissue::WhiteMatter).t2star_s, 0.053, 0.002);
  EXPECT_NEAR(tessera::tissue_signal(Tissue::GreyMatter).t2star_s, 0.066, 0.002);
  for (size_t i = 0; i < n; ++i) {
    const auto sig = tessera::tissue_signal(static_cast<Tissue>(a.tissue[i]));
    for (size_t e = 0; e < a.te_s.size(); ++e) {
      const float m = a.magnitude[e * n + i];
      const double want = sig.m0 * std::exp(-a.te_s[e] / sig.t2star_s);
      ASSERT_NEAR(m, want, 1e-6 * want + 1e-30) << "tissue " << int(a.tissue[i]) << " echo " << e;
    }
    if (a.tissue[i] == static_cast<uint8_t>(Tissue::Air)) ASSERT_EQ(a.magnitude[i], 0.0f);
    if (a.tissue[i] == static_cast<uint8_t>(Tissue::Bone)) ASSERT_LT(a.magnitude[i], 1e-4f);  // a signal void
  }
  // T2* from the first and last echo of a white and a grey matter voxel.
  for (Tissue t : {Tissue::WhiteMatter, Tissue::GreyMatter}) {
    const size_t i = std::find(a.tissue.begin(), a.tissue.end(), static_cast<uint8_t>(t)) - a.tissue.begin();
    ASSERT_LT(i, n);
    const size_t last = a.te_s.size() - 1;
    const double t2 = (a.te_s[last] - a.te_s[0]) / std::log(double(a.magnitude[i]) / a.magnitude[last * n + i]);
    EXPECT_NEAR(t2, tessera::tissue_signal(t).t2star_s, 1e-4) << int(t);
  }
}

TEST(Acquisition, NoiseHasTheRequestedSigma) {
  const auto& clean = noiseless();
  const auto& a = noisy();
  const size_t n = a.chi.size();
  const double sigma = 1.0 / 50.0;
  EXPECT_DOUBLE_EQ(a.noise_sigma, sigma);
  ASSERT_TRUE(same_bits(a.total_field, clean.total_field));
  // Air (no signal): the magnitude is Rayleigh: E[m^2] = 2 sigma^2, E[m] = sigma sqrt(pi/2).
  double m1 = 0.0, m2 = 0.0;
  uint64_t air = 0;
  uint64_t quadrant[4] = {};  // of the noise's phase (noisy - clean) in air: uniform on the circle
  // White matter at the first echo: phase error sigma / m, magnitude mean m (SNR ~ 32 here).
  double dphi2 = 0.0, dm = 0.0;
  uint64_t wm = 0;
  const double m_wm = clean.magnitude[std::find(clean.tissue.begin(), clean.tissue.end(),
                                                static_cast<uint8_t>(Tissue::WhiteMatter)) -
                                      clean.tissue.begin()];
  for (size_t e = 0; e < a.te_s.size(); ++e) {
    for (size_t i = 0; i < n; ++i) {
      const size_t k = e * n + i;
      if (a.tissue[i] == static_cast<uint8_t>(Tissue::Air)) {
        m1 += a.magnitude[k];
        m2 += double(a.magnitude[k]) * a.magnitude[k];
        ++air;
        const double d = std::remainder(double(a.phase[k]) - clean.phase[k], 2.0 * kPi);  // in [-pi, pi]
        ++quadrant[std::min(3, static_cast<int>((d + kPi) / (0.5 * kPi)))];
      }
      if (e == 0 && a.tissue[i] == static_cast<uint8_t>(Tissue::WhiteMatter)) {
        const double d = angle_between(a.phase[k], clean.phase[k]);
        dphi2 += d * d;
        dm += a.magnitude[k] - clean.magnitude[k];
        ++wm;
      }
    }
  }
  ASSERT_GT(air, 100000u);
  ASSERT_GT(wm, 10000u);
  EXPECT_NEAR(m2 / air, 2.0 * sigma * sigma, 0.02 * 2.0 * sigma * sigma);
  EXPECT_NEAR(m1 / air, sigma * std::sqrt(kPi / 2.0), 0.02 * sigma);
  for (uint64_t q : quadrant) EXPECT_NEAR(double(q) / air, 0.25, 0.01);
  EXPECT_NEAR(std::sqrt(dphi2 / wm), sigma / m_wm, 0.05 * sigma / m_wm);
  EXPECT_NEAR(dm / wm, 0.0, 0.05 * sigma);
  for (float p : a.phase) ASSERT_LE(std::fabs(p), static_cast<float>(kPi));
}

TEST(Acquisition, SameSeedSameBitsForAnyThreadsAnotherSeedDiffers) {
  const Geometry g = head_geometry();
  const auto one = tessera::make_acquisition(g, options(5, 50.0, 1));
  const auto& three = noisy();
  EXPECT_TRUE(same_bits(one.chi, three.chi));
  EXPECT_TRUE(same_bits(one.tissue, three.tissue));
  EXPECT_TRUE(same_bits(one.total_field, three.total_field));
  EXPECT_TRUE(same_bits(one.local_field, three.local_field));
  EXPECT_TRUE(same_bits(one.background_field, three.background_field));
  EXPECT_TRUE(same_bits(one.phase_offset, three.phase_offset));
  EXPECT_TRUE(same_bits(one.magnitude, three.magnitude));
  EXPECT_TRUE(same_bits(one.phase, three.phase));
  auto o = options(6, 50.0, 1);
  o.receive_phase = false;
  const auto other = tessera::make_acquisition(g, o);
  EXPECT_FALSE(same_bits(other.chi, one.chi));
  EXPECT_FALSE(same_bits(other.magnitude, one.magnitude));
  EXPECT_FALSE(same_bits(other.phase, one.phase));
  for (float p : other.phase_offset) ASSERT_EQ(p, 0.0f);
}

TEST(Acquisition, RefusesBadOptionsByName) {
  const Geometry g = head_geometry();
  auto bad = [&](auto edit) {
    AcquisitionOptions o;
    edit(o);
    return tessera::test::error_of([&] { tessera::make_acquisition(g, o); }, tessera::ErrorCode::InvalidArgument);
  };
  EXPECT_NE(bad([](auto& o) { o.te_s = {0.004, 8.0}; }).find("te_s[1]"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.te_s = {4.0}; }).find("seconds"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.te_s.clear(); }).find("te_s"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.te_s = {std::nan("")}; }).find("te_s[0]"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.b0_tesla = 0.0; }).find("b0_tesla"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.snr = -1.0; }).find("snr"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.snr = std::nan(""); }).find("snr"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.pad_factor = 5; }).find("pad_factor"), std::string::npos);
  Geometry zero = g;
  zero.dims[1] = 0;
  EXPECT_THROW(tessera::make_acquisition(zero), tessera::Error);
  EXPECT_THROW(tessera::tissue_signal(static_cast<Tissue>(200)), tessera::Error);
}

TEST(Acquisition, WorkspaceBoundCoversTheOutputs) {
  const Geometry g = head_geometry();
  const auto& a = noiseless();
  const uint64_t outputs = (a.chi.size() + a.brain_chi.size() + a.total_field.size() + a.local_field.size() +
                            a.background_field.size() + a.phase_offset.size() + a.magnitude.size() + a.phase.size()) *
                               sizeof(float) +
                           a.brain_mask.size() + a.head_mask.size() + a.tissue.size();
  const uint64_t bound = tessera::acquisition_workspace_bytes(g, AcquisitionOptions{});
  EXPECT_GE(bound, outputs);
  EXPECT_LT(bound, outputs + 40u * g.voxel_count() * 8u);  // plus at most the padded forward model's work
}

}  // namespace

// ---- head variation and oblique slabs ----

namespace {

using tessera::HeadVariation;
using tessera::Vec3;

AcquisitionOptions varied(const HeadVariation& head, uint64_t seed = 5) {
  AcquisitionOptions o;
  o.seed = seed;
  o.head = head;
  o.te_s = {0.004, 0.012};
  return o;
}

// Air voxels within 20 mm of the midline with tissue both in front and behind them along y: the frontal and sphenoid
// sinuses (a point outside a convex head cannot have tissue on both sides, and the ear canals and mastoids are lateral).
struct MidlineAir {
  uint64_t count = 0;
  double mean_z_mm = 0.0;
  std::vector<uint8_t> mask;
};
MidlineAir midline_air(const Geometry& g, const PhantomAcquisition& acq) {
  MidlineAir air;
  air.mask.assign(acq.tissue.size(), 0);
  double sum_z = 0.0;
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t x = 0; x < g.dims[0]; ++x) {
      const double x_mm = (static_cast<double>(x) - 0.5 * static_cast<double>(g.dims[0] - 1)) * g.voxel_mm[0];
      if (std::fabs(x_mm) > 20.0) continue;
      int64_t first = -1, last = -1;  // the head's extent along this y line
      for (int64_t y = 0; y < g.dims[1]; ++y) {
        if (acq.head_mask[g.index(x, y, z)]) {
          if (first < 0) first = y;
          last = y;
        }
      }
      for (int64_t y = first + 1; first >= 0 && y < last; ++y) {
        const uint64_t i = g.index(x, y, z);
        if (acq.tissue[i] != static_cast<uint8_t>(Tissue::Air)) continue;
        air.mask[i] = 1;
        ++air.count;
        sum_z += (static_cast<double>(z) - 0.5 * static_cast<double>(g.dims[2] - 1)) * g.voxel_mm[2];
      }
    }
  air.mean_z_mm = air.count ? sum_z / static_cast<double>(air.count) : 0.0;
  return air;
}

}  // namespace

TEST(Acquisition, DefaultVariationIsTheReferenceHeadAndSeedZeroDrawsIt) {
  const HeadVariation d = tessera::head_variation(0);
  const HeadVariation r{};
  EXPECT_EQ(d.size, r.size);
  EXPECT_EQ(d.skull_mm, r.skull_mm);
  EXPECT_EQ(d.frontal_sinus, r.frontal_sinus);
  EXPECT_EQ(d.ear_canal_radius_mm, r.ear_canal_radius_mm);
  // An explicit default variation renders the noiseless head of seed 5 bit for bit.
  AcquisitionOptions o = options(5, 0.0);
  o.head = d;
  const auto acq = tessera::make_acquisition(head_geometry(), o);
  EXPECT_TRUE(same_bits(acq.tissue, noiseless().tissue));
  EXPECT_TRUE(same_bits(acq.total_field, noiseless().total_field));
  EXPECT_TRUE(same_bits(acq.phase, noiseless().phase));
}

TEST(Acquisition, VariationSeedsGiveDifferentHeadsAndTheSameSeedTheSameBits) {
  const Geometry g = head_geometry();
  const auto one = tessera::make_acquisition(g, varied(tessera::head_variation(1)));
  const auto again = tessera::make_acquisition(g, varied(tessera::head_variation(1)));
  const auto two = tessera::make_acquisition(g, varied(tessera::head_variation(2)));
  EXPECT_TRUE(same_bits(one.chi, again.chi));
  EXPECT_TRUE(same_bits(one.tissue, again.tissue));
  EXPECT_TRUE(same_bits(one.total_field, again.total_field));
  EXPECT_TRUE(same_bits(one.phase, again.phase));
  EXPECT_FALSE(same_bits(one.head_mask, two.head_mask));
  EXPECT_FALSE(same_bits(one.brain_mask, two.brain_mask));
  // The sinuses move: their air voxels are not the same set.
  const auto air1 = midline_air(g, one), air2 = midline_air(g, two);
  EXPECT_GT(air1.count, 20u);
  EXPECT_GT(air2.count, 20u);
  EXPECT_FALSE(same_bits(air1.mask, air2.mask));
}

TEST(Acquisition, SinusOptionsMoveAndRemoveTheSinuses) {
  const Geometry g = head_geometry();
  const auto reference = midline_air(g, tessera::make_acquisition(g, varied({})));
  HeadVariation up;
  up.frontal_sinus_shift_mm = {0.0, 0.0, 6.0};
  up.sphenoid_sinus_shift_mm = {0.0, 0.0, 6.0};
  const auto raised = midline_air(g, tessera::make_acquisition(g, varied(up)));
  // Both midline sinuses 6 mm up (times the fit-to-view shrink, 0.96 here): their air's mean height follows.
  EXPECT_NEAR(raised.mean_z_mm - reference.mean_z_mm, 6.0 * 0.96, 2.0);
  HeadVariation none;
  none.frontal_sinus = 0.0;
  none.sphenoid_sinus = 0.0;
  EXPECT_EQ(midline_air(g, tessera::make_acquisition(g, varied(none))).count, 0u);
  HeadVariation big;
  big.frontal_sinus = 1.5;
  EXPECT_GT(midline_air(g, tessera::make_acquisition(g, varied(big))).count, reference.count);
}

TEST(Acquisition, TheBrainStaysInsideTheSkullOfEveryVariedHead) {
  const Geometry g = head_geometry();
  for (uint64_t v = 1; v <= 6; ++v) {
    const auto acq = tessera::make_acquisition(g, varied(tessera::head_variation(v), v));
    uint64_t brain = 0, bone = 0;
    for (int64_t z = 0; z < g.dims[2]; ++z)
      for (int64_t y = 0; y < g.dims[1]; ++y)
        for (int64_t x = 0; x < g.dims[0]; ++x) {
          const uint64_t i = g.index(x, y, z);
          bone += acq.tissue[i] == static_cast<uint8_t>(Tissue::Bone);
          if (!acq.brain_mask[i]) continue;
          ++brain;
          ASSERT_TRUE(x > 0 && y > 0 && z > 0 && x + 1 < g.dims[0] && y + 1 < g.dims[1] && z + 1 < g.dims[2]);
          // The skull (at least 4 mm here) and the CSF layer lie between the brain and the scalp: a brain voxel's
          // face neighbours (3 mm away) are never scalp.
          const uint64_t nb[6] = {i - 1, i + 1, g.index(x, y - 1, z), g.index(x, y + 1, z), g.index(x, y, z - 1),
                                  g.index(x, y, z + 1)};
          for (uint64_t j : nb) {
            ASSERT_NE(acq.tissue[j], static_cast<uint8_t>(Tissue::SoftTissue)) << "variation " << v;
          }
        }
    EXPECT_GT(brain, 10000u) << "variation " << v;
    EXPECT_GT(bone, 2000u) << "variation " << v;
  }
}

TEST(Acquisition, HeadShapesAreInMillimetres) {
  // The same 192 mm field of view with isotropic and anisotropic voxels: the same head and skull volume in ml.
  auto volumes = [](const Geometry& g) {
    AcquisitionOptions o = varied(tessera::head_variation(4));
    o.pad_factor = 1;
    const auto acq = tessera::make_acquisition(g, o);
    double head = 0.0, bone = 0.0;
    for (size_t i = 0; i < acq.tissue.size(); ++i) {
      head += acq.head_mask[i];
      bone += acq.tissue[i] == static_cast<uint8_t>(Tissue::Bone);
    }
    const double ml = g.voxel_mm[0] * g.voxel_mm[1] * g.voxel_mm[2] / 1000.0;
    return std::pair{head * ml, bone * ml};
  };
  Geometry iso;
  iso.dims = {64, 64, 64};
  iso.voxel_mm = {3.0, 3.0, 3.0};
  Geometry aniso;
  aniso.dims = {96, 96, 48};
  aniso.voxel_mm = {2.0, 2.0, 4.0};
  const auto [head_iso, bone_iso] = volumes(iso);
  const auto [head_aniso, bone_aniso] = volumes(aniso);
  EXPECT_NEAR(head_aniso / head_iso, 1.0, 0.02) << head_iso << " ml vs " << head_aniso << " ml";
  EXPECT_NEAR(bone_aniso / bone_iso, 1.0, 0.06) << bone_iso << " ml vs " << bone_aniso << " ml";
}

TEST(Acquisition, ObliqueB0FieldIsTheDipoleQuadraticFormOfTheAxisFields) {
  // The dipole kernel is 1/3 - (k.b)^2/k^2, a quadratic form in the unit B0 b, so the field of any b is
  // sum_ij b_i b_j G_ij with G_ii the field for B0 along axis i and G_ij = f((e_i + e_j)/sqrt 2) - (G_ii + G_jj)/2.
  Geometry g;
  g.dims = {40, 44, 36};
  g.voxel_mm = {4.0, 4.0, 4.5};
  AcquisitionOptions o = varied(tessera::head_variation(3));
  o.te_s = {0.004};
  auto field = [&](Vec3 b0) {
    Geometry gb = g;
    gb.b0_dir = b0;
    return tessera::make_acquisition(gb, o);
  };
  const double h = std::sqrt(0.5);
  const auto fx = field({1, 0, 0}), fy = field({0, 1, 0}), fz = field({0, 0, 1});
  const auto fxy = field({h, h, 0}), fyz = field({0, h, h}), fxz = field({h, 0, h});
  // About 30 degrees off z, not normalised (the model normalises it).
  const Vec3 raw{0.9, -0.5, 3.0};
  const auto oblique = field(raw);
  EXPECT_TRUE(same_bits(oblique.chi, fz.chi));  // the anatomy stays on the volume's axes
  const double n = std::sqrt(raw[0] * raw[0] + raw[1] * raw[1] + raw[2] * raw[2]);
  const double b[3] = {raw[0] / n, raw[1] / n, raw[2] / n};
  double worst = 0.0, largest = 0.0, tilt_change = 0.0;
  for (size_t i = 0; i < oblique.total_field.size(); ++i) {
    const double gxx = fx.total_field[i], gyy = fy.total_field[i], gzz = fz.total_field[i];
    const double gxy = fxy.total_field[i] - 0.5 * (gxx + gyy);
    const double gyz = fyz.total_field[i] - 0.5 * (gyy + gzz);
    const double gxz = fxz.total_field[i] - 0.5 * (gxx + gzz);
    const double expected = b[0] * b[0] * gxx + b[1] * b[1] * gyy + b[2] * b[2] * gzz + 2.0 * b[0] * b[1] * gxy +
                            2.0 * b[1] * b[2] * gyz + 2.0 * b[0] * b[2] * gxz;
    worst = std::max(worst, std::fabs(oblique.total_field[i] - expected));
    largest = std::max(largest, std::fabs(expected));
    tilt_change = std::max(tilt_change, std::fabs(static_cast<double>(oblique.total_field[i]) - gzz));
  }
  EXPECT_GT(largest, 1.0);                 // ppm: the air-tissue field
  EXPECT_LT(worst, 1e-5 * largest + 1e-6); // float rounding of seven forward models
  EXPECT_GT(tilt_change, 0.1 * largest);   // the tilt matters
}

TEST(Acquisition, RefusesBadHeadVariationByName) {
  const Geometry g = head_geometry();
  auto bad = [&](auto edit) {
    AcquisitionOptions o;
    edit(o.head);
    return tessera::test::error_of([&] { tessera::make_acquisition(g, o); }, tessera::ErrorCode::InvalidArgument);
  };
  EXPECT_NE(bad([](auto& h) { h.size = 2.0; }).find("size"), std::string::npos);
  EXPECT_NE(bad([](auto& h) { h.shape[2] = 0.5; }).find("shape[2]"), std::string::npos);
  EXPECT_NE(bad([](auto& h) { h.asymmetry = 0.3; }).find("asymmetry"), std::string::npos);
  EXPECT_NE(bad([](auto& h) { h.skull_mm = 0.5; }).find("skull_mm"), std::string::npos);
  EXPECT_NE(bad([](auto& h) { h.frontal_sinus = -1.0; }).find("frontal_sinus"), std::string::npos);
  EXPECT_NE(bad([](auto& h) { h.mastoid_shift_mm[0] = std::nan(""); }).find("mastoid_shift_mm[0]"), std::string::npos);
  EXPECT_NE(bad([](auto& h) { h.ear_canal_radius_mm = 9.0; }).find("ear_canal_radius_mm"), std::string::npos);
  tessera::PhantomOptions p;
  p.head.skull_mm = 20.0;
  EXPECT_THROW(tessera::make_phantom(g, p), tessera::Error);
  // Every drawn head is valid.
  for (uint64_t v = 0; v < 200; ++v) EXPECT_NO_THROW(tessera::validate(tessera::head_variation(v)));
}

// ---- a slab through the head ----

// A slab acquisition keeps the head's size (only x and y fit the field of view) and cuts the brain with its top and
// bottom slices; its local field is the forward model of the brain inside the slab alone and its total field the
// local plus the background field.
TEST(Acquisition, ASlabCutsThroughAFullSizeHead) {
  Geometry tall;  // x and y as the slab's, z tall enough for the whole head (no shrink along any axis)
  tall.dims = {64, 72, 64};
  tall.voxel_mm = {3.0, 3.0, 3.0};
  Geometry slab = tall;
  slab.dims[2] = 16;  // 48 mm
  AcquisitionOptions o = options(5, 0.0);
  o.te_s = {0.004, 0.012};
  const PhantomAcquisition whole = tessera::make_acquisition(tall, o);
  o.slab = true;
  o.slab_centre_mm = 6.0;
  const PhantomAcquisition cut = tessera::make_acquisition(slab, o);
  const uint64_t nxy = 64 * 72;
  auto slice_voxels = [&](const std::vector<uint8_t>& m, int64_t z) {
    uint64_t k = 0;
    for (uint64_t i = 0; i < nxy; ++i) k += m[static_cast<size_t>(static_cast<uint64_t>(z) * nxy + i)];
    return k;
  };
  auto extent_x = [&](const Geometry& g, const std::vector<uint8_t>& m) {
    int64_t lo = g.dims[0], hi = -1;
    for (uint64_t i = 0; i < m.size(); ++i)
      if (m[i]) lo = std::min<int64_t>(lo, static_cast<int64_t>(i % 64)), hi = std::max<int64_t>(hi, static_cast<int64_t>(i % 64));
    return hi - lo + 1;
  };
  // The brain is cut by the field of view: its first and last slices hold brain voxels.
  EXPECT_GT(slice_voxels(cut.brain_mask, 0), 100u);
  EXPECT_GT(slice_voxels(cut.brain_mask, 15), 100u);
  // The same head, the same width: the tall volume's brain spans as many columns in x as the slab's.
  EXPECT_EQ(extent_x(slab, cut.brain_mask), extent_x(tall, whole.brain_mask));
  // Its local field is the forward model of the slab's brain alone; total = local + background.
  const std::vector<float> local = tessera::forward_field(slab, cut.brain_chi, o.pad_factor, 1);
  EXPECT_TRUE(same_bits(local, cut.local_field));
  for (size_t i = 0; i < local.size(); ++i) {  // up to float rounding, as for a whole head
    const double sum = static_cast<double>(cut.local_field[i]) + static_cast<double>(cut.background_field[i]);
    const double scale = std::fabs(cut.total_field[i]) + std::fabs(cut.local_field[i]) + 1e-6;
    ASSERT_LE(std::fabs(sum - cut.total_field[i]), 2e-7 * scale) << i;
  }
  // The field of the head outside the slab reaches into it: the total field is not that of the cut head alone.
  std::vector<float> cut_head(cut.chi.size());
  for (size_t i = 0; i < cut_head.size(); ++i) cut_head[i] = cut.chi[i] - tessera::head_chi::air;
  const std::vector<float> alone = tessera::forward_field(slab, cut_head, o.pad_factor, 1);
  double diff = 0.0;
  uint64_t inside = 0;
  for (size_t i = 0; i < alone.size(); ++i)
    if (cut.brain_mask[i]) diff += std::fabs(alone[i] - cut.total_field[i]), ++inside;
  EXPECT_GT(diff / static_cast<double>(inside), 0.05);  // ppm: the cut faces would add a 9.4 ppm interface
  // A slab centre outside [-100, 100] mm is refused by name.
  o.slab_centre_mm = 150.0;
  EXPECT_NE(tessera::test::error_of([&] { tessera::validate(o); }, tessera::ErrorCode::InvalidArgument).find("slab_centre_mm must be in [-100, 100] mm"),
            std::string::npos);
}
