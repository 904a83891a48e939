// TV-ADMM (tessera/tv_admm.h): the phantom's truth with and without noise, the data term on a noiseless field, one
// iteration per step with early convergence, cancel between steps, thread bit-identity, refusals.
#include <atomic>
#include <cmath>
#include <cstring>

#include "inversion_support.h"
#include "support.h"
#include "tessera/inversion/closed_form.h"
#include "tessera/common/dipole.h"
#include "tessera/common/fft.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"
#include "tessera/inversion/tv_admm.h"

namespace tessera {
namespace {

using test::demeaned;
using test::head;
using test::against_truth;

TEST(TvAdmm, PhantomTruthIsRecoveredAndBeatsTikhonov) {
  const Geometry g = head();
  for (double noise : {0.0, 0.002}) {
    const Phantom ph = make_phantom(g, {1, noise});
    TvAdmm it(g, ph.field, ph.mask);
    run_to_end(it);
    const Agreement tv = against_truth(g, it.result(), ph);
    const Agreement tk = against_truth(g, tikhonov(g, ph.field, ph.mask), ph);
    std::printf("noise %.3f ppm: TV r %.3f nrmse %.3f after %u iterations | Tikhonov r %.3f nrmse %.3f\n", noise, tv.r,
                tv.nrmse, it.steps_done(), tk.r, tk.nrmse);
    EXPECT_GE(tv.r, 0.90);
    EXPECT_LT(tv.nrmse, noise == 0.0 ? 0.25 : 0.4);
    EXPECT_GT(tv.r, tk.r);  // the sparsity prior fills the cone a closed form leaves empty
    EXPECT_LT(it.steps_done(), tv_defaults::kMaxIterations);  // stopped by the tolerance
    EXPECT_LT(it.relative_change(), tv_defaults::kTolerance);
  }
}

TEST(TvAdmm, IsotropicTvRecoversThePhantomToo) {
  Geometry g = test::geometry(48, 48, 36);
  g.voxel_mm = {4.0, 4.0, 4.0};
  const Phantom ph = make_phantom(g, {3, 0.0});
  TvAdmmParams p;
  p.isotropic = true;
  const Agreement a = against_truth(g, tv_admm(g, ph.field, ph.mask, p), ph);
  std::printf("isotropic TV 48×48×36 at 4 mm: r %.3f nrmse %.3f\n", a.r, a.nrmse);
  EXPECT_GE(a.r, 0.90);
}

// With a tiny λ the minimiser fits the data: on a noiseless circular forward field the well-conditioned band of χ
// comes back.
TEST(TvAdmm, TinyLambdaFitsTheDataInTheWellConditionedBand) {
  Geometry g = test::geometry(32, 32, 32);
  g.voxel_mm = {6.0, 6.0, 6.0};
  const Phantom ph = make_phantom_chi(g);
  const std::vector<float> f = forward_field(g, ph.chi, 1);
  const std::vector<uint8_t> all(g.voxel_count(), 1);
  TvAdmmParams p;
  p.lambda = 1e-7;
  p.rho = 1e-3;
  p.max_iterations = 60;
  p.tolerance = 1e-5;
  const std::vector<float> chi = tv_admm(g, f, all, p);
  auto band = [&](const std::vector<float>& v) { return test::dipole_band(g, v, 0.1f); };
  const Agreement a = compare_maps(g, band(chi), band(ph.chi), all);
  std::printf("tiny λ: band NRMSE %.2e\n", a.nrmse);
  EXPECT_LT(a.nrmse, 1e-2);
}

TEST(TvAdmm, StepsAreIterationsAndBitIdenticalForAnyThreadCount) {
  Geometry g = test::geometry(40, 36, 30);
  g.voxel_mm = {4.0, 4.0, 5.0};
  g.b0_dir = {0.1, 0.2, 1.0};
  const Phantom ph = make_phantom(g, {5, 0.002});
  TvAdmmParams p;
  p.max_iterations = 6;
  p.tolerance = 0.0;
  TvAdmm one(g, ph.field, ph.mask, p, 1), three(g, ph.field, ph.mask, p, 3);
  EXPECT_EQ(one.total_steps(), 6u);
  EXPECT_EQ(one.name(), "TV-ADMM");
  std::vector<uint64_t> seen;
  run_to_end(one, [&](uint64_t done, uint64_t total) {
    seen.push_back(done);
    EXPECT_EQ(total, 6u);
  });
  run_to_end(three);
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  const std::vector<float> a = one.result(), b = three.result();
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!ph.mask[i]) {
      ASSERT_EQ(a[i], 0.0f);
    }
  }
  test::error_of([&] { one.step(); }, ErrorCode::InvalidArgument);
}

TEST(TvAdmm, CancelBetweenStepsStopsAfterTwo) {
  Geometry g = test::geometry(32, 32, 24);
  g.voxel_mm = {6.0, 6.0, 6.0};
  const Phantom ph = make_phantom(g);
  TvAdmm it(g, ph.field, ph.mask);
  std::atomic<bool> cancel{false};
  const std::string m = test::error_of(
      [&] { run_to_end(it, [&](uint64_t done, uint64_t) { cancel = done >= 2; }, &cancel); }, ErrorCode::Cancelled);
  EXPECT_EQ(it.steps_done(), 2u);
  EXPECT_NE(m.find("TV-ADMM cancelled after 2 of 250 steps"), std::string::npos) << m;
  test::error_of([&] { it.result(); }, ErrorCode::InvalidArgument);
}

TEST(TvAdmm, BadParametersAndEmptyMasksAreRefusedByName) {
  const Geometry g = test::geometry(8, 8, 8);
  const std::vector<float> f(g.voxel_count(), 0.01f);
  const std::vector<uint8_t> all(g.voxel_count(), 1), none(g.voxel_count(), 0);
  auto refused = [&](TvAdmmParams p, const std::string& want) {
    const std::string m = test::error_of([&] { TvAdmm it(g, f, all, p); }, ErrorCode::InvalidArgument);
    EXPECT_NE(m.find(want), std::string::npos) << m;
  };
  TvAdmmParams p;
  p.lambda = 3;
  refused(p, "tv.lambda must be in (0, 1] ppm·mm, got 3 (total-variation weight");
  p = {};
  p.rho = 0;
  refused(p, "tv.rho must be in (0, 1000] ppm·mm, got 0");
  p = {};
  p.tolerance = 1;
  refused(p, "tv.tolerance must be in [0, 1), got 1");
  p = {};
  p.max_iterations = 0;
  refused(p, "tv.maxIterations must be a whole number in [1, 10000], got 0");
  p = {};
  p.pad_ratio = 4;
  refused(p, "tv.padRatio must be in [1, 3], got 4");
  const std::string m = test::error_of([&] { tv_admm(g, f, none); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("mask"), std::string::npos) << m;
}

TEST(TvAdmm, WorkspaceCountsItsPaddedBuffers) {
  const Geometry g = head();
  TvAdmmParams p;
  const uint64_t n = g.voxel_count();
  // two complex and seven real volumes at least
  EXPECT_GE(tv_admm_workspace_bytes(g, p), n * 44 + fft3d_workspace_bytes(g.dims));
  p.pad_ratio = 1.5;
  EXPECT_GE(tv_admm_workspace_bytes(g, p, 3), uint64_t{96} * 96 * 72 * 44 + fft3d_workspace_bytes({96, 96, 72}, 3));
}

}  // namespace
}  // namespace tessera
