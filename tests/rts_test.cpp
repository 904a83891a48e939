// RTS (tessera/rts.h): the phantom's truth with and without noise, LSMR's first iterate in closed form, many LSMR
// iterations recover the well-conditioned band, steps (LSMR then ADMM), cancel, thread bit-identity, refusals.
#include <atomic>
#include <cmath>
#include <cstring>

#include "inversion_support.h"
#include "support.h"
#include "tessera/common/dipole.h"
#include "tessera/common/fft.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"
#include "tessera/inversion/rts.h"

namespace tessera {
namespace {

using test::demeaned;
using test::head;

Geometry small() {
  Geometry g = test::geometry(32, 32, 32);
  g.voxel_mm = {6.0, 6.0, 6.0};
  g.b0_dir = {0.1, 0.0, 1.0};
  return g;
}

TEST(Rts, PhantomTruthIsRecovered) {
  const Geometry g = head();
  for (double noise : {0.0, 0.002}) {
    const Phantom ph = make_phantom(g, {1, noise});
    Rts it(g, ph.field, ph.mask);
    run_to_end(it);
    const Agreement a = compare_maps(g, demeaned(it.result(), ph.mask), demeaned(ph.chi, ph.mask), ph.mask);
    std::printf("noise %.3f ppm: RTS r %.3f nrmse %.3f after %u LSMR + %u ADMM iterations (ρ %g)\n", noise, a.r,
                a.nrmse, rts_defaults::kLsmrIterations, it.admm_iterations(), it.penalty());
    EXPECT_GE(a.r, 0.90);
    EXPECT_LT(a.nrmse, 0.45);
    EXPECT_LT(it.admm_iterations(), rts_defaults::kMaxIterations);  // stopped by the tolerance
  }
}

// LSMR's first iterate minimises ‖Aᴴ(b − A x)‖ over x = t Aᴴb: for A = diag(D), t = Σ D⁴|b|² / Σ D⁶|b|². With μ huge
// and delta tiny, step 2 keeps step 1's data everywhere but on the cone, where t D b is ~0 anyway.
TEST(Rts, OneLsmrIterationIsTheClosedFormFirstIterate) {
  const Geometry g = small();
  const std::vector<float> f = forward_field(g, make_phantom_chi(g).chi, 1);
  const std::vector<uint8_t> all(g.voxel_count(), 1);
  RtsParams p;
  p.lsmr_iterations = 1;
  p.max_iterations = 1;
  p.mu = 1e10;
  p.delta = 1e-6;
  const std::vector<float> chi = rts(g, f, all, p);
  const std::vector<float> d = dipole_kernel(g);
  std::vector<Complex> b(f.begin(), f.end());
  fft3d_forward(b, g.dims);
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d2 = static_cast<double>(d[i]) * d[i], b2 = std::norm(std::complex<double>(b[i]));
    num += d2 * d2 * b2;
    den += d2 * d2 * d2 * b2;
  }
  const float t = static_cast<float>(num / den);
  for (size_t i = 0; i < b.size(); ++i) b[i] *= t * d[i];
  fft3d_inverse(b, g.dims);
  std::vector<float> expected(b.size());
  for (size_t i = 0; i < b.size(); ++i) expected[i] = b[i].real();
  const Agreement a = compare_maps(g, chi, expected, all);
  std::printf("first LSMR iterate: t %.4f, NRMSE %.2e\n", t, a.nrmse);
  EXPECT_LT(a.nrmse, 1e-4);
}

// More LSMR iterations converge on the well-conditioned frequencies (μ huge and delta tiny make step 2's first χ-update
// keep step 1's data). In float, LSMR semi-converges: past some 20 iterations the near-null frequencies' rounding grows
// and the band stops improving, which is why RTS stops it early.
TEST(Rts, LsmrConvergesOnTheWellConditionedBand) {
  const Geometry g = small();
  const Phantom ph = make_phantom_chi(g);
  const std::vector<float> f = forward_field(g, ph.chi, 1);
  const std::vector<uint8_t> all(g.voxel_count(), 1);
  auto band = [&](const std::vector<float>& v) { return test::dipole_band(g, v, 0.3f); };
  auto band_error = [&](uint32_t iterations) {
    RtsParams p;
    p.lsmr_iterations = iterations;
    p.max_iterations = 1;
    p.mu = 1e10;
    p.delta = 1e-6;
    return compare_maps(g, band(rts(g, f, all, p)), band(ph.chi), all).nrmse;
  };
  const double e4 = band_error(4), e20 = band_error(20);
  std::printf("band |D| > 0.3 NRMSE: 4 LSMR iterations %.2e, 20 iterations %.2e\n", e4, e20);
  EXPECT_LT(e20, 1e-2);
  EXPECT_LT(e20, e4 / 5);
}

TEST(Rts, StepsAreLsmrThenAdmmIterationsAndBitIdenticalForAnyThreadCount) {
  Geometry g = test::geometry(40, 36, 30);
  g.voxel_mm = {4.0, 4.0, 5.0};
  g.b0_dir = {0.1, 0.2, 1.0};
  const Phantom ph = make_phantom(g, {5, 0.002});
  RtsParams p;
  p.max_iterations = 8;
  p.tolerance = 0.0;
  Rts one(g, ph.field, ph.mask, p, 1), three(g, ph.field, ph.mask, p, 3);
  EXPECT_EQ(one.total_steps(), 12u);
  EXPECT_EQ(one.name(), "RTS");
  std::vector<uint64_t> seen;
  run_to_end(one, [&](uint64_t done, uint64_t total) {
    seen.push_back(done);
    EXPECT_EQ(total, 12u);
    EXPECT_EQ(one.admm_iterations(), done > 4 ? done - 4 : 0);
  });
  run_to_end(three);
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_GT(one.penalty(), p.rho);  // the penalty grew on the way: the rescaling ran in both
  const std::vector<float> a = one.result(), b = three.result();
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!ph.mask[i]) {
      ASSERT_EQ(a[i], 0.0f);
    }
  }
  test::error_of([&] { one.step(); }, ErrorCode::InvalidArgument);
}

TEST(Rts, CancelBetweenStepsStopsAfterTwo) {
  const Geometry g = small();
  const Phantom ph = make_phantom(g);
  Rts it(g, ph.field, ph.mask);
  std::atomic<bool> cancel{false};
  const std::string m = test::error_of(
      [&] { run_to_end(it, [&](uint64_t done, uint64_t) { cancel = done >= 2; }, &cancel); }, ErrorCode::Cancelled);
  EXPECT_EQ(it.steps_done(), 2u);
  EXPECT_NE(m.find("RTS cancelled after 2 of 24 steps"), std::string::npos) << m;
  test::error_of([&] { it.result(); }, ErrorCode::InvalidArgument);
}

TEST(Rts, AZeroFieldGivesZero) {
  const Geometry g = small();
  const std::vector<float> f(g.voxel_count(), 0.0f);
  const std::vector<uint8_t> all(g.voxel_count(), 1);
  for (float v : rts(g, f, all)) ASSERT_EQ(v, 0.0f);
}

TEST(Rts, BadParametersAndEmptyMasksAreRefusedByName) {
  const Geometry g = test::geometry(8, 8, 8);
  const std::vector<float> f(g.voxel_count(), 0.01f);
  const std::vector<uint8_t> all(g.voxel_count(), 1), none(g.voxel_count(), 0);
  auto refused = [&](RtsParams p, const std::string& want) {
    const std::string m = test::error_of([&] { Rts it(g, f, all, p); }, ErrorCode::InvalidArgument);
    EXPECT_NE(m.find(want), std::string::npos) << m;
  };
  RtsParams p;
  p.delta = 0.7;
  refused(p, "rts.delta must be in (0, 2/3), got 0.7 (|D| above which");
  p = {};
  p.mu = 0;
  refused(p, "rts.mu must be in (0, ");
  p = {};
  p.rho = -1;
  refused(p, "rts.rho must be in (0, ");
  p = {};
  p.tolerance = 2;
  refused(p, "rts.tolerance must be in [0, 1), got 2");
  p = {};
  p.max_iterations = 0;
  refused(p, "rts.maxIterations must be a whole number in [1, 10000], got 0");
  p = {};
  p.lsmr_iterations = 0;
  refused(p, "rts.lsmrIterations must be a whole number in [1, 1000], got 0");
  p = {};
  p.pad_ratio = 0.5;
  refused(p, "rts.padRatio must be in [1, 3], got 0.5");
  p = {};
  p.tau = 0;
  refused(p, "rts: tau must be in (0, 1]");
  p = {};
  p.gamma = 0.5;
  refused(p, "rts: gamma must be in [1, 100]");
  const std::string m = test::error_of([&] { rts(g, f, none); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("mask"), std::string::npos) << m;
}

TEST(Rts, WorkspaceCountsItsPaddedBuffers) {
  const Geometry g = head();
  RtsParams p;
  const uint64_t n = g.voxel_count();
  // five complex volumes and one real at the switch from step 1 to step 2
  EXPECT_GE(rts_workspace_bytes(g, p), n * 44 + fft3d_workspace_bytes(g.dims));
  p.pad_ratio = 2.0;
  EXPECT_GE(rts_workspace_bytes(g, p, 3), n * 8 * 44 + fft3d_workspace_bytes({128, 128, 96}, 3));
}

}  // namespace
}  // namespace tessera
