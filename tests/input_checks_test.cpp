// The plausibility rules of a run's inputs (tessera/common/input_checks.h), against the phantom's fields and hand-made
// volumes whose answer is known.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "support.h"
#include "tessera/common/input_checks.h"
#include "tessera/sim/phantom.h"

namespace tessera {
namespace {

using test::head;

TEST(InputChecks, VoxelSizesOutsideATenthToTenMillimetresWarn) {
  EXPECT_EQ(voxel_size_warning(Geometry{{8, 8, 8}, {1, 1, 1}, {0, 0, 1}}), "");
  EXPECT_EQ(voxel_size_warning(Geometry{{8, 8, 8}, {0.1, 10, 3}, {0, 0, 1}}), "");  // the bounds are within
  const std::string big = voxel_size_warning(Geometry{{8, 8, 8}, {100, 100, 100}, {0, 0, 1}});
  EXPECT_NE(big.find("100×100×100 mm is outside 0.1–10 mm"), std::string::npos) << big;
  EXPECT_NE(voxel_size_warning(Geometry{{8, 8, 8}, {1, 1, 0.001}, {0, 0, 1}}), "");
}

TEST(InputChecks, ASliceIsTooThinForADipoleInversion) {
  const std::string m = test::error_of([] { validate_dipole_extent(Geometry{{64, 64, 1}, {1, 1, 1}, {0, 0, 1}}); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("holds 1 voxel(s) along z"), std::string::npos) << m;
  test::error_of([] { validate_dipole_extent(Geometry{{2, 64, 64}, {1, 1, 1}, {0, 0, 1}}); }, ErrorCode::InvalidArgument);
  validate_dipole_extent(Geometry{{64, 64, 3}, {1, 1, 1}, {0, 0, 1}});
}

// The phantom's true local field in ppm passes; the same field in Hz at 3 T (× 127.7) is refused naming the range and
// the fix; so is the total field (the background left in), whose air-tissue jumps reach several ppm.
TEST(InputChecks, AFieldInHzGivenAsPpmIsRefused) {
  const Geometry g = head(64, 64, 48, 3.0);
  const PhantomAcquisition a = make_acquisition(g, AcquisitionOptions{});
  EXPECT_EQ(implausible_ppm_text(a.local_field, a.brain_mask), "");
  const double hz_per_ppm = kGammaBarMHzPerT * a.b0_tesla;
  std::vector<float> hz(a.local_field.size());
  for (size_t i = 0; i < hz.size(); ++i) hz[i] = static_cast<float>(a.local_field[i] * hz_per_ppm);
  const RobustRange r = robust_range(hz, a.brain_mask);
  const RobustRange ppm = robust_range(a.local_field, a.brain_mask);
  EXPECT_NEAR(r.p99, ppm.p99 * hz_per_ppm, 1e-3 * std::abs(r.p99));
  const std::string m = implausible_ppm_text(hz, a.brain_mask);
  EXPECT_NE(m.find("beyond ±1 ppm"), std::string::npos) << m;
  EXPECT_NE(m.find("--units hz"), std::string::npos) << m;
  std::printf("[ inputs ] local field p1..p99 %.3f..%.3f ppm, as Hz %.1f..%.1f\n", ppm.p1, ppm.p99, r.p1, r.p99);
}

TEST(InputChecks, RobustRangeIsTheFirstAndNinetyNinthPercentileInsideTheMask) {
  std::vector<float> v(101);
  std::vector<uint8_t> mask(101, 1);
  for (int i = 0; i <= 100; ++i) v[static_cast<size_t>(i)] = static_cast<float>(100 - i);  // 0..100, any order
  v.push_back(1e6f);  // outside the mask: not counted
  mask.push_back(0);
  const RobustRange r = robust_range(v, mask);
  EXPECT_EQ(r.p1, 1.0);
  EXPECT_EQ(r.p99, 99.0);
}

TEST(InputChecks, AStageThatLeavesOutMuchOfTheMaskSaysSo) {
  EXPECT_EQ(left_out_warning("the echo fit", 90, 100, "its residual"), "");  // 10 %: within
  EXPECT_EQ(left_out_warning("the echo fit", 80, 100, "its residual"), "");  // 20 %: the bound itself
  EXPECT_EQ(left_out_warning("the echo fit", 79, 100, "its residual"), "the echo fit left out 21 of 100 mask voxels (21 %): its residual");
  EXPECT_EQ(left_out_warning("the echo fit", 35, 100, "its residual"), "the echo fit left out 65 of 100 mask voxels (65 %): its residual");
  // A background removal's erosion: a whole head's 23–43 % is within, more than half is said.
  EXPECT_EQ(left_out_warning("RESHARP", 57, 100, "erosion", kBackgroundLeftOutWarnShare), "");  // 43 %
  EXPECT_EQ(left_out_warning("RESHARP", 50, 100, "erosion", kBackgroundLeftOutWarnShare), "");  // 50 %: the bound itself
  EXPECT_EQ(left_out_warning("RESHARP", 42, 100, "erosion", kBackgroundLeftOutWarnShare),
            "RESHARP left out 58 of 100 mask voxels (58 %): erosion");
}

}  // namespace
}  // namespace tessera
