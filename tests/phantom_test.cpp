#include "tessera/sim/phantom.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include "tessera/common/error.h"

namespace {
using tessera::Geometry;

Geometry phantom_geom(tessera::Dims3 d, tessera::Vec3 v) {
  Geometry g;
  g.dims = d;
  g.voxel_mm = v;
  return g;
}
}  // namespace

TEST(Phantom, DeterministicForASeedAndDifferentForAnother) {
  const Geometry g = phantom_geom({40, 48, 36}, {4.0, 4.0, 4.0});
  tessera::PhantomOptions o;
  o.seed = 42;
  o.noise_sigma = 0.01;
  const auto a = tessera::make_phantom(g, o);
  const auto b = tessera::make_phantom(g, o);
  EXPECT_EQ(a.chi, b.chi);
  EXPECT_EQ(a.mask, b.mask);
  EXPECT_EQ(a.field, b.field);
  o.seed = 43;
  const auto c = tessera::make_phantom(g, o);
  EXPECT_NE(a.chi, c.chi);
  EXPECT_NE(a.field, c.field);
}

TEST(Phantom, ValuesInTheListedSetAndEveryCompartmentPresent) {
  const Geometry g = phantom_geom({96, 112, 84}, {1.75, 1.75, 1.75});
  const auto ph = tessera::make_phantom_chi(g, 7);
  ASSERT_EQ(ph.chi.size(), g.voxel_count());
  ASSERT_TRUE(ph.field.empty());
  const auto allowed = tessera::phantom_values();
  std::set<float> seen;
  uint64_t in = 0;
  for (size_t i = 0; i < ph.chi.size(); ++i) {
    if (ph.mask[i]) {
      ++in;
      ASSERT_NE(std::find(allowed.begin(), allowed.end(), ph.chi[i]), allowed.end()) << ph.chi[i];
      seen.insert(ph.chi[i]);
    } else {
      ASSERT_EQ(ph.chi[i], 0.0f);
      ASSERT_EQ(ph.mask[i], 0);
    }
  }
  namespace c = tessera::phantom_chi;
  for (float v : {c::white_matter, c::grey_matter, c::csf, c::caudate, c::putamen, c::globus_pallidus, c::red_nucleus,
                  c::substantia_nigra, c::calcification}) {
    EXPECT_TRUE(seen.count(v)) << "compartment " << v << " missing";
  }
  bool vein = false;
  for (float v : c::vein_values) vein = vein || seen.count(v);
  EXPECT_TRUE(vein);
  // The brain fills a sensible part of the field of view and never touches its border.
  EXPECT_GT(in, g.voxel_count() / 5);
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const bool border = x == 0 || y == 0 || z == 0 || x == g.dims[0] - 1 || y == g.dims[1] - 1 || z == g.dims[2] - 1;
        if (border) ASSERT_EQ(ph.mask[g.index(x, y, z)], 0);
      }
}

TEST(Phantom, ShapesAreInMillimetres) {
  // Same field of view (192 mm cube), different and anisotropic voxels: the same brain volume in mm^3.
  auto brain_ml = [](const Geometry& g) {
    const auto ph = tessera::make_phantom_chi(g, 3);
    uint64_t n = 0;
    for (auto m : ph.mask) n += m;
    return static_cast<double>(n) * g.voxel_mm[0] * g.voxel_mm[1] * g.voxel_mm[2] / 1000.0;
  };
  const double iso = brain_ml(phantom_geom({64, 64, 64}, {3.0, 3.0, 3.0}));
  const double aniso = brain_ml(phantom_geom({96, 96, 48}, {2.0, 2.0, 4.0}));
  EXPECT_NEAR(aniso / iso, 1.0, 0.03) << iso << " ml vs " << aniso << " ml";
  EXPECT_GT(iso, 1000.0);  // an adult brain ellipsoid is about 1.3 l
  EXPECT_LT(iso, 1600.0);
  // A small field of view shrinks the head uniformly so that it still fits.
  const Geometry small = phantom_geom({24, 24, 24}, {1.0, 1.0, 1.0});
  const auto ph = tessera::make_phantom_chi(small, 3);
  EXPECT_EQ(ph.mask[small.index(0, 12, 12)], 0);
  EXPECT_EQ(ph.mask[small.index(12, 12, 12)], 1);
}

TEST(Phantom, FieldIsMaskedAndNoiseHasTheRequestedSigma) {
  const Geometry g = phantom_geom({48, 56, 44}, {3.5, 3.5, 3.5});
  tessera::PhantomOptions o;
  o.seed = 9;
  const auto clean = tessera::make_phantom(g, o);
  o.noise_sigma = 0.02;
  const auto noisy = tessera::make_phantom(g, o);
  EXPECT_EQ(clean.chi, noisy.chi);
  double s = 0, s2 = 0, n = 0, fmax = 0;
  for (size_t i = 0; i < clean.field.size(); ++i) {
    if (!clean.mask[i]) {
      ASSERT_EQ(clean.field[i], 0.0f);
      ASSERT_EQ(noisy.field[i], 0.0f);
      continue;
    }
    const double d = static_cast<double>(noisy.field[i]) - clean.field[i];
    s += d;
    s2 += d * d;
    n += 1;
    fmax = std::max(fmax, std::fabs(static_cast<double>(clean.field[i])));
  }
  const double mean = s / n, sd = std::sqrt(s2 / n - mean * mean);
  EXPECT_NEAR(sd, 0.02, 0.02 * 0.05);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_GT(fmax, 0.01);  // a real field, in ppm
  EXPECT_LT(fmax, 1.0);
}

TEST(Phantom, RejectsBadInput) {
  tessera::PhantomOptions o;
  o.noise_sigma = -1.0;
  EXPECT_THROW(tessera::make_phantom(phantom_geom({8, 8, 8}, {1, 1, 1}), o), tessera::Error);
  EXPECT_THROW(tessera::make_phantom(phantom_geom({8, 0, 8}, {1, 1, 1})), tessera::Error);
  EXPECT_THROW(tessera::make_phantom_chi(phantom_geom({8, 8, 8}, {1, -1, 1})), tessera::Error);
}

namespace {
uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
}  // namespace

// chi and mask use only splitmix64 and IEEE basic operations: the same bits natively and in wasm.
// (If the anatomy is changed on purpose, update the checksums.) The field goes through the FFT, whose
// twiddles come from libm: its checksum is printed for comparison, not asserted.
TEST(Phantom, ChiAndMaskAreBitIdenticalAcrossPlatforms) {
  const Geometry g = phantom_geom({40, 48, 36}, {4.0, 4.0, 4.0});
  tessera::PhantomOptions o;
  o.seed = 42;
  o.noise_sigma = 0.01;
  const auto ph = tessera::make_phantom(g, o);
  const uint64_t chi_hash = fnv1a(ph.chi.data(), ph.chi.size() * sizeof(float));
  const uint64_t mask_hash = fnv1a(ph.mask.data(), ph.mask.size());
  const uint64_t field_hash = fnv1a(ph.field.data(), ph.field.size() * sizeof(float));
  std::printf("phantom checksums: chi %016llx mask %016llx field %016llx\n", static_cast<unsigned long long>(chi_hash),
              static_cast<unsigned long long>(mask_hash), static_cast<unsigned long long>(field_hash));
  EXPECT_EQ(chi_hash, 0xd8fdaeabbac6ca9bull);
  EXPECT_EQ(mask_hash, 0xbc526f7aad4a74c3ull);
}
