// TFI, total field inversion (tessera/inversion/tfi.h): a sphere's χ from an analytic total field with a strong source
// outside the mask, the phantom scan through the pipeline from its total field, thread-count bit-identity, cancel,
// refusals.
#include "tessera/common/morphology.h"
#include "tessera/inversion/tfi.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "support.h"
#include "tessera/common/error.h"
#include "tessera/inversion/methods.h"
#include "tessera/pipeline/pipeline.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"

namespace {

using tessera::ErrorCode;
using tessera::Geometry;
using tessera::TfiParams;
using tessera::test::head;

struct Sphere {
  double cx, cy, cz, radius, chi;
};

// The fraction of voxel (x, y, z) inside the sphere, from 4³ sub-samples (partial volume).
double inside_fraction(const Sphere& s, int64_t x, int64_t y, int64_t z) {
  int inside = 0;
  for (int k = 0; k < 64; ++k) {
    const double px = x - 0.375 + 0.25 * (k % 4) - s.cx, py = y - 0.375 + 0.25 * ((k / 4) % 4) - s.cy,
                 pz = z - 0.375 + 0.25 * (k / 16) - s.cz;
    inside += px * px + py * py + pz * pz <= s.radius * s.radius;
  }
  return inside / 64.0;
}

// The analytic field (ppm, B0 along z, Lorentz-corrected) of a uniformly magnetised sphere at a point: χ/3 (a/r)³
// (3 cos²θ − 1) outside, 0 inside.
double sphere_field(const Sphere& s, double x, double y, double z) {
  const double dx = x - s.cx, dy = y - s.cy, dz = z - s.cz;
  const double r2 = dx * dx + dy * dy + dz * dz;
  if (r2 <= s.radius * s.radius) return 0.0;
  const double r = std::sqrt(r2);
  return s.chi / 3.0 * std::pow(s.radius / r, 3.0) * (3.0 * dz * dz / r2 - 1.0);
}

// A 64³ volume at 1 mm: a spherical brain mask (radius 18) holding a sphere of χ 0.1 ppm (radius 5), and a sphere
// of air (χ −9.4 ppm against tissue, radius 8) below the mask along B0, 1 mm clear of it. The total field is the sum
// of the two analytic fields; the magnitude is 1 in the brain and 0.8 in the small sphere (its edge is visible).
struct SphereCase {
  Geometry g = head(64, 64, 64, 1.0);
  Sphere target{36, 32, 38, 5, 0.1};
  Sphere air{32, 32, 11, 8, -9.4};
  Sphere brain{32, 32, 38, 18, 0.0};
  std::vector<uint8_t> mask;
  std::vector<float> field, background, magnitude, truth;
  SphereCase() {
    const uint64_t n = g.voxel_count();
    mask.assign(n, 0);
    field.assign(n, 0.0f);
    background.assign(n, 0.0f);
    magnitude.assign(n, 0.0f);
    truth.assign(n, 0.0f);
    for (int64_t z = 0; z < 64; ++z)
      for (int64_t y = 0; y < 64; ++y)
        for (int64_t x = 0; x < 64; ++x) {
          const uint64_t i = g.index(x, y, z);
          const double dx = x - brain.cx, dy = y - brain.cy, dz = z - brain.cz;
          mask[i] = dx * dx + dy * dy + dz * dz <= brain.radius * brain.radius;
          background[i] = static_cast<float>(sphere_field(air, x, y, z));
          field[i] = static_cast<float>(sphere_field(target, x, y, z)) + background[i];
          truth[i] = static_cast<float>(target.chi * inside_fraction(target, x, y, z));
          magnitude[i] = mask[i] ? static_cast<float>(1.0 - 0.2 * inside_fraction(target, x, y, z)) : 0.0f;
        }
  }
  double distance(const Sphere& s, int64_t x, int64_t y, int64_t z) const {
    return std::sqrt((x - s.cx) * (x - s.cx) + (y - s.cy) * (y - s.cy) + (z - s.cz) * (z - s.cz));
  }
};

}  // namespace

TEST(Tfi, RecoversASphereFromTheTotalFieldWithAStrongSourceOutsideTheMask) {
  const SphereCase c;
  // λ a tenth of the default: the small sphere's field (≤ 0.07 ppm) weighs little in the data term, and at the default
  // 20 CG iterations per Gauss-Newton iteration the default λ leaves its contrast near 0 (measured 0.003 ppm).
  TfiParams params;
  params.lambda = tessera::tfi_defaults::kLambda / 10;
  tessera::Tfi solver(c.g, c.field, c.mask, c.magnitude, params);
  tessera::run_to_end(solver);
  const std::vector<float> chi = solver.take_result();
  // The background the air sphere puts into the mask, for scale: up to a few ppm, 30× the sphere's χ.
  double background_peak = 0.0;
  for (size_t i = 0; i < chi.size(); ++i)
    if (c.mask[i]) background_peak = std::max(background_peak, static_cast<double>(std::fabs(c.background[i])));
  // The sphere's core (1.5 voxels in from its surface, no partial volume) against the tissue around it (2 voxels
  // out from the sphere, 2 in from the mask's edge): χ is defined up to a constant, so its contrast is compared.
  double core = 0, core_n = 0, around = 0, around_n = 0, around2 = 0;
  for (int64_t z = 0; z < 64; ++z)
    for (int64_t y = 0; y < 64; ++y)
      for (int64_t x = 0; x < 64; ++x) {
        const uint64_t i = c.g.index(x, y, z);
        if (!c.mask[i]) continue;
        const double dt = c.distance(c.target, x, y, z), db = c.distance(c.brain, x, y, z);
        if (dt <= c.target.radius - 1.5) core += chi[i], core_n += 1;
        if (dt >= c.target.radius + 2 && db <= c.brain.radius - 2) around += chi[i], around2 += chi[i] * chi[i], around_n += 1;
      }
  core /= core_n;
  around /= around_n;
  const double spread = std::sqrt(std::max(0.0, around2 / around_n - around * around));
  const double contrast = core - around;
  const tessera::Agreement a = tessera::compare_maps(c.g, chi, c.truth, c.mask);
  const double nrmse = tessera::test::demeaned_nrmse(chi, c.truth, c.mask);
  std::printf("[ tfi ] sphere: contrast %.4f ppm (truth 0.1), tissue around it %.4f ± %.4f ppm, r %.3f, demeaned NRMSE "
              "%.3f, background in the mask up to %.2f ppm, %u Gauss-Newton iterations, %u CG steps\n",
              contrast, around, spread, a.r, nrmse, background_peak, solver.gauss_newton_iterations(), solver.steps_done());
  EXPECT_GT(background_peak, 3.0);
  // Measured (λ 1.25e-5, 10 × 20 CG): contrast 0.046 ppm, spread 0.0071 ppm, r 0.59 in 4 Gauss-Newton iterations.
  // The sphere's contrast is recovered to about half: its own L1 prior and the few CG iterations (converged, 10 × 100
  // at tolerance 0.001: contrast 0.049 with the air, 0.077 without it) shrink it. The bounds hold the measured values
  // with a margin and fail for an inversion that ignores the sphere (contrast 0) or recovers the wrong sign.
  EXPECT_GT(contrast, 0.03);
  EXPECT_LT(contrast, 0.12);
  // The background barely leaks in: the tissue around the sphere is flat to 0.015 ppm (0.3 % of the 4.4 ppm the air
  // puts into the mask); without the preconditioner (P = 1, converged) the spread measured 0.17 ppm.
  EXPECT_LT(spread, 0.015);
  EXPECT_GT(a.r, 0.5);
  for (size_t i = 0; i < chi.size(); ++i) {
    if (!c.mask[i]) ASSERT_EQ(chi[i], 0.0f) << "outside the mask at " << i;
  }
}

TEST(Tfi, PhantomScanFromItsTotalFieldThroughThePipeline) {
  const Geometry g = head(64, 64, 48, 3.0);
  tessera::AcquisitionOptions o;
  o.te_s = {0.004, 0.008, 0.012, 0.016};
  o.snr = 100;
  const tessera::PhantomAcquisition a = tessera::make_acquisition(g, o);
  auto run = [&](tessera::Method method) {
    tessera::PipelineRequest r;
    r.te_s = a.te_s;
    r.b0_tesla = a.b0_tesla;
    r.method = method;
    tessera::Pipeline p(g, a.phase, a.magnitude, a.brain_mask, r);
    uint32_t steps = 0;
    std::vector<std::string> stages;
    while (!p.finished()) {
      if (stages.empty() || stages.back() != p.name()) stages.push_back(p.name());
      p.step();
      ++steps;
    }
    EXPECT_LE(steps, p.total_steps());
    return std::make_pair(p.take_result(), stages);
  };
  const auto [tfi, tfi_stages] = run(tessera::Method::Tfi);
  const auto [rts, rts_stages] = run(tessera::Method::Rts);
  // TFI runs no background removal: its stages are the echo fit and TFI; it keeps no local field, and χ is defined on
  // the fit mask.
  EXPECT_EQ(tfi_stages, (std::vector<std::string>{"echo fit", "TFI"}));
  ASSERT_EQ(rts_stages.size(), 3u);  // the echo fit, the default background removal, RTS
  EXPECT_EQ(rts_stages.front(), "echo fit");
  EXPECT_EQ(rts_stages.back(), "RTS");
  EXPECT_TRUE(tfi.local_ppm.empty());
  EXPECT_EQ(tfi.local_mask, tfi.fit_mask);
  // χ against the brain truth inside the brain mask eroded by 5 voxels (both methods' χ are defined there).
  const std::vector<uint8_t> core = tessera::erode_mask_mm(g, a.brain_mask, 5 * g.voxel_mm[0]);
  std::vector<uint8_t> both(core.size());
  uint64_t voxels = 0;
  for (size_t i = 0; i < core.size(); ++i) voxels += both[i] = core[i] && tfi.local_mask[i] && rts.local_mask[i];
  ASSERT_GT(voxels, 1000u);
  const tessera::Agreement t = tessera::compare_maps(g, tfi.chi, a.brain_chi, both);
  const tessera::Agreement v = tessera::compare_maps(g, rts.chi, a.brain_chi, both);
  const double t_nrmse = tessera::test::demeaned_nrmse(tfi.chi, a.brain_chi, both);
  const double v_nrmse = tessera::test::demeaned_nrmse(rts.chi, a.brain_chi, both);
  std::printf("[ tfi ] phantom 64×64×48 at 3 mm, SNR 100, brain mask eroded by 5 voxels (%llu voxels): TFI r %.3f NRMSE "
              "%.3f; the default background removal + RTS r %.3f NRMSE %.3f\n",
              static_cast<unsigned long long>(voxels), t.r, t_nrmse, v.r, v_nrmse);
  // Measured: TFI r 0.844 (NRMSE 0.55); V-SHARP + RTS r 0.906 (NRMSE 0.43) when V-SHARP was the default.
  EXPECT_GT(t.r, 0.80);
}

TEST(Tfi, BitIdenticalForOneAndTwoThreads) {
  const Geometry g = head(32, 32, 24, 6.0);
  const tessera::Phantom p = tessera::make_phantom(g);
  std::vector<float> magnitude(p.chi.size());
  for (size_t i = 0; i < magnitude.size(); ++i) magnitude[i] = 1.0f - 2.0f * std::fabs(p.chi[i]);
  TfiParams params;
  params.max_iterations = 2;
  params.cg_max_iterations = 5;
  const std::vector<float> one = tessera::tfi(g, p.field, p.mask, magnitude, params, 1);
  const std::vector<float> two = tessera::tfi(g, p.field, p.mask, magnitude, params, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

TEST(Tfi, CancelBetweenSteps) {
  const Geometry g = head(32, 32, 24, 6.0);
  const tessera::Phantom p = tessera::make_phantom(g);
  const std::vector<float> magnitude(g.voxel_count(), 1.0f);
  tessera::MethodParams params;
  std::atomic<bool> cancel{false};
  const std::string message = tessera::test::error_of(
      [&] {
        tessera::run_method(tessera::Method::Tfi, g, p.field, p.mask, magnitude, params, 1,
                            [&](uint64_t done, uint64_t) { if (done == 3) cancel = true; }, &cancel);
      },
      ErrorCode::Cancelled);
  EXPECT_NE(message.find("TFI cancelled after 3 of 200"), std::string::npos) << message;
}

TEST(Tfi, RefusesAMissingMagnitudeAndBadParametersByName) {
  const Geometry g = head(16, 16, 12, 6.0);
  const tessera::Phantom p = tessera::make_phantom(g);
  const std::vector<float> magnitude(g.voxel_count(), 1.0f);
  EXPECT_NE(tessera::test::error_of([&] { tessera::tfi(g, p.field, p.mask, {}); }, ErrorCode::InvalidArgument).find("needs the magnitude"),
            std::string::npos);
  auto with = [&](auto change) {
    TfiParams params;
    change(params);
    return tessera::test::error_of([&] { tessera::tfi(g, p.field, p.mask, magnitude, params); }, ErrorCode::InvalidArgument);
  };
  EXPECT_NE(with([](TfiParams& q) { q.lambda = 0.0; }).find("lambda"), std::string::npos);
  EXPECT_NE(with([](TfiParams& q) { q.lambda = 2.0; }).find("ppm·mm"), std::string::npos);
  EXPECT_NE(with([](TfiParams& q) { q.preconditioner = 0.5; }).find("preconditioner"), std::string::npos);
  EXPECT_NE(with([](TfiParams& q) { q.edge_fraction = 1.0; }).find("tfi.edgeFraction must be in [0, 1)"), std::string::npos);
  EXPECT_NE(with([](TfiParams& q) { q.max_iterations = 0; }).find("tfi.maxIterations"), std::string::npos);
  EXPECT_NE(with([](TfiParams& q) { q.tolerance = -0.1; }).find("tolerance"), std::string::npos);
  EXPECT_NE(with([](TfiParams& q) { q.cg_max_iterations = 0; }).find("tfi.cgMaxIterations"), std::string::npos);
  EXPECT_NE(with([](TfiParams& q) { q.cg_tolerance = 0.0; }).find("tfi.cgTolerance must be in (0, 1)"), std::string::npos);
  // the schema names the option, its range and unit
  tessera::MethodParams mp;
  EXPECT_NE(tessera::test::error_of([&] { mp.set("tfi.preconditioner", 0.0); }, ErrorCode::InvalidArgument).find("tfi.preconditioner"),
            std::string::npos);
  EXPECT_NE(tessera::test::error_of([&] { mp.set("tfi.lambda", -1.0); }, ErrorCode::InvalidArgument).find("ppm·mm"), std::string::npos);
  const tessera::MethodInfo& info = tessera::method_info("tfi");
  EXPECT_TRUE(info.total_field);
  EXPECT_TRUE(info.needs_magnitude);
  EXPECT_FALSE(tessera::method_info("medi").total_field);
  const uint64_t n = g.voxel_count();
  EXPECT_GE(tessera::tfi_workspace_bytes(g), 17 * n * sizeof(float) + n * 8);
  EXPECT_EQ(tessera::method_steps(tessera::Method::Tfi, mp), 200u);
}
