// TSVD and closed-form Tikhonov (tessera/closed_form.h): the phantom's truth, analytic single-mode and band checks,
// thread bit-identity, refusals.
#include <cmath>
#include <cstring>
#include <numbers>

#include "inversion_support.h"
#include "support.h"
#include "tessera/inversion/closed_form.h"
#include "tessera/common/dipole.h"
#include "tessera/common/fft.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"

namespace tessera {
namespace {

using test::demeaned;
using test::head;
using test::against_truth;

// cos(2π(k·x/N)) on g.
std::vector<float> mode(const Geometry& g, const Dims3& k) {
  std::vector<float> v(g.voxel_count());
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const double phase = 2.0 * std::numbers::pi *
                             (static_cast<double>(k[0] * x) / g.dims[0] + static_cast<double>(k[1] * y) / g.dims[1] +
                              static_cast<double>(k[2] * z) / g.dims[2]);
        v[g.index(x, y, z)] = static_cast<float>(std::cos(phase));
      }
  return v;
}

Geometry oblique() {
  Geometry g = test::geometry(16, 12, 10);
  g.voxel_mm = {1.0, 1.5, 2.0};
  g.b0_dir = {0.3, 0.2, 1.0};
  return g;
}

TEST(ClosedForm, PaddedDimsAreSmoothAndAtLeastTheRatio) {
  EXPECT_EQ(inversion_padded_dims({64, 67, 48}, 1.0), (Dims3{64, 72, 48}));
  EXPECT_EQ(inversion_padded_dims({64, 67, 48}, 1.5), (Dims3{96, 108, 72}));
  EXPECT_EQ(inversion_padded_dims({64, 67, 1}, 2.0), (Dims3{128, 135, 2}));
  const std::string m = test::error_of([] { inversion_padded_dims({8, 8, 8}, 0.5, "tikhonov"); },
                                       ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("tikhonov: pad_ratio must be in [1, 3]"), std::string::npos) << m;
}

// TSVD's and Tikhonov's padding ratios are the schema's tsvd.padRatio and tikhonov.padRatio: refused by those names.
TEST(ClosedForm, ValidateRefusesPadRatioByItsOptionName) {
  TsvdParams t;
  t.pad_ratio = 3.5;
  std::string m = test::error_of([&] { validate(t); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("tsvd.padRatio must be in [1, 3], got 3.5"), std::string::npos) << m;
  TikhonovParams k;
  k.pad_ratio = 0.5;
  m = test::error_of([&] { validate(k); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("tikhonov.padRatio must be in [1, 3], got 0.5"), std::string::npos) << m;
  k.pad_ratio = 3.0;
  EXPECT_NO_THROW(validate(k));
}

TEST(ClosedForm, TikhonovOfOneModeIsDOverD2PlusLambdaR) {
  const Geometry g = oblique();
  const Dims3 k{3, 2, 1};
  const std::vector<float> f = mode(g, k);
  const std::vector<uint8_t> all(g.voxel_count(), 1);
  const float d = dipole_kernel(g)[g.index(k[0], k[1], k[2])];
  double l = 0.0;
  for (int a = 0; a < 3; ++a) {
    l += (2.0 - 2.0 * std::cos(2.0 * std::numbers::pi * k[a] / g.dims[a])) / (g.voxel_mm[a] * g.voxel_mm[a]);
  }
  for (TikhonovRegulariser reg : {TikhonovRegulariser::Identity, TikhonovRegulariser::Gradient}) {
    TikhonovParams p;
    p.lambda = 0.02;
    p.regulariser = reg;
    const double r = reg == TikhonovRegulariser::Identity ? 1.0 : l;
    const double gain = d / (static_cast<double>(d) * d + p.lambda * r);
    const std::vector<float> chi = tikhonov(g, f, all, p);
    double worst = 0.0;
    for (size_t i = 0; i < f.size(); ++i) worst = std::max(worst, std::fabs(chi[i] - gain * f[i]));
    EXPECT_LT(worst, 1e-5 * std::fabs(gain)) << "regulariser " << static_cast<int>(reg) << ", gain " << gain;
  }
}

TEST(ClosedForm, TsvdInvertsAModeAboveTheThresholdAndDropsOneBelow) {
  const Geometry g = oblique();
  const std::vector<float> kernel = dipole_kernel(g);
  const std::vector<uint8_t> all(g.voxel_count(), 1);
  int above = 0, below = 0;
  for (const Dims3 k : {Dims3{1, 0, 0}, Dims3{0, 0, 1}, Dims3{2, 1, 1}, Dims3{3, 2, 1}, Dims3{1, 1, 2}}) {
    const float d = kernel[g.index(k[0], k[1], k[2])];
    const std::vector<float> f = mode(g, k);
    const std::vector<float> chi = tsvd(g, f, all, {});
    const double gain = std::fabs(d) > tsvd_defaults::kThreshold ? 1.0 / d : 0.0;
    (gain == 0.0 ? below : above)++;
    double worst = 0.0;
    for (size_t i = 0; i < f.size(); ++i) worst = std::max(worst, std::fabs(chi[i] - gain * f[i]));
    EXPECT_LT(worst, 2e-5 * std::max(1.0, std::fabs(gain))) << "mode " << k[0] << k[1] << k[2] << " D " << d;
  }
  EXPECT_GT(above, 0);
  EXPECT_GT(below, 0);
}

// With λ → 0 on a noiseless circular forward field, Tikhonov returns χ wherever |D| is not small.
TEST(ClosedForm, TikhonovWithVanishingLambdaRecoversTheWellConditionedBand) {
  Geometry g = test::geometry(32, 32, 32);
  g.voxel_mm = {6.0, 6.0, 6.0};
  const Phantom ph = make_phantom_chi(g);
  const std::vector<float> f = forward_field(g, ph.chi, 1);
  const std::vector<uint8_t> all(g.voxel_count(), 1);
  TikhonovParams p;
  p.lambda = 1e-7;
  const std::vector<float> chi = tikhonov(g, f, all, p);
  auto band = [&](const std::vector<float>& v) { return test::dipole_band(g, v, 0.1f); };
  const Agreement a = compare_maps(g, band(chi), band(ph.chi), all);
  EXPECT_LT(a.nrmse, 1e-3);
  // Without the band the cone's missing part shows: the closed form is not an exact inverse there.
  EXPECT_GT(compare_maps(g, chi, ph.chi, all).nrmse, 10 * a.nrmse);
}

TEST(ClosedForm, PhantomTruthIsRecovered) {
  const Geometry g = head();
  for (double noise : {0.0, 0.002}) {
    const Phantom ph = make_phantom(g, {1, noise});
    const Agreement ts = against_truth(g, tsvd(g, ph.field, ph.mask), ph);
    const Agreement ti = against_truth(g, tikhonov(g, ph.field, ph.mask), ph);
    TikhonovParams grad;
    grad.regulariser = TikhonovRegulariser::Gradient;
    const Agreement tg = against_truth(g, tikhonov(g, ph.field, ph.mask, grad), ph);
    const Agreement tk = against_truth(g, tkd(g, ph.field, ph.mask), ph);
    std::printf("noise %.3f ppm: TKD r %.3f nrmse %.3f | TSVD r %.3f nrmse %.3f | Tikhonov identity r %.3f nrmse %.3f"
                " | gradient r %.3f nrmse %.3f\n",
                noise, tk.r, tk.nrmse, ts.r, ts.nrmse, ti.r, ti.nrmse, tg.r, tg.nrmse);
    // A direct k-space inversion loses the cone (streaks) and passes the noise: r near 0.9 is what it can do.
    const double floor = noise == 0.0 ? 0.85 : 0.80;
    EXPECT_GT(ts.r, floor);
    EXPECT_GT(ti.r, floor + 0.03);
    EXPECT_GT(tg.r, floor + 0.03);
    EXPECT_LT(ti.nrmse, 0.5);
  }
}

TEST(ClosedForm, ResultsAreBitIdenticalForAnyThreadCount) {
  const Geometry g = head();
  const Phantom ph = make_phantom(g, {2, 0.002});
  TikhonovParams grad;
  grad.regulariser = TikhonovRegulariser::Gradient;
  const std::vector<float> a1 = tsvd(g, ph.field, ph.mask, {}, 1), a3 = tsvd(g, ph.field, ph.mask, {}, 3);
  const std::vector<float> b1 = tikhonov(g, ph.field, ph.mask, grad, 1), b3 = tikhonov(g, ph.field, ph.mask, grad, 3);
  EXPECT_EQ(std::memcmp(a1.data(), a3.data(), a1.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(b1.data(), b3.data(), b1.size() * sizeof(float)), 0);
  for (size_t i = 0; i < a1.size(); ++i) {
    if (!ph.mask[i]) {
      ASSERT_EQ(a1[i], 0.0f);
    }
  }
}

TEST(ClosedForm, BadParametersAndEmptyMasksAreRefusedByName) {
  const Geometry g = oblique();
  const std::vector<float> f(g.voxel_count(), 0.01f);
  const std::vector<uint8_t> all(g.voxel_count(), 1), none(g.voxel_count(), 0);
  TsvdParams t;
  t.threshold = 0.9;
  std::string m = test::error_of([&] { tsvd(g, f, all, t); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("tsvd.threshold must be in (0, 2/3)"), std::string::npos) << m;
  EXPECT_NE(m.find("got 0.9"), std::string::npos) << m;
  TikhonovParams k;
  k.lambda = -1;
  m = test::error_of([&] { tikhonov(g, f, all, k); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("tikhonov.lambda must be in (0, 1000]"), std::string::npos) << m;
  k = {};
  k.regulariser = static_cast<TikhonovRegulariser>(7);
  m = test::error_of([&] { tikhonov_workspace_bytes(g, k); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("tikhonov: regulariser must be identity or gradient"), std::string::npos) << m;
  m = test::error_of([&] { tikhonov(g, f, none); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("mask"), std::string::npos) << m;
  m = test::error_of([&] { tsvd(g, std::span<const float>(f).first(10), all); }, ErrorCode::InvalidArgument);
  std::vector<float> bad = f;
  bad[5] = NAN;
  test::error_of([&] { tsvd(g, bad, all); }, ErrorCode::NonFiniteInput);
}

TEST(ClosedForm, WorkspaceCoversThePaddedComplexVolume) {
  const Geometry g = head();
  TikhonovParams p;
  const uint64_t n = g.voxel_count();
  EXPECT_GE(tikhonov_workspace_bytes(g, p), n * 8 + n * 4 + fft3d_workspace_bytes(g.dims));
  p.pad_ratio = 2.0;
  const uint64_t padded = 8 * n;
  EXPECT_GE(tikhonov_workspace_bytes(g, p, 3), padded * 8 + n * 4 + fft3d_workspace_bytes({128, 128, 96}, 3));
  // a volume whose padded voxel count passes 2^32 (wasm32's size_t) is counted in 64 bits
  // (wasm32 cannot hold such a volume at all: it is refused as unaddressable)
  Geometry big = test::geometry(2048, 2048, 1200);
  if constexpr (sizeof(size_t) == 8) {
    EXPECT_GT(tsvd_workspace_bytes(big, {}), uint64_t{2048} * 2048 * 1200 * 8);
  } else {
    test::error_of([&] { tsvd_workspace_bytes(big, {}); }, ErrorCode::InvalidArgument);
  }
}

}  // namespace
}  // namespace tessera
