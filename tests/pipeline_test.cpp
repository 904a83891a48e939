// From a multi-echo scan to χ (tessera/pipeline.h), judged stage by stage against the phantom's truths.
#include <cmath>
#include <cstdio>

#include <algorithm>
#include <vector>

#include "support.h"
#include "tessera/common/morphology.h"
#include "tessera/background/background.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"
#include "tessera/pipeline/pipeline.h"
#include "tessera/common/input_checks.h"

namespace tessera {
namespace {

using test::head;

// A small scan of the phantom head, shared by the tests (64×64×48 at 3 mm, 4 echoes).
const PhantomAcquisition& scan(double snr) {
  static const auto make = [](double s) {
    AcquisitionOptions o;
    o.te_s = {0.004, 0.008, 0.012, 0.016};
    o.snr = s;
    return make_acquisition(head(64, 64, 48, 3.0), o);
  };
  static const PhantomAcquisition clean = make(0), noisy = make(100);
  return snr == 0 ? clean : noisy;
}

PipelineResult run(const PhantomAcquisition& a, std::span<const uint8_t> mask, PipelineRequest r) {
  r.te_s = a.te_s;
  r.b0_tesla = a.b0_tesla;
  Pipeline p(head(64, 64, 48, 3.0), a.phase, a.magnitude, mask, r);
  uint32_t steps = 0;
  while (!p.finished()) {
    p.step();
    ++steps;
  }
  EXPECT_EQ(steps, p.steps_done());
  EXPECT_LE(steps, p.total_steps());
  return p.take_result();
}

TEST(Pipeline, FromWrappedPhaseToChiEveryStageAgainstItsTruth) {
  const Geometry g = head(64, 64, 48, 3.0);
  const PhantomAcquisition& a = scan(0);
  PipelineRequest r;
  r.background = BackgroundRemoval::Vsharp;  // V-SHARP's stages against their truths (PDF's: the next tests)
  r.method = Method::Rts;
  const PipelineResult out = run(a, a.brain_mask, r);
  // The total field: exact up to the unresolvable constant (noiseless) where the fit is reliable, and the voxels left
  // out are few (those next to air whose field cannot be unwrapped).
  // Exact means within 0.01 ppm after removing the mean offset; a voxel whose first two echoes' difference was
  // unwrapped wrong fits a consistent line and keeps a small residual: allow 1 in 1000.
  uint64_t brain = 0, reliable = 0, exact = 0;
  double offset = 0;
  for (size_t i = 0; i < out.mask.size(); ++i) {
    brain += out.mask[i] != 0;
    if (out.fit_mask[i]) ++reliable, offset += out.total_ppm[i] - a.total_field[i];
  }
  offset /= static_cast<double>(reliable);
  for (size_t i = 0; i < out.mask.size(); ++i) exact += out.fit_mask[i] && std::fabs(out.total_ppm[i] - a.total_field[i] - offset) < 0.01;
  EXPECT_GT(static_cast<double>(exact), 0.999 * static_cast<double>(reliable)) << exact << " of " << reliable;
  EXPECT_GT(static_cast<double>(reliable), 0.98 * static_cast<double>(brain)) << reliable << " of " << brain;
  const double total = 1.0 - static_cast<double>(exact) / static_cast<double>(reliable);
  // The local field on V-SHARP's eroded mask, against the true local field.
  const double local = test::demeaned_nrmse(out.local_ppm, a.local_field, out.local_mask);
  EXPECT_LT(local, 0.35) << local;
  // χ against the truth on the same mask.
  const Agreement chi = compare_maps(g, out.chi, a.brain_chi, out.local_mask);
  EXPECT_GT(chi.r, 0.85) << chi.r;
  std::printf("[ pipeline ] total field inexact at %.2g of reliable voxels, local NRMSE %.3f, chi r %.3f (RTS, noiseless)\n", total, local, chi.r);
  // Every intermediate is there, of the volume's size.
  EXPECT_EQ(out.unwrapped_rad.size(), a.phase.size());
  EXPECT_EQ(out.field_hz.size(), g.voxel_count());
  EXPECT_EQ(out.offset_rad.size(), g.voxel_count());
  // The unwrapped phase is congruent with the wrapped input inside the mask.
  for (size_t i = 0; i < a.phase.size(); ++i) {
    if (!a.brain_mask[i % g.voxel_count()]) continue;
    const double k = (out.unwrapped_rad[i] - a.phase[i]) / (2 * M_PI);
    ASSERT_NEAR(k, std::round(k), 1e-3) << i;
  }
}

TEST(Pipeline, NoisyScanWithAMaskFromTheMagnitude) {
  const Geometry g = head(64, 64, 48, 3.0);
  const PhantomAcquisition& a = scan(100);
  PipelineRequest r;
  r.background = BackgroundRemoval::Vsharp;
  r.method = Method::Tv;
  r.method_params.set("tv.maxIterations", 60);
  const PipelineResult out = run(a, {}, r);
  // The mask made from the magnitude covers the brain (Dice against the truth).
  double both = 0, sum = 0;
  for (size_t i = 0; i < out.mask.size(); ++i) {
    both += (out.mask[i] && a.brain_mask[i]);
    sum += (out.mask[i] != 0) + (a.brain_mask[i] != 0);
  }
  const double dice = 2 * both / sum;
  EXPECT_GT(dice, 0.8) << dice;
  // χ against the truth where both masks hold.
  std::vector<uint8_t> inside(out.mask.size());
  for (size_t i = 0; i < inside.size(); ++i) inside[i] = out.local_mask[i] && a.brain_mask[i];
  const Agreement chi = compare_maps(g, out.chi, a.brain_chi, inside);
  EXPECT_GT(chi.r, 0.8) << chi.r;
  std::printf("[ pipeline ] mask Dice %.3f, chi r %.3f (V-SHARP + TV, SNR 100, mask from magnitude)\n", dice, chi.r);
}

TEST(Pipeline, PdfKeepsTheMaskAndRemovesTheBackground) {
  const Geometry g = head(64, 64, 48, 3.0);
  const PhantomAcquisition& a = scan(0);
  PipelineRequest r;
  r.background = BackgroundRemoval::Pdf;
  r.method = Method::Tkd;
  const PipelineResult out = run(a, a.brain_mask, r);
  EXPECT_EQ(out.local_mask, out.fit_mask);  // PDF erodes nothing
  // Most of the background is gone: the local field is far closer to the true local field than the total field was.
  const double before = test::demeaned_nrmse(out.total_ppm, a.local_field, out.local_mask);
  const double after = test::demeaned_nrmse(out.local_ppm, a.local_field, out.local_mask);
  EXPECT_LT(after, 0.2 * before) << before << " -> " << after;
  const Agreement chi = compare_maps(g, out.chi, a.brain_chi, out.local_mask);
  EXPECT_GT(chi.r, 0.7) << chi.r;
  std::printf("[ pipeline ] PDF: total vs local NRMSE %.2f -> %.3f, chi r %.3f (TKD)\n", before, after, chi.r);
}

// Every background removal on the phantom scan (noiseless, the true mask): the local field against the true local
// field inside the brain mask eroded by 5 voxels (15 mm: where every method defines it, away from the border each
// handles differently), both demeaned there. Floors: what each method showed at this size, less a margin.
TEST(Pipeline, EveryBackgroundRemovalOnThePhantom) {
  const Geometry g = head(64, 64, 48, 3.0);
  const PhantomAcquisition& a = scan(0);
  const std::vector<uint8_t> core = erode_mask_mm(g, a.brain_mask, 5 * 3.0);
  struct Case {
    BackgroundRemoval background;
    const char* stage;
    double floor;
  };
  // Seen: V-SHARP 0.991, PDF 0.994, LBV 0.991 (0.877 unpeeled: the cortical ribbon's own field on the mask's border
  // was taken as background), iSMV 0.985, SHARP 0.906 (4 mm is a 7-voxel kernel at 3 mm), RESHARP 0.988.
  const Case cases[] = {{BackgroundRemoval::Vsharp, "V-SHARP", 0.98}, {BackgroundRemoval::Pdf, "PDF", 0.98},
                        {BackgroundRemoval::Lbv, "LBV", 0.98},        {BackgroundRemoval::Ismv, "iSMV", 0.97},
                        {BackgroundRemoval::Sharp, "SHARP", 0.88},    {BackgroundRemoval::Resharp, "RESHARP", 0.97}};
  for (const Case& c : cases) {
    PipelineRequest r;
    r.background = c.background;
    r.te_s = a.te_s;
    EXPECT_EQ(plan_pipeline(g, r, true, true, Target::Wasm).stages, (std::vector<std::string>{"echo fit", c.stage}));
    const PipelineResult out = run(a, a.brain_mask, r);
    std::vector<uint8_t> inside(core.size());
    uint64_t kept = 0, brain = 0;
    for (size_t i = 0; i < core.size(); ++i) {
      inside[i] = core[i] && out.local_mask[i];
      kept += out.local_mask[i] != 0;
      brain += a.brain_mask[i] != 0;
    }
    const std::vector<float> local = test::demeaned(out.local_ppm, inside), truth = test::demeaned(a.local_field, inside);
    const Agreement ag = compare_maps(g, local, truth, inside);
    std::printf("[ pipeline ] %-8s local field vs truth (brain eroded 5 voxels): r %.4f, NRMSE %.3f; mask kept %.3f\n",
                c.stage, ag.r, ag.nrmse, static_cast<double>(kept) / static_cast<double>(brain));
    EXPECT_GT(ag.r, c.floor) << c.stage;
  }
}

// RESHARP on a small head (24×20×16 mm, the API tests' phantom scan): its 6 mm radius used to erode the brain mask to
// nothing; its radius now shrinks to the floor (2 voxels of 1 mm), the run says so, and the local field it keeps agrees
// with the truth; with resharp.minKeptShare 0 it is refused as before.
TEST(Pipeline, ResharpRunsOnASmallHeadWithAWarning) {
  const Geometry g = head(24, 20, 16, 1.0);
  AcquisitionOptions o;
  o.te_s = {0.004, 0.008};
  const PhantomAcquisition a = make_acquisition(g, o);
  PipelineRequest r;
  r.background = BackgroundRemoval::Resharp;
  r.te_s = a.te_s;
  Pipeline p(g, a.phase, a.magnitude, a.brain_mask, r);
  while (!p.finished()) p.step();
  const PipelineResult out = p.take_result();
  bool said = false;
  for (const auto& w : out.warnings) said = said || w.find("RESHARP's radius (resharp.radius 6 mm) would keep less than 50 % of the mask") != std::string::npos;
  EXPECT_TRUE(said);
  uint64_t kept = 0;
  for (uint8_t m : out.local_mask) kept += m;
  EXPECT_GT(kept, 100u);
  // Against the true local field on the voxels kept: the 2 mm kernel's field is poorer at the mask's edge (V-SHARP's
  // smallest kernel has the same radius here and scores alike).
  const Agreement ag = compare_maps(g, test::demeaned(out.local_ppm, out.local_mask), test::demeaned(a.local_field, out.local_mask),
                                    out.local_mask);
  std::printf("[ pipeline ] RESHARP on a 24x20x16 mm head: %llu voxels kept, local r %.3f\n", static_cast<unsigned long long>(kept), ag.r);
  EXPECT_GT(ag.r, 0.4);
  r.resharp.min_kept_share = 0.0;
  Pipeline fixed(g, a.phase, a.magnitude, a.brain_mask, r);
  EXPECT_NE(test::error_of([&] { while (!fixed.finished()) fixed.step(); }, ErrorCode::InvalidArgument).find("erodes the mask to nothing"),
            std::string::npos);
}

TEST(Pipeline, WithoutAMethodItEndsAtTheLocalField) {
  const PhantomAcquisition& a = scan(0);
  const PipelineResult out = run(a, a.brain_mask, PipelineRequest{});
  EXPECT_TRUE(out.chi.empty());
  EXPECT_FALSE(out.local_ppm.empty());
}

// What the front end keeps and gets right of one head, and χ on the brain eroded by 5 voxels (away from the edge
// every background removal loses).
struct FrontEnd {
  double wrong = 0;  // share of the mask whose total field is off by more than 0.1 ppm (after the mean offset)
  double fit = 0;    // fit mask / mask
  double local = 0;  // local mask / mask
  double chi_r = 0;
  double chi_nrmse = 0;
};

FrontEnd front_end(double tilt_degrees, Unwrapper unwrapper) {
  Geometry g = head(64, 64, 48, 3.0);
  const double t = tilt_degrees * M_PI / 180.0;
  g.b0_dir = {0.0, std::sin(t), std::cos(t)};  // tilted about x, the head's left-right axis
  AcquisitionOptions o;
  o.te_s = {0.004, 0.008, 0.012, 0.016};
  const PhantomAcquisition a = make_acquisition(g, o);
  PipelineRequest r;
  r.method = Method::Rts;
  r.echo_fit.unwrapper = unwrapper;
  r.te_s = a.te_s;
  r.b0_tesla = a.b0_tesla;
  Pipeline p(g, a.phase, a.magnitude, a.brain_mask, r);
  while (!p.finished()) p.step();
  const PipelineResult out = p.take_result();
  // The unresolvable constant: the median of the error over the mask.
  std::vector<double> error;
  uint64_t fit = 0, local = 0;
  for (size_t i = 0; i < out.mask.size(); ++i) {
    if (out.mask[i]) error.push_back(static_cast<double>(out.total_ppm[i]) - a.total_field[i]);
    fit += out.fit_mask[i] != 0;
    local += out.local_mask[i] != 0;
  }
  std::vector<double> sorted = error;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
  const double offset = sorted[sorted.size() / 2];
  // One echo unwrapped 2π off moves the 4-echo line's slope by at least 2π·2 ms/80 ms² (an inner echo), 0.196 ppm at
  // 3 T: half of that is wrong.
  uint64_t wrong = 0;
  for (const double e : error) wrong += std::fabs(e - offset) > 0.1;
  const double n = static_cast<double>(error.size());
  const std::vector<uint8_t> core = erode_mask_mm(g, a.brain_mask, 5 * 3.0);
  std::vector<uint8_t> compared(core.size());
  for (size_t i = 0; i < core.size(); ++i) compared[i] = core[i] && out.local_mask[i];
  const Agreement chi = compare_maps(g, out.chi, a.brain_chi, compared);
  return {static_cast<double>(wrong) / n, static_cast<double>(fit) / n, static_cast<double>(local) / n, chi.r, chi.nrmse};
}

// Echo fit, unwrapping and background removal do not depend on B0's direction: a head scanned 30° off the volume's
// axes goes through them as well as upright (only the dipole kernel of the inversion uses B0's direction).
TEST(Pipeline, ObliqueB0HoldsLikeUpright) {
  const FrontEnd upright = front_end(0, Unwrapper::RegionGrowing);
  const FrontEnd oblique = front_end(30, Unwrapper::RegionGrowing);
  std::printf("[ pipeline ] upright / 30 deg: total field wrong in %.4f / %.4f of the mask, fit mask %.4f / %.4f, local "
              "mask %.4f / %.4f, chi r %.5f / %.5f, NRMSE %.5f / %.5f (RTS, brain eroded by 5 voxels)\n",
              upright.wrong, oblique.wrong, upright.fit, oblique.fit, upright.local, oblique.local, upright.chi_r,
              oblique.chi_r, upright.chi_nrmse, oblique.chi_nrmse);
  EXPECT_LT(upright.wrong, 0.02);
  EXPECT_LT(oblique.wrong, 0.02);
  EXPECT_GT(oblique.fit, upright.fit - 0.01);
  EXPECT_GT(oblique.local, upright.local - 0.02);
  EXPECT_GT(oblique.chi_r, upright.chi_r - 0.05);
  EXPECT_GT(upright.chi_r, 0.9);
}

// The Laplacian unwrap at 30°: it leaves out much of the mask upright too; what it keeps inverts as well oblique.
TEST(Pipeline, ObliqueB0WithTheLaplacianUnwrap) {
  const FrontEnd upright = front_end(0, Unwrapper::Laplacian);
  const FrontEnd oblique = front_end(30, Unwrapper::Laplacian);
  std::printf("[ pipeline ] laplacian unwrap, upright / 30 deg: total field wrong in %.4f / %.4f of the mask, fit mask "
              "%.4f / %.4f, local mask %.4f / %.4f, chi r %.3f / %.3f\n",
              upright.wrong, oblique.wrong, upright.fit, oblique.fit, upright.local, oblique.local, upright.chi_r,
              oblique.chi_r);
  EXPECT_GT(oblique.chi_r, upright.chi_r - 0.05);
  EXPECT_GT(oblique.local, upright.local - 0.05);
}

TEST(Pipeline, BadInputsGetOneClearLine) {
  const Geometry g = head(64, 64, 48, 3.0);
  const PhantomAcquisition& a = scan(0);
  PipelineRequest r;
  r.te_s = {0.004, 0.008, 0.012};  // one TE short
  std::string m = test::error_of([&] { Pipeline(g, a.phase, a.magnitude, a.brain_mask, r); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("4 echoes"), std::string::npos) << m;
  r.te_s = {4, 8, 12, 16};  // milliseconds
  m = test::error_of([&] { Pipeline(g, a.phase, a.magnitude, a.brain_mask, r); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("milliseconds"), std::string::npos) << m;
  r.te_s = a.te_s;
  std::vector<float> unwrapped(a.phase.size());
  for (size_t i = 0; i < unwrapped.size(); ++i) unwrapped[i] = a.phase[i] + 40.0f * static_cast<float>(i % 7);
  m = test::error_of([&] { Pipeline(g, unwrapped, a.magnitude, a.brain_mask, r); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("wrapped"), std::string::npos) << m;
  const std::vector<float> short_magnitude(a.phase.size() / 2, 1.0f);
  m = test::error_of([&] { Pipeline(g, a.phase, short_magnitude, a.brain_mask, r); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("magnitude"), std::string::npos) << m;
  m = test::error_of([&] { Pipeline(g, a.phase, {}, {}, r); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("no mask and no magnitude"), std::string::npos) << m;
  const std::vector<uint8_t> empty(g.voxel_count(), 0);
  test::error_of([&] { Pipeline(g, a.phase, a.magnitude, empty, r); }, ErrorCode::InvalidArgument);
  r.method = Method::Medi;
  m = test::error_of([&] { Pipeline(g, a.phase, {}, a.brain_mask, r); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("needs the magnitude"), std::string::npos) << m;
}

// The brain mask grown by n voxels (6-neighbour steps) into what surrounds it.
std::vector<uint8_t> grown(const Geometry& g, std::vector<uint8_t> m, int n) {
  for (int step = 0; step < n; ++step) {
    std::vector<uint8_t> next = m;
    for (int64_t z = 0; z < g.dims[2]; ++z)
      for (int64_t y = 0; y < g.dims[1]; ++y)
        for (int64_t x = 0; x < g.dims[0]; ++x) {
          if (m[g.index(x, y, z)]) continue;
          const bool touch = (x > 0 && m[g.index(x - 1, y, z)]) || (x + 1 < g.dims[0] && m[g.index(x + 1, y, z)]) ||
                             (y > 0 && m[g.index(x, y - 1, z)]) || (y + 1 < g.dims[1] && m[g.index(x, y + 1, z)]) ||
                             (z > 0 && m[g.index(x, y, z - 1)]) || (z + 1 < g.dims[2] && m[g.index(x, y, z + 1)]);
          next[g.index(x, y, z)] = touch;
        }
    m = std::move(next);
  }
  return m;
}

bool has_warning(const PipelineResult& out, const std::string& text) {
  for (const std::string& w : out.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// A mask reaching outside the brain: grown by 2 voxels into CSF, skull and air, it warns (its magnitude there is
// background); the true brain mask does not; an all-ones mask is refused (χ would be made of air).
TEST(Pipeline, AMaskReachingOutsideTheTissueWarnsOrIsRefused) {
  const Geometry g = head(64, 64, 48, 3.0);
  const PhantomAcquisition& a = scan(100);
  PipelineRequest r;
  r.method = Method::Tkd;
  const double truth = mask_background_share(a.magnitude, a.brain_mask, r.brain_mask);
  const std::vector<uint8_t> big = grown(g, a.brain_mask, 2);
  const double wide = mask_background_share(a.magnitude, big, r.brain_mask);
  std::printf("[ pipeline ] mask share at or below the tissue threshold: true brain %.3f, grown by 2 voxels %.3f\n", truth, wide);
  EXPECT_LE(truth, kMaskBackgroundWarnShare);
  EXPECT_GT(wide, kMaskBackgroundWarnShare);
  const PipelineResult fine = run(a, a.brain_mask, r);
  EXPECT_FALSE(has_warning(fine, "reaches outside the brain")) << (fine.warnings.empty() ? "" : fine.warnings[0]);
  const PipelineResult out = run(a, big, r);
  EXPECT_TRUE(has_warning(out, "the mask reaches outside the brain"));
  const std::vector<uint8_t> ones(g.voxel_count(), 1);
  PipelineRequest pdf = r;
  pdf.background = BackgroundRemoval::Pdf;
  pdf.te_s = a.te_s;
  const std::string m = test::error_of([&] { Pipeline(g, a.phase, a.magnitude, ones, pdf); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("the mask is mostly outside the head"), std::string::npos) << m;
}

// A voxel of 100 mm is taken as given, with a warning; a single slice is refused before any stage runs.
TEST(Pipeline, ImplausibleGeometryWarnsOrIsRefused) {
  const PhantomAcquisition& a = scan(0);
  PipelineRequest r;
  r.te_s = a.te_s;
  Geometry g = head(64, 64, 48, 3.0);
  g.voxel_mm = {100, 100, 100};
  Pipeline p(g, a.phase, a.magnitude, a.brain_mask, r);
  EXPECT_TRUE(has_warning(p.intermediates(), "100×100×100 mm is outside 0.1–10 mm"));
  const Geometry slice{{64, 64, 1}, {3, 3, 3}, {0, 0, 1}};
  const uint64_t n = slice.voxel_count();
  std::vector<float> one_echo_phase;
  for (int e = 0; e < 4; ++e) one_echo_phase.insert(one_echo_phase.end(), a.phase.begin() + static_cast<std::ptrdiff_t>(e * g.voxel_count()), a.phase.begin() + static_cast<std::ptrdiff_t>(e * g.voxel_count() + n));
  const std::vector<uint8_t> mask(n, 1);
  const std::string m = test::error_of([&] { Pipeline(slice, one_echo_phase, {}, mask, r); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("along z: a 3D dipole inversion"), std::string::npos) << m;
}

// A stage that fails names itself, and the stages that finished keep their intermediates; a stage that leaves out much
// of the mask says how much and why.
TEST(Pipeline, AFailedStageIsNamedAndTheFinishedStagesAreKept) {
  const Geometry g = head(64, 64, 48, 3.0);
  const PhantomAcquisition& a = scan(0);
  PipelineRequest r;
  r.te_s = a.te_s;
  r.b0_tesla = a.b0_tesla;
  r.background = BackgroundRemoval::Vsharp;
  r.vsharp.min_radius_voxels = 30;  // erodes the whole brain
  r.vsharp.max_radius_mm = 90;
  Pipeline p(g, a.phase, a.magnitude, a.brain_mask, r);
  const std::string m = test::error_of([&] {
    while (!p.finished()) p.step();
  }, ErrorCode::InvalidArgument);
  EXPECT_EQ(m.rfind("the V-SHARP stage failed: ", 0), 0u) << m;
  const PipelineResult& kept = p.intermediates();
  EXPECT_EQ(kept.field_hz.size(), g.voxel_count());  // the echo fit finished
  EXPECT_EQ(kept.total_ppm.size(), g.voxel_count());
  EXPECT_TRUE(kept.local_ppm.empty());  // V-SHARP did not
  // V-SHARP at its defaults on this 3 mm head: its erosion's share is said when over the bound.
  PipelineRequest d;
  d.background = BackgroundRemoval::Vsharp;
  const PipelineResult out = run(a, a.brain_mask, d);
  uint64_t fit = 0, local = 0;
  for (size_t i = 0; i < out.local_mask.size(); ++i) fit += out.fit_mask[i] != 0, local += out.local_mask[i] != 0;
  const double share = 1.0 - static_cast<double>(local) / static_cast<double>(fit);
  std::printf("[ pipeline ] V-SHARP left out %.3f of the fit mask\n", share);
  EXPECT_EQ(has_warning(out, "V-SHARP left out"), share > kBackgroundLeftOutWarnShare);
}

}  // namespace
}  // namespace tessera
