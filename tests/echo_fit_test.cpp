#include "tessera/phase/echo_fit.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "support.h"
#include "tessera/common/error.h"
#include "tessera/common/schema.h"
#include "tessera/phase/options.h"
#include "tessera/phase/unwrap.h"

namespace {

using tessera::EchoFitParams;
using tessera::OffsetFit;
using tessera::ErrorCode;
using tessera::Geometry;
using tessera::Unwrapper;
using tessera::test::error_of;

using tessera::test::Gaussian;
using tessera::test::kTwoPi;

// Multi-echo data of a known field: S_e = M·exp(−TE_e/T2*)·exp(i(θ + 2π·f·TE_e)) + complex Gaussian noise, θ random
// per voxel in [−π, π); phase = arg S, magnitude = |S|.
struct Echoes {
  Geometry g;
  std::vector<double> te;
  std::vector<float> field_hz, offset, phase, magnitude;
  std::vector<uint8_t> mask;
};
// smooth_offset: θ a smooth function of position (a receive phase: a tilt and a bend of ~1.5 rad over the volume)
// instead of random per voxel.
Echoes make_echoes(int64_t nx, int64_t ny, int64_t nz, double noise, uint64_t seed = 1, bool smooth_offset = false) {
  Echoes d;
  d.g = tessera::test::geometry(nx, ny, nz);
  d.g.voxel_mm = {3.0, 3.0, 3.0};
  d.te = {0.0045, 0.0085, 0.0125, 0.0165, 0.0205};
  const uint64_t n = d.g.voxel_count();
  d.field_hz.resize(n);
  d.offset.resize(n);
  tessera::test::Rng rng(seed);
  Gaussian gauss{tessera::test::Rng(seed + 100)};
  const double sx = nx / 64.0;  // blobs scale with the volume
  for (int64_t z = 0; z < nz; ++z)
    for (int64_t y = 0; y < ny; ++y)
      for (int64_t x = 0; x < nx; ++x) {
        const double r1 = std::pow(x - 26 * sx, 2) + std::pow(y - 30 * sx, 2) + std::pow(z - 20 * sx, 2);
        const double r2 = std::pow(x - 40 * sx, 2) + std::pow(y - 36 * sx, 2) + std::pow(z - 26 * sx, 2);
        const double f = 20.0 + 45.0 * std::exp(-r1 / (2 * 64 * sx * sx)) - 35.0 * std::exp(-r2 / (2 * 49 * sx * sx)) +
                         0.5 * (x - nx / 2.0) / sx;
        d.field_hz[d.g.index(x, y, z)] = static_cast<float>(f);
        const double random = std::numbers::pi * rng.uniform();
        const double u = (x - nx / 2.0) / nx, v = (y - ny / 2.0) / ny, w = (z - nz / 2.0) / nz;
        d.offset[d.g.index(x, y, z)] =
            static_cast<float>(smooth_offset ? 2.5 + 1.2 * u - 0.8 * v + 0.5 * w + 0.9 * u * u - 0.6 * v * w : random);
      }
  d.mask = tessera::test::ellipsoid_mask(d.g, 0.85);
  d.phase.resize(d.te.size() * n);
  d.magnitude.resize(d.te.size() * n);
  for (size_t e = 0; e < d.te.size(); ++e)
    for (uint64_t i = 0; i < n; ++i) {
      const double m = (d.mask[i] ? 1.0 : 0.3) * std::exp(-d.te[e] / 0.04);
      const double angle = d.offset[i] + kTwoPi * d.field_hz[i] * d.te[e];
      const double re = m * std::cos(angle) + noise * gauss.next(), im = m * std::sin(angle) + noise * gauss.next();
      d.phase[e * n + i] = static_cast<float>(std::atan2(im, re));
      d.magnitude[e * n + i] = static_cast<float>(std::sqrt(re * re + im * im));
    }
  return d;
}

struct Errors {
  double nrmse, rms_hz, max_abs, offset_max;
};
Errors errors(const Echoes& d, const tessera::EchoFitResult& r) {
  double se = 0, st = 0, mean = 0, worst = 0, offset_worst = 0;
  uint64_t count = 0;
  for (size_t i = 0; i < d.mask.size(); ++i)
    if (d.mask[i]) mean += d.field_hz[i], ++count;
  mean /= double(count);
  for (size_t i = 0; i < d.mask.size(); ++i) {
    if (!d.mask[i]) continue;
    const double err = double(r.field_hz[i]) - d.field_hz[i];
    se += err * err;
    st += (d.field_hz[i] - mean) * (d.field_hz[i] - mean);
    worst = std::max(worst, std::fabs(err));
    offset_worst = std::max(offset_worst, std::fabs(std::remainder(double(r.offset_rad[i]) - d.offset[i], kTwoPi)));
  }
  return {std::sqrt(se / st), std::sqrt(se / double(count)), worst, offset_worst};
}

// The Cramér-Rao bound of the field (Hz) from a line with intercept through phases of noise σ/m_e, inside the mask.
double cramer_rao_hz(const std::vector<double>& te, double noise) {
  double sw = 0, swt = 0, swtt = 0;
  for (const double t : te) {
    const double m = std::exp(-t / 0.04), w = m * m / (noise * noise);
    sw += w, swt += w * t, swtt += w * t * t;
  }
  return std::sqrt(sw / (sw * swtt - swt * swt)) / kTwoPi;
}

// The same bound for a line through the origin (the offset known): σ_ω² = 1 / Σ w_e·TE_e².
double cramer_rao_origin_hz(const std::vector<double>& te, double noise) {
  double swtt = 0;
  for (const double t : te) {
    const double m = std::exp(-t / 0.04);
    swtt += m * m / (noise * noise) * t * t;
  }
  return std::sqrt(1.0 / swtt) / kTwoPi;
}

}  // namespace

TEST(EchoFit, HzToPpm) {
  // 1 ppm at 3 T is γ̄·3 T = 127.73 Hz
  EXPECT_NEAR(tessera::hz_to_ppm(42.577478518 * 3.0, 3.0), 1.0, 1e-12);  // CODATA 2018 γ̄
  const std::vector<float> hz{0.0f, 127.732437f, -63.866218f};
  const auto ppm = tessera::hz_to_ppm(hz, 3.0);
  EXPECT_NEAR(ppm[1], 1.0, 1e-6);
  EXPECT_NEAR(ppm[2], -0.5, 1e-6);
  const std::string m = error_of([] { tessera::hz_to_ppm(1.0, 0.0); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("B0 must be a positive field strength in tesla"), std::string::npos) << m;
}

TEST(EchoFit, NoiselessFieldAndOffsetAreExactWithEitherUnwrapper) {
  const Echoes d = make_echoes(48, 48, 36, 0.0);
  for (const Unwrapper u : {Unwrapper::RegionGrowing, Unwrapper::Laplacian}) {
    EchoFitParams p;
    p.unwrapper = u;
    p.offset = OffsetFit::Free;  // random offsets per voxel: no smooth offset to assume
    const auto r = tessera::echo_fit(d.g, d.phase, d.magnitude, d.te, d.mask, p);
    const Errors e = errors(d, r);
    std::printf("noiseless, %s: NRMSE %.2e, max |error| %.2e Hz, offset max error %.2e rad\n",
                u == Unwrapper::Laplacian ? "laplacian" : "region growing", e.nrmse, e.max_abs, e.offset_max);
    EXPECT_LT(e.max_abs, 1e-3);
    EXPECT_LT(e.offset_max, 1e-4);
    for (size_t i = 0; i < d.mask.size(); ++i) {
      if (d.mask[i]) ASSERT_LT(r.residual_rad[i], 1e-4) << i;
      else ASSERT_EQ(r.field_hz[i], 0.0f) << i;
    }
  }
}

TEST(EchoFit, RecoversAKnownFieldFromNoisyEchoesWithRandomOffsets) {
  // SNR 50 at the first echo (σ = 0.02, M = 1, T2* = 40 ms)
  const Echoes d = make_echoes(64, 64, 48, 0.02);
  EchoFitParams free;
  free.offset = OffsetFit::Free;  // random offsets per voxel: no smooth offset to assume
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = tessera::echo_fit(d.g, d.phase, d.magnitude, d.te, d.mask, free);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Errors e = errors(d, r);
  double residual = 0;
  uint64_t count = 0;
  for (size_t i = 0; i < d.mask.size(); ++i)
    if (d.mask[i]) residual += r.residual_rad[i], ++count;
  const double bound = cramer_rao_hz(d.te, 0.02);
  std::printf("5 echoes 64x64x48, SNR 50, region growing, intercept: NRMSE %.4f, RMS error %.3f Hz (Cramér-Rao "
              "%.3f Hz), max |error| %.3f Hz, mean residual %.4f rad, %.3f s\n",
              e.nrmse, e.rms_hz, bound, e.max_abs, residual / double(count), seconds);
  // at the noise floor: the error is the bound's (a fit that lost information, or a bias, would be above it)
  EXPECT_LT(e.rms_hz, 1.1 * bound);
  EXPECT_LT(e.nrmse, 0.06);
  EXPECT_LT(e.max_abs, 8 * bound);  // no voxel is off by a 2π/TE wrap (≥ 49 Hz)
  // the residual is the phase noise, σ/magnitude ≈ 0.02-0.03 rad
  EXPECT_GT(residual / double(count), 0.005);
  EXPECT_LT(residual / double(count), 0.05);

  // through the origin after the offset removal: the two-echo offset's noise enters the field, so it is worse
  EchoFitParams p;
  p.offset = OffsetFit::FirstEchoes;
  const Errors e0 = errors(d, tessera::echo_fit(d.g, d.phase, d.magnitude, d.te, d.mask, p));
  std::printf("same, through the origin: NRMSE %.4f, RMS error %.3f Hz, max |error| %.3f Hz\n", e0.nrmse, e0.rms_hz,
              e0.max_abs);
  EXPECT_LT(e0.max_abs, 24 * bound);
  EXPECT_GT(e0.nrmse, e.nrmse);

  // without magnitudes (uniform weights) the late, noisier echoes weigh as much: still recovered
  const Errors eu = errors(d, tessera::echo_fit(d.g, d.phase, {}, d.te, d.mask, free));
  std::printf("same, uniform weights: NRMSE %.4f, RMS error %.3f Hz\n", eu.nrmse, eu.rms_hz);
  EXPECT_LT(eu.rms_hz, 1.3 * bound);
  EXPECT_GE(eu.rms_hz, e.rms_hz);
}

TEST(EchoFit, SmoothOffsetReachesTheThroughOriginBound) {
  // A smooth receive phase, SNR 50: the fitted offset, smoothed and removed, leaves the field's noise at the bound of a
  // line through the origin (the offset known), below the free intercept's bound (1.4× here).
  const Echoes d = make_echoes(64, 64, 48, 0.02, 3, true);
  const double origin = cramer_rao_origin_hz(d.te, 0.02), intercept = cramer_rao_hz(d.te, 0.02);
  EchoFitParams p;
  p.offset = OffsetFit::Smooth;
  const auto r = tessera::echo_fit(d.g, d.phase, d.magnitude, d.te, d.mask, p);
  const Errors e = errors(d, r);
  p.offset = OffsetFit::Free;
  const Errors ef = errors(d, tessera::echo_fit(d.g, d.phase, d.magnitude, d.te, d.mask, p));
  double residual = 0;
  uint64_t count = 0;
  for (size_t i = 0; i < d.mask.size(); ++i)
    if (d.mask[i]) residual += r.residual_rad[i], ++count;
  std::printf("smooth offset, SNR 50: RMS error %.4f Hz (through-origin bound %.4f Hz), free intercept %.4f Hz (its "
              "bound %.4f Hz), offset max error %.4f rad, mean residual %.4f rad\n",
              e.rms_hz, origin, ef.rms_hz, intercept, e.offset_max, residual / double(count));
  EXPECT_LT(e.rms_hz, 1.1 * origin);
  EXPECT_GT(e.rms_hz, 0.9 * origin);  // noise is there: an error below the bound would be a broken measurement
  EXPECT_LT(ef.rms_hz, 1.1 * intercept);
  EXPECT_GT(ef.rms_hz, 1.25 * e.rms_hz);
  EXPECT_LT(e.offset_max, 0.05);  // the smoothed offset is the true one, at the edge of the mask too
  EXPECT_LT(residual / double(count), 0.05);
}

TEST(EchoFit, LaplacianUnwrapperOnNoisyEchoes) {
  const Echoes d = make_echoes(48, 48, 36, 0.02, 5);
  EchoFitParams p;
  p.unwrapper = Unwrapper::Laplacian;
  p.offset = OffsetFit::Free;  // random offsets per voxel
  const auto t0 = std::chrono::steady_clock::now();
  const Errors e = errors(d, tessera::echo_fit(d.g, d.phase, d.magnitude, d.te, d.mask, p));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double bound = cramer_rao_hz(d.te, 0.02);
  std::printf("5 echoes 48x48x36, SNR 50, laplacian: NRMSE %.4f, RMS error %.3f Hz (Cramér-Rao %.3f Hz), max |error| "
              "%.3f Hz, %.3f s\n", e.nrmse, e.rms_hz, bound, e.max_abs, seconds);
  EXPECT_LT(e.rms_hz, 1.1 * bound);
  EXPECT_LT(e.max_abs, 8 * bound);
}

TEST(EchoFit, SingleEchoIsTheUnwrappedPhaseOverTE) {
  Echoes d = make_echoes(32, 32, 24, 0.0);
  const uint64_t n = d.g.voxel_count();
  // one echo with no offset
  std::vector<float> phase(n);
  for (uint64_t i = 0; i < n; ++i) phase[i] = static_cast<float>(std::remainder(kTwoPi * d.field_hz[i] * 0.0205, kTwoPi));
  const std::vector<double> te{0.0205};
  const auto r = tessera::echo_fit(d.g, phase, {}, te, d.mask);
  double worst = 0;
  for (uint64_t i = 0; i < n; ++i)
    if (d.mask[i]) worst = std::max(worst, std::fabs(double(r.field_hz[i]) - d.field_hz[i]));
  EXPECT_LT(worst, 1e-3);
}

TEST(EchoFit, StepsOneEchoAtATime) {
  const Echoes d = make_echoes(24, 24, 16, 0.01);
  tessera::EchoFit fit(d.g, d.phase, d.magnitude, d.te, d.mask);
  EXPECT_EQ(fit.total_steps(), 7u);  // the offset, five echoes, the smoothed offset's refit
  EXPECT_EQ(fit.steps_done(), 0u);
  std::string m = error_of([&] { fit.take_result(); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("before the last step (0 of 7)"), std::string::npos) << m;
  std::vector<uint64_t> seen;
  tessera::run_to_end(fit, [&](uint64_t done, uint64_t total) {
    seen.push_back(done);
    EXPECT_EQ(total, 7u);
  });
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7}));
  EchoFitParams free;
  free.offset = OffsetFit::Free;
  EXPECT_EQ(tessera::EchoFit(d.g, d.phase, d.magnitude, d.te, d.mask, free).total_steps(), 6u);
  EXPECT_TRUE(fit.finished());
  const auto r = fit.take_result();
  EXPECT_EQ(r.field_hz.size(), d.g.voxel_count());
}

TEST(EchoFit, BitIdenticalForAnyThreadCount) {
  const Echoes d = make_echoes(40, 40, 30, 0.02, 7, true);
  for (const Unwrapper u : {Unwrapper::RegionGrowing, Unwrapper::Laplacian}) {
    EchoFitParams p;
    p.unwrapper = u;
    const auto one = tessera::echo_fit(d.g, d.phase, d.magnitude, d.te, d.mask, p, 1);
    const auto three = tessera::echo_fit(d.g, d.phase, d.magnitude, d.te, d.mask, p, 3);
    for (auto member : {&tessera::EchoFitResult::field_hz, &tessera::EchoFitResult::offset_rad,
                        &tessera::EchoFitResult::residual_rad}) {
      ASSERT_EQ((one.*member).size(), (three.*member).size());
      EXPECT_EQ(std::memcmp((one.*member).data(), (three.*member).data(), (one.*member).size() * sizeof(float)), 0);
    }
  }
}

TEST(EchoFit, RefusesInconsistentEchoesAndTimes) {
  const Echoes d = make_echoes(8, 8, 8, 0.0);
  auto message = [&](std::vector<double> te, std::span<const float> magnitude) {
    return error_of([&] { tessera::echo_fit(d.g, d.phase, magnitude, te, d.mask); }, ErrorCode::InvalidArgument);
  };
  std::string m = message({0.0045, 0.0085, 0.0125, 0.0165}, d.magnitude);
  EXPECT_NE(m.find("the phase holds 5 echoes of the 8×8×8 volume but 4 echo times were given"), std::string::npos)
      << m;
  m = message({4.5, 8.5, 12.5, 16.5, 20.5}, d.magnitude);
  EXPECT_NE(m.find("TE 1 is 4.5 (over 1 s): looks like milliseconds; give TE in seconds (0.0045)"), std::string::npos)
      << m;
  m = message({0.0045, 0.0085, 0.0085, 0.0165, 0.0205}, d.magnitude);
  EXPECT_NE(m.find("TE 3 (0.0085 s) is not after TE 2"), std::string::npos) << m;
  m = message({0.0, 0.0085, 0.0125, 0.0165, 0.0205}, d.magnitude);
  EXPECT_NE(m.find("TE 1 is 0 s; echo times must be positive"), std::string::npos) << m;
  m = message(d.te, std::span<const float>(d.magnitude).first(512 * 4));
  EXPECT_NE(m.find("the magnitude holds 2048 values but the phase holds 5 echoes × 512 voxels = 2560"),
            std::string::npos) << m;
  std::vector<float> raw(d.phase.size());
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = float(i % 4096);
  m = error_of([&] { tessera::echo_fit(d.g, raw, {}, d.te, d.mask); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("echo 1 phase spans 0 to 511"), std::string::npos) << m;
  m = error_of([&] { tessera::echo_fit(d.g, d.phase, {}, std::vector<double>{}, d.mask); },
               ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("no echo times given"), std::string::npos) << m;
}

// The offset's sigma is the schema's fitOffsetSigma: refused outside [1, 50] mm by that name, both bounds kept.
TEST(EchoFit, ValidateReadsFitOffsetSigmaFromThePhaseOptions) {
  const tessera::OptionSpec& o = tessera::find_option(tessera::phase_options(), "fitOffsetSigma");
  EXPECT_EQ(o.default_value, tessera::echo_fit_defaults::kOffsetSigmaMm);
  EchoFitParams p;
  for (double ok : {1.0, 3.0, 50.0}) {
    p.offset_sigma_mm = ok;
    EXPECT_NO_THROW(tessera::validate(p)) << ok;
  }
  for (double bad : {0.999, 50.001, -3.0, std::nan("")}) {
    p.offset_sigma_mm = bad;
    const std::string m = error_of([&] { tessera::validate(p); }, ErrorCode::InvalidArgument);
    EXPECT_NE(m.find("fitOffsetSigma must be in [1, 50] mm, got "), std::string::npos) << m;
  }
  EXPECT_EQ(tessera::find_option(tessera::phase_options(), "fitResidualLimit").default_value, tessera::echo_fit_defaults::kResidualLimitRad);
}

TEST(EchoFit, WorkspaceBytes) {
  const Geometry g = tessera::test::geometry(64, 64, 48);
  EchoFitParams p;
  const uint64_t n = g.voxel_count();
  // Held while an echo is unwrapped: labels 4, ω and θ 8, six sums 24, the echo's corrected phase 4; and the unwrapper's.
  EXPECT_GE(tessera::echo_fit_workspace_bytes(g, 5, p), 40 * n + tessera::unwrap_region_growing_workspace_bytes(g));
  p.unwrapper = Unwrapper::Laplacian;
  EXPECT_GE(tessera::echo_fit_workspace_bytes(g, 5, p), 40 * n + tessera::unwrap_laplacian_workspace_bytes(g));
  // The results (12) come with the sums still held: at least 48 bytes a voxel whatever the unwrapper.
  EXPECT_GE(tessera::echo_fit_workspace_bytes(g, 1, p), 48 * n);
  // The smooth offset's refit (two echoes or more) holds ω, θ and the six sums (32), the results (12) and its own eight
  // float volumes (32) at once; the free offset has no refit (region growing: 36 + 36 bytes a voxel at most).
  p.unwrapper = Unwrapper::RegionGrowing;
  p.offset = OffsetFit::Smooth;
  EXPECT_GE(tessera::echo_fit_workspace_bytes(g, 5, p), 76 * n);
  p.offset = OffsetFit::Free;
  EXPECT_LT(tessera::echo_fit_workspace_bytes(g, 5, p), 76 * n);
}
