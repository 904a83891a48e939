#include "tessera/engine/fidelity_model.h"

#include <gtest/gtest.h>

#include <vector>

#include "support.h"

using namespace tessera;
using namespace tessera::test;

namespace {
// A measured profile whose first radius holding 90 % of the dependence is radius90 (of 2 · radius90 + 1 values).
ContextProfile profile_with_radius90(size_t radius90) {
  std::vector<double> within(2 * radius90 + 1);
  for (size_t r = 0; r < within.size(); ++r) {
    within[r] = r < radius90 ? 0.85 * static_cast<double>(r) / static_cast<double>(radius90) : 0.9 + 0.1 * static_cast<double>(r - radius90) / static_cast<double>(radius90 + 1);
  }
  within.back() = 1.0;
  return measured_context_profile(within);
}
}  // namespace

TEST(FidelityModel, ANetworkReachingFurtherThanTheFitIsBeyondIt) {
  EXPECT_FALSE(beyond_fidelity_fit(dipole_context_profile(kFidelityFit.fit_radius)));
  EXPECT_FALSE(beyond_fidelity_fit(dipole_context_profile(12)));
  EXPECT_TRUE(beyond_fidelity_fit(dipole_context_profile(199)));
  // Probed profiles: the demo's (90 % within 29 voxels) is inside, the deep stand-in's (58) beyond.
  EXPECT_FALSE(beyond_fidelity_fit(profile_with_radius90(29)));
  EXPECT_TRUE(beyond_fidelity_fit(profile_with_radius90(58)));
  // A fit with no reach of its own covers every network.
  FidelityFit open = kFidelityFit;
  open.fit_radius = 0;
  EXPECT_FALSE(beyond_fidelity_fit(dipole_context_profile(199), open));
}

TEST(FidelityModel, APredictionBeyondTheFitCarriesTheCautionAndInsideItDoesNot) {
  const Geometry g = geometry(96, 96, 80);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.85);
  FidelityFit open = kFidelityFit;
  open.fit_radius = 0;
  const TileConfig cfg{40, 8};
  for (uint32_t radius : {30u, 199u}) {
    const ContextProfile p = dipole_context_profile(radius);
    const FidelityPrediction plain = FidelityModel(g, mask, p, open).predict(cfg, 56);
    const FidelityPrediction f = FidelityModel(g, mask, p).predict(cfg, 56);
    ASSERT_GT(plain.nrmse, 0.0);
    EXPECT_FALSE(plain.beyond_fit);
    EXPECT_EQ(f.beyond_fit, radius == 199u);
    EXPECT_EQ(f.deficit, plain.deficit);
    EXPECT_DOUBLE_EQ(f.nrmse, plain.nrmse * (radius == 199u ? kFidelityFit.beyond_fit_caution : 1.0));
    EXPECT_LT(f.r, radius == 199u ? plain.r : 1.0);
  }
}
