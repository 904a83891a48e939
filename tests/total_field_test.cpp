// The pipeline from a total field map (a vendor B0 map in Hz, rad/s or ppm) instead of multi-echo phase
// (tessera/pipeline.h, PipelineRequest::total_field_units), against the phantom's true total field and the phase path.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <limits>
#include <string>
#include <vector>

#include "support.h"
#include "tessera/common/error.h"
#include "tessera/common/input_checks.h"
#include "tessera/pipeline/pipeline.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"

namespace tessera {
namespace {

using test::head;

const Geometry kGeometry = head(64, 64, 48, 3.0);

const PhantomAcquisition& total_scan() {
  static const PhantomAcquisition a = [] {
    AcquisitionOptions o;
    o.te_s = {0.004, 0.008, 0.012, 0.016};
    return make_acquisition(kGeometry, o);
  }();
  return a;
}

// The phantom's true total field (ppm) in units, with γ̄ (tessera/common/physics.h, the phantom's and the pipeline's).
std::vector<float> in_units(const PhantomAcquisition& a, TotalFieldUnits units) {
  const double hz_per_ppm = kGammaBarMHzPerT * a.b0_tesla;
  const double scale = units == TotalFieldUnits::Hz ? hz_per_ppm : units == TotalFieldUnits::RadPerS ? 2 * M_PI * hz_per_ppm : 1.0;
  std::vector<float> f(a.total_field.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(a.total_field[i] * scale);
  return f;
}

PipelineRequest tv_request() {
  PipelineRequest r;
  r.method = Method::Tv;
  r.method_params.set("tv.maxIterations", 60);
  return r;
}

PipelineResult run_to_end(Pipeline& p) {
  while (!p.finished()) p.step();
  return p.take_result();
}

PipelineResult from_total(std::span<const float> field, TotalFieldUnits units, std::span<const uint8_t> mask,
                          std::span<const float> magnitude = {}) {
  const PhantomAcquisition& a = total_scan();
  PipelineRequest r = tv_request();
  r.total_field_units = units;
  r.b0_tesla = a.b0_tesla;
  Pipeline p(kGeometry, field, magnitude, mask, r);
  return run_to_end(p);
}

// ‖x − y‖ / ‖y‖ on mask.
double relative_difference(std::span<const float> x, std::span<const float> y, std::span<const uint8_t> mask) {
  double d = 0, n = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) continue;
    d += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    n += static_cast<double>(y[i]) * y[i];
  }
  return std::sqrt(d / n);
}

TEST(TotalField, HzRadPerSecondAndPpmGiveTheSameChiAsEachOtherAndAsThePhasePath) {
  const PhantomAcquisition& a = total_scan();
  const std::vector<float> hz = in_units(a, TotalFieldUnits::Hz), rad = in_units(a, TotalFieldUnits::RadPerS),
                           ppm = in_units(a, TotalFieldUnits::Ppm);
  const PipelineResult from_hz = from_total(hz, TotalFieldUnits::Hz, a.brain_mask);
  const PipelineResult from_rad = from_total(rad, TotalFieldUnits::RadPerS, a.brain_mask);
  const PipelineResult from_ppm = from_total(ppm, TotalFieldUnits::Ppm, a.brain_mask);
  // The conversion recovers the true total field to float rounding, and the fit mask is the mask.
  for (const PipelineResult* r : {&from_hz, &from_rad, &from_ppm}) {
    EXPECT_EQ(r->fit_mask, a.brain_mask);
    EXPECT_TRUE(r->unwrapped_rad.empty());
    EXPECT_TRUE(r->residual_rad.empty());
    EXPECT_LT(relative_difference(r->total_ppm, a.total_field, a.brain_mask), 1e-6);
  }
  // The same local field and χ, to float rounding.
  EXPECT_EQ(from_hz.local_mask, from_ppm.local_mask);
  EXPECT_EQ(from_rad.local_mask, from_ppm.local_mask);
  const double local_hz = relative_difference(from_hz.local_ppm, from_ppm.local_ppm, from_ppm.local_mask);
  const double local_rad = relative_difference(from_rad.local_ppm, from_ppm.local_ppm, from_ppm.local_mask);
  const double chi_hz = relative_difference(from_hz.chi, from_ppm.chi, from_ppm.local_mask);
  const double chi_rad = relative_difference(from_rad.chi, from_ppm.chi, from_ppm.local_mask);
  EXPECT_LT(local_hz, 1e-4);
  EXPECT_LT(local_rad, 1e-4);
  EXPECT_LT(chi_hz, 1e-4);
  EXPECT_LT(chi_rad, 1e-4);
  // The local field against the truth, and χ against the truth.
  const double local = test::demeaned_nrmse(from_ppm.local_ppm, a.local_field, from_ppm.local_mask);
  EXPECT_LT(local, 0.35) << local;
  const Agreement truth = compare_maps(kGeometry, from_ppm.chi, a.brain_chi, from_ppm.local_mask);
  EXPECT_GT(truth.r, 0.85) << truth.r;
  // The phase path on the same scan, mask and method: χ agrees closely where both define it.
  PipelineRequest r = tv_request();
  r.te_s = a.te_s;
  r.b0_tesla = a.b0_tesla;
  Pipeline phase(kGeometry, a.phase, a.magnitude, a.brain_mask, r);
  const PipelineResult from_phase = run_to_end(phase);
  std::vector<uint8_t> both(from_phase.local_mask.size());
  for (size_t i = 0; i < both.size(); ++i) both[i] = from_phase.local_mask[i] && from_ppm.local_mask[i];
  const Agreement paths = compare_maps(kGeometry, from_hz.chi, from_phase.chi, both);
  EXPECT_GT(paths.r, 0.98) << paths.r;
  std::printf("[ total field ] hz/rad/s vs ppm: local %.2g/%.2g, chi %.2g/%.2g; local NRMSE %.3f, chi r %.3f vs truth, %.4f vs "
              "the phase path (the default background removal + TV 60)\n",
              local_hz, local_rad, chi_hz, chi_rad, local, truth.r, paths.r);
}

TEST(TotalField, MaskFromASingleMagnitude) {
  const PhantomAcquisition& a = total_scan();
  const std::vector<float> hz = in_units(a, TotalFieldUnits::Hz);
  const std::span<const float> first(a.magnitude.data(), kGeometry.voxel_count());
  const PipelineResult out = from_total(hz, TotalFieldUnits::Hz, {}, first);
  double both = 0, sum = 0;
  for (size_t i = 0; i < out.mask.size(); ++i) {
    both += (out.mask[i] && a.brain_mask[i]);
    sum += (out.mask[i] != 0) + (a.brain_mask[i] != 0);
  }
  EXPECT_GT(2 * both / sum, 0.8);
  EXPECT_EQ(out.fit_mask, out.mask);
  EXPECT_EQ(out.chi.size(), kGeometry.voxel_count());
  // Every echo's magnitude is not one volume: refused.
  PipelineRequest r = tv_request();
  r.total_field_units = TotalFieldUnits::Hz;
  try {
    Pipeline p(kGeometry, hz, a.magnitude, {}, r);
    ADD_FAILURE() << "four echoes' magnitude was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one echo's magnitude"), std::string::npos) << e.what();
  }
}

TEST(TotalField, AHzMapDeclaredAsPpmIsRefusedNamingTheFix) {
  const PhantomAcquisition& a = total_scan();
  const std::vector<float> hz = in_units(a, TotalFieldUnits::Hz);
  PipelineRequest r = tv_request();
  r.total_field_units = TotalFieldUnits::Ppm;
  r.b0_tesla = a.b0_tesla;
  try {
    Pipeline p(kGeometry, hz, {}, a.brain_mask, r);
    ADD_FAILURE() << "a Hz map was taken as ppm";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(m.find("looks like Hz"), std::string::npos) << m;
    EXPECT_NE(m.find("--units hz"), std::string::npos) << m;
  }
  // The true field in ppm is plausible.
  EXPECT_EQ(implausible_total_field_text(a.total_field, a.brain_mask, TotalFieldUnits::Ppm, a.b0_tesla), "");
  // A map in rad/s declared as Hz is 2π too large: refused, naming rad/s.
  std::vector<float> rad = in_units(a, TotalFieldUnits::RadPerS);
  const std::string as_hz = implausible_total_field_text(total_field_to_ppm(rad, TotalFieldUnits::Hz, a.b0_tesla), a.brain_mask,
                                                         TotalFieldUnits::Hz, a.b0_tesla);
  EXPECT_NE(as_hz.find("it looks like rad/s"), std::string::npos) << as_hz;
  const RobustRange range = robust_range(a.total_field, a.brain_mask);
  std::printf("[ total field ] the phantom's total field spans [%.3f, %.3f] ppm (1st–99th percentile in the brain)\n", range.p1, range.p99);
}

TEST(TotalField, NaNInsideTheMaskIsRefusedAndOutsideIgnored) {
  const PhantomAcquisition& a = total_scan();
  std::vector<float> hz = in_units(a, TotalFieldUnits::Hz);
  size_t inside = 0, outside = 0;
  while (!a.brain_mask[inside]) ++inside;
  while (a.brain_mask[outside]) ++outside;
  hz[outside] = std::numeric_limits<float>::quiet_NaN();
  PipelineRequest r;  // no method: ends at the local field
  r.total_field_units = TotalFieldUnits::Hz;
  {
    Pipeline p(kGeometry, hz, {}, a.brain_mask, r);
    const PipelineResult out = run_to_end(p);
    EXPECT_EQ(out.total_ppm[outside], 0.0f);
    EXPECT_TRUE(out.chi.empty());
  }
  hz[inside] = std::numeric_limits<float>::quiet_NaN();
  try {
    Pipeline p(kGeometry, hz, {}, a.brain_mask, r);
    ADD_FAILURE() << "NaN inside the mask was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 NaN or infinite value(s) inside the mask"), std::string::npos) << e.what();
  }
}

// A Siemens field map: the phase difference of two echoes, wrap(φ(TE2) − φ(TE1)), with ΔTE. The receive offset
// cancels in the difference, so the unwrapped difference / (2π·ΔTE) is the total field: checked against the truth.
TEST(TotalField, APhaseDifferenceWithItsDeltaTeGivesTheTrueTotalField) {
  const PhantomAcquisition& a = total_scan();
  const uint64_t n = kGeometry.voxel_count();
  const size_t e1 = 0, e2 = 1;  // TE 4 and 8 ms: ΔTE 4 ms, a field within ±125 Hz wraps nowhere in time
  std::vector<float> diff(n);
  for (uint64_t i = 0; i < n; ++i) diff[i] = static_cast<float>(std::remainder(static_cast<double>(a.phase[e2 * n + i]) - a.phase[e1 * n + i], 2 * M_PI));
  PipelineRequest r = tv_request();
  r.phase_difference = true;
  r.te_s = {a.te_s[e2] - a.te_s[e1]};
  r.b0_tesla = a.b0_tesla;
  const std::span<const float> magnitude(a.magnitude.data(), n);
  Pipeline p(kGeometry, diff, magnitude, a.brain_mask, r);
  const PipelineResult out = run_to_end(p);
  // Inside the fit mask the total field is the truth to the noise of two echoes' phase, but for the few voxels next to
  // the mask's edge whose unwrapping slipped by 2π (off by 1/(ΔTE·γ̄B0) ≈ 2 ppm), as many as from the two echoes' phase.
  double err = 0;
  uint64_t kept = 0, given = 0, slipped = 0;
  for (uint64_t i = 0; i < n; ++i) {
    given += a.brain_mask[i];
    if (!out.fit_mask[i]) continue;
    ++kept;
    const double d = std::abs(static_cast<double>(out.total_ppm[i]) - a.total_field[i]);
    if (d > 0.5) ++slipped;
    else err += d * d;
  }
  const double rms = std::sqrt(err / static_cast<double>(kept - slipped));
  const double worst = static_cast<double>(slipped) / static_cast<double>(kept);
  EXPECT_GT(static_cast<double>(kept) / static_cast<double>(given), 0.95);
  EXPECT_LT(rms, 0.02) << rms;  // ppm; the field spans about ±1 ppm
  EXPECT_LT(worst, 0.002) << slipped;
  const Agreement truth = compare_maps(kGeometry, out.chi, a.brain_chi, out.local_mask);
  EXPECT_GT(truth.r, 0.8) << truth.r;
  std::printf("[ total field ] phase difference (ΔTE %.0f ms): total field RMS error %.4f ppm, %.3f %% slipped by 2π, %.3f of the mask kept, chi r %.3f\n",
              r.te_s[0] * 1e3, rms, 100 * worst, static_cast<double>(kept) / static_cast<double>(given), truth.r);
  // Two echo times for a phase difference, or a phase difference with a total field, are refused.
  PipelineRequest two = r;
  two.te_s = {0.004, 0.008};
  EXPECT_THROW(Pipeline(kGeometry, diff, magnitude, a.brain_mask, two), Error);
  PipelineRequest both = r;
  both.total_field_units = TotalFieldUnits::Hz;
  EXPECT_THROW(Pipeline(kGeometry, diff, magnitude, a.brain_mask, both), Error);
}

TEST(TotalField, PlanListsNoEchoFitAndPlansLessThanThePhasePath) {
  PipelineRequest phase = tv_request();
  phase.te_s = {0.004, 0.008, 0.012, 0.016};
  PipelineRequest total = tv_request();
  total.total_field_units = TotalFieldUnits::Hz;
  const PipelinePlan pp = plan_pipeline(kGeometry, phase, false, true);
  const PipelinePlan tp = plan_pipeline(kGeometry, total, false, true);
  // The default background removal's title (the schema's default, whichever it is).
  const char* background = nullptr;
  switch (kDefaultBackground) {
    case BackgroundRemoval::Vsharp: background = "V-SHARP"; break;
    case BackgroundRemoval::Pdf: background = "PDF"; break;
    case BackgroundRemoval::Lbv: background = "LBV"; break;
    case BackgroundRemoval::Ismv: background = "iSMV"; break;
    case BackgroundRemoval::Sharp: background = "SHARP"; break;
    case BackgroundRemoval::Resharp: background = "RESHARP"; break;
  }
  const std::vector<std::string> want{"brain mask", std::string(background), std::string(method_info(Method::Tv).title)};
  EXPECT_EQ(tp.stages, want);
  EXPECT_EQ(pp.stages.size(), 4u);
  // Inputs: the field and one magnitude (f32), the volume's mask and the plan's (u8), the run's χ (f32, session/run.cpp
  // holds it from the start; the method stage's χ is the stage's).
  const uint64_t n = kGeometry.voxel_count();
  EXPECT_EQ(tp.input_bytes, n * (4 + 4 + 1 + 1 + 4));
  EXPECT_LT(tp.workspace_bytes, pp.workspace_bytes);
  EXPECT_EQ(total_field_units_from_name("Hz"), TotalFieldUnits::Hz);
  EXPECT_EQ(total_field_units_from_name("rad/s"), TotalFieldUnits::RadPerS);
  EXPECT_THROW(total_field_units_from_name("tesla"), Error);
}

}  // namespace
}  // namespace tessera
