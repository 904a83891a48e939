// Background field removal against analytic truths: LBV, iSMV, SHARP and RESHARP (V-SHARP and PDF alongside for
// comparison) on a spherical mask, with the exterior fields of uniformly magnetised spheres (point-dipole fields) as
// background and local sources.
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <string>

#include "support.h"
#include "tessera/background/background.h"
#include "tessera/common/morphology.h"

namespace tessera {
namespace {

// A uniformly magnetised sphere: centre (mm, in the volume's voxel coordinates times the edge), radius (mm), Δχ (ppm).
struct Ball {
  double c[3];
  double radius;
  double chi;
};

// Its relative field along B0 = z (ppm): 0 inside (Lorentz-corrected), Δχ/3 · a³ · (3 cos²θ − 1) / r³ outside.
double ball_field(const Ball& b, double x, double y, double z) {
  const double dx = x - b.c[0], dy = y - b.c[1], dz = z - b.c[2];
  const double r2 = dx * dx + dy * dy + dz * dz;
  if (r2 <= b.radius * b.radius) return 0.0;
  const double r = std::sqrt(r2);
  return b.chi / 3.0 * b.radius * b.radius * b.radius * (3.0 * dz * dz / r2 - 1.0) / (r2 * r);
}

// 64³ at 1 mm; a spherical mask of radius 24 mm about the centre; background sources outside it: an air-like ball
// below (Δχ 9 ppm, 8 mm, its surface 8 mm from the mask) and a bone-like one at the side (−2 ppm, 6 mm); a local source
// inside: a 4 mm ball of 0.2 ppm off the centre.
struct HarmonicScene {
  Geometry g;
  std::vector<uint8_t> mask;
  std::vector<float> background, local, total;
};

const HarmonicScene& harmonic_scene() {
  static const HarmonicScene s = [] {
    HarmonicScene s;
    s.g = test::head(64, 64, 64, 1.0);
    const uint64_t n = s.g.voxel_count();
    s.mask.assign(n, 0);
    s.background.assign(n, 0.0f);
    s.local.assign(n, 0.0f);
    s.total.assign(n, 0.0f);
    const Ball bg[2] = {{{32, 32, 32 - 40}, 8, 9.0}, {{32 + 36, 32 + 8, 32 + 6}, 6, -2.0}};
    const Ball inner{{36, 29, 34}, 4, 0.2};
    for (int64_t z = 0; z < 64; ++z)
      for (int64_t y = 0; y < 64; ++y)
        for (int64_t x = 0; x < 64; ++x) {
          const uint64_t i = s.g.index(x, y, z);
          const double dx = x - 32.0, dy = y - 32.0, dz = z - 32.0;
          s.mask[i] = dx * dx + dy * dy + dz * dz <= 24.0 * 24.0;
          const double b = ball_field(bg[0], x, y, z) + ball_field(bg[1], x, y, z);
          const double l = ball_field(inner, x, y, z);
          s.background[i] = static_cast<float>(b);
          s.local[i] = static_cast<float>(l);
          s.total[i] = static_cast<float>(b + l);
        }
    return s;
  }();
  return s;
}

double rms(std::span<const float> a, std::span<const uint8_t> m) {
  double s = 0.0;
  uint64_t k = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (m[i]) s += static_cast<double>(a[i]) * a[i], ++k;
  return std::sqrt(s / static_cast<double>(k));
}

// ‖a − b‖ / ‖b‖ and Pearson's r over the mask.
struct FieldAgreement {
  double relative = 0.0, r = 0.0;
};
FieldAgreement agreement(std::span<const float> a, std::span<const float> b, std::span<const uint8_t> m) {
  double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, d2 = 0, b2 = 0, k = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!m[i]) continue;
    const double x = a[i], y = b[i];
    sa += x, sb += y, saa += x * x, sbb += y * y, sab += x * y, d2 += (x - y) * (x - y), b2 += y * y, ++k;
  }
  FieldAgreement out;
  out.relative = std::sqrt(d2 / b2);
  out.r = (sab - sa * sb / k) / std::sqrt((saa - sa * sa / k) * (sbb - sb * sb / k));
  return out;
}

enum class Kind { Lbv, Ismv, Sharp, Resharp, VSharp, Pdf };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Lbv: return "LBV";
    case Kind::Ismv: return "iSMV";
    case Kind::Sharp: return "SHARP";
    case Kind::Resharp: return "RESHARP";
    case Kind::VSharp: return "V-SHARP";
    case Kind::Pdf: return "PDF";
  }
  return "";
}

LocalField remove(Kind k, const Geometry& g, std::span<const float> f, std::span<const uint8_t> m, unsigned threads = 1) {
  switch (k) {
    case Kind::Lbv: return lbv(g, f, m, {}, threads);
    case Kind::Ismv: return ismv(g, f, m, {}, threads);
    case Kind::Sharp: return sharp(g, f, m, {}, threads);
    case Kind::Resharp: return resharp(g, f, m, {}, threads);
    case Kind::VSharp: return vsharp(g, f, m, {}, threads);
    case Kind::Pdf: return pdf(g, f, m, {}, {}, threads);
  }
  return {};
}

constexpr Kind kNew[] = {Kind::Lbv, Kind::Ismv, Kind::Sharp, Kind::Resharp};
constexpr Kind kAll[] = {Kind::Lbv, Kind::Ismv, Kind::Sharp, Kind::Resharp, Kind::VSharp, Kind::Pdf};

// (a) A harmonic background alone is removed to under 1 % of its RMS on the method's mask. The fields are continuous
// dipole fields sampled at the voxels; what remains is the methods' discretisation (the discrete sphere's or
// Laplacian's error on a field varying over ~10 mm), well under 1 % at 1 mm voxels.
TEST(HarmonicBackground, ABackgroundAloneIsRemoved) {
  const HarmonicScene& s = harmonic_scene();
  for (Kind k : kAll) {
    const LocalField out = remove(k, s.g, s.background, s.mask);
    const double left = rms(out.field, out.mask), size = rms(s.background, out.mask);
    uint64_t kept = 0;
    for (uint8_t b : out.mask) kept += b;
    std::printf("[ background ] %-8s background alone: RMS %.4f -> %.5f ppm (%.3f %%), %llu voxels kept\n", kind_name(k),
                size, left, 100.0 * left / size, static_cast<unsigned long long>(kept));
    if (k == Kind::Pdf) continue;  // PDF fits dipoles in the padded box only: not bound by the 1 % here
    EXPECT_LT(left, 0.01 * size) << kind_name(k);
  }
}

// (b) Background plus a local ball: the local field is recovered. Bounds: the local field is a dipole pattern of
// 0.13 ppm at the ball's surface falling as 1/r³; the border values LBV and iSMV take as background carry ~1e-3 ppm of
// it, SHARP's truncated deconvolution loses its lowest frequencies (all three showed 5 % relative error, r 0.9986 to
// 0.9989); RESHARP's Tikhonov term (λ 1e-4) and its 30 CG iterations shrink it further (11.5 %, r 0.9935 at the 5 mm its
// radius shrinks to on this ball; 10 %, r 0.995 at a fixed 6 mm). Bounds: 8 % (15 % for RESHARP) and r above 0.99.
TEST(HarmonicBackground, TheLocalFieldIsRecovered) {
  const HarmonicScene& s = harmonic_scene();
  for (Kind k : kAll) {
    const LocalField out = remove(k, s.g, s.total, s.mask);
    for (size_t i = 0; i < out.mask.size(); ++i) ASSERT_TRUE(!out.mask[i] || s.mask[i]);
    const FieldAgreement a = agreement(out.field, s.local, out.mask);
    std::printf("[ background ] %-8s local ball: relative error %.4f, r %.5f\n", kind_name(k), a.relative, a.r);
    if (k == Kind::Pdf || k == Kind::VSharp) continue;
    EXPECT_LT(a.relative, k == Kind::Resharp ? 0.15 : 0.08) << kind_name(k);
    EXPECT_GT(a.r, 0.99) << kind_name(k);
  }
}

// (b2) A χ layer along the mask's border, as the cortical ribbon lies along a brain mask's: a spherical shell of
// Δχ 0.05 ppm between radii 20.5 and 24 mm (the mask's own edge), a 3.5 mm ribbon. Its field is 0 inside the shell's
// cavity (a uniformly magnetised sphere less a smaller one) and −Δχ/3 · a³ · (3 cos²θ − 1) / r³ within the shell, so
// on the mask's border it is −0.0104 · (3 cos²θ − 1) ppm. LBV unpeeled takes that for background and carries it
// harmonically into the cavity (−0.0104 · (r / 24)² · (3 cos²θ − 1), where the truth is only the local ball: seen
// relative error 0.38, r 0.945); with the default peel its border lies in the cavity, where the shell's field is
// exactly 0 and the background harmonic (seen 0.034, r 0.9995).
TEST(HarmonicBackground, LbvDoesNotTakeTheRibbonForBackground) {
  const HarmonicScene& s = harmonic_scene();
  const Ball outer{{32, 32, 32}, 24, 0.05}, inner{{32, 32, 32}, 20.5, 0.05};
  const uint64_t n = s.g.voxel_count();
  std::vector<float> total(n), local(n);
  for (int64_t z = 0; z < 64; ++z)
    for (int64_t y = 0; y < 64; ++y)
      for (int64_t x = 0; x < 64; ++x) {
        const uint64_t i = s.g.index(x, y, z);
        const double shell = ball_field(outer, x, y, z) - ball_field(inner, x, y, z);
        local[i] = static_cast<float>(s.local[i] + shell);
        total[i] = static_cast<float>(s.background[i] + s.local[i] + shell);
      }
  // Scored inside 16 mm of the centre, where both runs define the field.
  std::vector<uint8_t> core(n, 0);
  for (int64_t z = 0; z < 64; ++z)
    for (int64_t y = 0; y < 64; ++y)
      for (int64_t x = 0; x < 64; ++x)
        core[s.g.index(x, y, z)] = (x - 32) * (x - 32) + (y - 32) * (y - 32) + (z - 32) * (z - 32) <= 16 * 16;
  LbvParams unpeeled;
  unpeeled.peel_mm = 0.0;
  const LocalField peeled = lbv(s.g, total, s.mask), plain = lbv(s.g, total, s.mask, unpeeled);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(!core[i] || (peeled.mask[i] && plain.mask[i]));
  const FieldAgreement a = agreement(peeled.field, local, core), b = agreement(plain.field, local, core);
  std::printf("[ background ] LBV with a ribbon on the border: peeled %.0f mm relative error %.4f, r %.5f; unpeeled "
              "%.4f, r %.5f\n", lbv_defaults::kPeelMm, a.relative, a.r, b.relative, b.r);
  EXPECT_LT(a.relative, 0.08);
  EXPECT_GT(a.r, 0.99);
  EXPECT_GT(b.relative, 0.2);  // the failure the peel removes
}

// (c) The same bits for 1 and 2 threads.
TEST(HarmonicBackground, BitIdenticalForOneAndTwoThreads) {
  const HarmonicScene& s = harmonic_scene();
  for (Kind k : kNew) {
    const LocalField one = remove(k, s.g, s.total, s.mask, 1), two = remove(k, s.g, s.total, s.mask, 2);
    EXPECT_EQ(one.mask, two.mask) << kind_name(k);
    ASSERT_EQ(one.field.size(), two.field.size());
    EXPECT_EQ(0, std::memcmp(one.field.data(), two.field.data(), one.field.size() * sizeof(float))) << kind_name(k);
  }
}

// (d) Cancelled between steps, with the step counts each plans.
TEST(HarmonicBackground, CancelBetweenSteps) {
  const HarmonicScene& s = harmonic_scene();
  std::atomic<bool> cancel{false};
  auto stop_after_one = [&](uint64_t done, uint64_t) {
    if (done == 1) cancel = true;
  };
  Lbv l(s.g, s.total, s.mask);
  EXPECT_EQ(test::error_of([&] { run_to_end(l, stop_after_one, &cancel); }, ErrorCode::Cancelled),
            "LBV cancelled after 1 of 500 steps");
  EXPECT_FALSE(l.finished());
  test::error_of([&] { l.take_result(); }, ErrorCode::Internal);
  cancel = false;
  Ismv i(s.g, s.total, s.mask);
  EXPECT_EQ(test::error_of([&] { run_to_end(i, stop_after_one, &cancel); }, ErrorCode::Cancelled),
            "iSMV cancelled after 1 of 50 steps");
  cancel = false;
  Sharp sh(s.g, s.total, s.mask);
  EXPECT_EQ(test::error_of([&] { run_to_end(sh, stop_after_one, &cancel); }, ErrorCode::Cancelled),
            "SHARP cancelled after 1 of 2 steps");
  cancel = false;
  Resharp r(s.g, s.total, s.mask);
  EXPECT_EQ(test::error_of([&] { run_to_end(r, stop_after_one, &cancel); }, ErrorCode::Cancelled),
            "RESHARP cancelled after 1 of 30 steps");
  // Converged runs end early: LBV's multigrid-preconditioned CG needs tens of its 500 steps.
  Lbv full(s.g, s.total, s.mask);
  run_to_end(full);
  EXPECT_LT(full.steps_done(), 60u);
  EXPECT_LE(full.relative_residual(), lbv_defaults::kTolerance);
  std::printf("[ background ] LBV converged to %.2g in %u steps\n", full.relative_residual(), full.steps_done());
}

// (e) Bad parameters and inputs are refused, naming them with their range and unit.
TEST(HarmonicBackground, RefusesBadParametersByName) {
  auto message = [](const std::function<void()>& f) { return test::error_of(f, ErrorCode::InvalidArgument); };
  LbvParams l;
  l.tolerance = 0;
  EXPECT_EQ(message([&] { validate(l); }).rfind("lbv.tolerance must be in (0, 0.1], got 0 (relative residual", 0), 0u);
  l = {};
  l.max_iterations = 0;
  EXPECT_NE(message([&] { validate(l); }).find("lbv.maxIterations must be a whole number in [1, 10000], got 0"), std::string::npos);
  l = {};
  l.peel_mm = -1;
  EXPECT_NE(message([&] { validate(l); }).find("lbv.peel must be in [0, 20] mm, got -1"), std::string::npos);
  IsmvParams i;
  i.radius_mm = 0.1;
  EXPECT_NE(message([&] { validate(i); }).find("ismv.radius must be in [0.5, 50] mm, got 0.1"), std::string::npos);
  i = {};
  i.tolerance = 1;
  EXPECT_NE(message([&] { validate(i); }).find("ismv.tolerance must be in (0, 0.1], got 1"), std::string::npos);
  i = {};
  i.max_iterations = 20000;
  EXPECT_NE(message([&] { validate(i); }).find("ismv.maxIterations must be a whole number in [1, 10000], got 20000"), std::string::npos);
  SharpParams sp;
  sp.radius_mm = 60;
  EXPECT_NE(message([&] { validate(sp); }).find("sharp.radius must be in [0.5, 50] mm, got 60"), std::string::npos);
  sp = {};
  sp.threshold = 1;
  EXPECT_NE(message([&] { validate(sp); }).find("sharp.threshold must be in (0, 1), got 1"), std::string::npos);
  ResharpParams r;
  r.lambda = 0;
  EXPECT_NE(message([&] { validate(r); }).find("resharp.lambda must be in (0, 1], got 0"), std::string::npos);
  r = {};
  r.tolerance = -1;
  EXPECT_NE(message([&] { validate(r); }).find("resharp.tolerance must be in (0, 0.1], got -1"), std::string::npos);
  r = {};
  r.max_iterations = 0;
  EXPECT_NE(message([&] { validate(r); }).find("resharp.maxIterations must be a whole number in [1, 10000], got 0"), std::string::npos);

  // A 9×7×5 box at 1 mm: its deepest voxels lie 3 mm inside; a 4 mm kernel erodes it to nothing.
  const Geometry g = test::geometry(24, 24, 24);
  const std::vector<uint8_t> box = test::box_mask(g, {5, 5, 5}, {14, 12, 10});
  const std::vector<float> zero(g.voxel_count(), 0.0f);
  EXPECT_EQ(message([&] { Sharp(g, zero, box); }),
            "sharp: radius_mm 4 mm erodes the mask to nothing: its deepest voxel lies 3 mm inside; give a smaller "
            "radius or a larger mask");
  // RESHARP's radius shrinks to the box's depth (below); with min_kept_share 0 it keeps 6 mm and is refused.
  ResharpParams fixed;
  fixed.min_kept_share = 0.0;
  EXPECT_NE(message([&] { Resharp(g, zero, box, fixed); }).find("resharp: radius_mm 6 mm erodes the mask to nothing"),
            std::string::npos);
  r = {};
  r.min_kept_share = 1.5;
  EXPECT_NE(message([&] { validate(r); }).find("resharp.minKeptShare must be in [0, 1]"), std::string::npos);
  EXPECT_NE(message([&] { Ismv(g, zero, box); }).find("ismv: radius_mm 5 mm erodes the mask to nothing"), std::string::npos);
  // A one-voxel-thin mask has no interior for LBV; an empty one is named.
  const std::vector<uint8_t> sheet = test::box_mask(g, {5, 5, 5}, {14, 12, 6});
  LbvParams unpeeled;
  unpeeled.peel_mm = 0.0;
  EXPECT_NE(message([&] { Lbv(g, zero, sheet, unpeeled); }).find("lbv: no voxel of the mask has all 6 face neighbours"),
            std::string::npos);
  EXPECT_EQ(message([&] { Lbv(g, zero, sheet); }),
            "lbv: peel_mm 4 mm erodes the mask to nothing: lower peel_mm or give a larger mask");
  const std::vector<uint8_t> empty(g.voxel_count(), 0);
  EXPECT_NE(message([&] { Lbv(g, zero, empty); }).find("lbv: the mask holds no voxel"), std::string::npos);
  // A zero field gives a zero local field on the mask each method keeps.
  const std::vector<uint8_t> big = test::box_mask(g, {2, 2, 2}, {22, 22, 22});
  for (Kind k : kNew) {
    const LocalField out = remove(k, g, zero, big);
    for (float v : out.field) ASSERT_EQ(v, 0.0f) << kind_name(k);
  }
  // NaN inside the mask is refused.
  std::vector<float> nan = zero;
  nan[g.index(10, 10, 10)] = std::nanf("");
  EXPECT_NE(test::error_of([&] { Lbv(g, nan, big); }, ErrorCode::NonFiniteInput).find("lbv: the field holds 1 NaN/Inf"),
            std::string::npos);
}

// (f) RESHARP's radius adapts to a small mask. A 9×7×5 box at 1 mm, whose deepest voxels lie 3 mm inside, used to be
// refused at 6 mm; now no radius from 6 mm down keeps half of it, so the radius stops at the floor, 2 voxels of the
// largest edge (2 mm), which keeps the 5×3×1 voxels deeper than 2 mm. A 10 mm ball at 1 mm keeps (1 − r/10)³ of itself
// (up to the discrete sphere): a half at r ≤ 2.06 mm, so the radius steps down by 0.5 mm from 6 mm to 2 mm; there a
// harmonic background (a 9 ppm air ball 6 mm beyond the mask) is removed to under 1 % of its RMS, as the mean value
// property of a harmonic field says, up to the discrete sphere's error. The whole 24 mm ball of the scenes above keeps under half
// at 6 mm and shrinks to 5 mm (below).
// A radius under every voxel edge makes a sphere of its centre alone (the whole field would be background, the local
// field zero): RESHARP runs at its floor, 2 voxels of the largest edge; SHARP, with no rule to adapt, refuses in words.
TEST(HarmonicBackground, ARadiusUnderTheVoxelEdgeIsNotASphereOfOneVoxel) {
  const Geometry g = test::head(24, 24, 24, 100.0);
  const std::vector<uint8_t> box = test::box_mask(g, {4, 4, 4}, {20, 20, 20});
  std::vector<float> field(g.voxel_count(), 0.0f);
  for (uint64_t i = 0; i < field.size(); ++i) field[i] = static_cast<float>(0.01 * std::sin(0.7 * static_cast<double>(i % 24)));
  Resharp r(g, field, box);
  EXPECT_DOUBLE_EQ(r.radius_mm(), 200.0);
  run_to_end(r);
  const LocalField out = r.take_result();
  uint64_t nonzero = 0;
  for (size_t i = 0; i < out.field.size(); ++i) nonzero += out.mask[i] && out.field[i] != 0.0f;
  EXPECT_GT(nonzero, 0u) << "a local field of zeros: the kernel held only its centre";
  EXPECT_EQ(test::error_of([&] { Sharp(g, field, box); }, ErrorCode::InvalidArgument),
            "sharp: radius_mm 4 mm is under the smallest voxel edge (100 mm): the sphere holds only its centre, so the "
            "whole field would be taken for background; give a radius of at least one voxel edge, or check the header's "
            "voxel size");
}

TEST(HarmonicBackground, ResharpRadiusShrinksToASmallMask) {
  const Geometry g = test::geometry(24, 24, 24);
  const std::vector<uint8_t> box = test::box_mask(g, {5, 5, 5}, {14, 12, 10});
  const std::vector<float> zero(g.voxel_count(), 0.0f);
  Resharp small(g, zero, box);
  EXPECT_DOUBLE_EQ(small.radius_mm(), 2.0);
  run_to_end(small);
  uint64_t kept = 0;
  for (uint8_t b : small.take_result().mask) kept += b;
  EXPECT_EQ(kept, 5u * 3u * 1u);

  const Geometry h = test::head(32, 32, 32, 1.0);
  std::vector<uint8_t> ball(h.voxel_count(), 0);
  std::vector<float> background(h.voxel_count(), 0.0f);
  const Ball air{{16, 16, 16 - 20}, 4, 9.0};
  for (int64_t z = 0; z < 32; ++z)
    for (int64_t y = 0; y < 32; ++y)
      for (int64_t x = 0; x < 32; ++x) {
        const uint64_t i = h.index(x, y, z);
        const double dx = x - 16.0, dy = y - 16.0, dz = z - 16.0;
        ball[i] = dx * dx + dy * dy + dz * dz <= 10.0 * 10.0;
        background[i] = static_cast<float>(ball_field(air, x, y, z));
      }
  Resharp r(h, background, ball);
  EXPECT_DOUBLE_EQ(r.radius_mm(), 2.0);
  run_to_end(r);
  const LocalField out = r.take_result();
  const double left = rms(out.field, out.mask), size = rms(background, out.mask);
  std::printf("[ background ] RESHARP on a 10 mm ball: radius %.2f mm, background RMS %.4f -> %.5f ppm (%.3f %%)\n", 2.0,
              size, left, 100.0 * left / size);
  EXPECT_LT(left, 0.01 * size);

  // The 24 mm ball: a voxel ρ from the centre lies about 24.5 − ρ from the nearest voxel outside (the outside voxels'
  // centres lie beyond 24 mm, half a voxel on average), so a radius r keeps about (24.5 − r)³ / 24³ of it: 6 mm 46 %,
  // 5.5 mm 50 % (just under), 5 mm 54 %. The erosion itself (erode_mask_mm, the SMV methods' rule) says the same.
  const HarmonicScene& s = harmonic_scene();
  auto kept_share = [&](double radius) {
    uint64_t in = 0, kept = 0;
    const std::vector<uint8_t> e = erode_mask_mm(s.g, s.mask, radius);
    for (size_t i = 0; i < e.size(); ++i) in += s.mask[i], kept += e[i];
    return static_cast<double>(kept) / static_cast<double>(in);
  };
  EXPECT_LT(kept_share(6.0), 0.5);
  EXPECT_LT(kept_share(5.5), 0.5);
  EXPECT_GE(kept_share(5.0), 0.5);
  EXPECT_DOUBLE_EQ(Resharp(s.g, s.total, s.mask).radius_mm(), 5.0);
  ResharpParams fixed;
  fixed.min_kept_share = 0.0;
  EXPECT_DOUBLE_EQ(Resharp(s.g, s.total, s.mask, fixed).radius_mm(), 6.0);
}

// The planners bound what a run at 256³ allocates, and fit the wasm heap.
TEST(HarmonicBackground, WorkspaceBounds) {
  const Geometry g = test::head(256, 256, 256, 1.0);
  const uint64_t l = lbv_workspace_bytes(g, {}), i = ismv_workspace_bytes(g, {}), s = sharp_workspace_bytes(g, {}),
                 r = resharp_workspace_bytes(g, {});
  std::printf("workspace 256^3: LBV %.0f MB, iSMV %.0f MB, SHARP %.0f MB, RESHARP %.0f MB\n", l / 1e6, i / 1e6, s / 1e6,
              r / 1e6);
  const uint64_t n = 256ull * 256 * 256;
  EXPECT_GT(l, n * 21);                  // active + five float volumes at least
  EXPECT_GT(i, n * (1 + 12 + 8));        // E, S, R·f, b and a complex volume at least
  EXPECT_GT(s, n * (1 + 4 + 8));
  EXPECT_GT(r, n * (1 + 20 + 8));
  for (uint64_t b : {l, i, s, r}) EXPECT_LT(b, 3'500'000'000ull);
  ResharpParams wide;
  wide.radius_mm = 12;
  EXPECT_GT(resharp_workspace_bytes(g, wide), r);
}

// Native seconds at 160×192×144 (1 mm, an ellipsoid head mask), printed, not asserted: run with
// --gtest_also_run_disabled_tests.
TEST(HarmonicBackground, DISABLED_SecondsAt160x192x144) {
  const Geometry g = test::head(160, 192, 144, 1.0);
  const std::vector<uint8_t> mask = test::ellipsoid_mask(g, 0.85);
  std::vector<float> f(g.voxel_count());
  const Ball air{{80, 96, -30}, 20, 9.0};
  const Ball spot{{90, 100, 70}, 5, 0.2};
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x)
        f[g.index(x, y, z)] = static_cast<float>(ball_field(air, x, y, z) + ball_field(spot, x, y, z));
  for (Kind k : kAll) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    const LocalField out = remove(k, g, f, mask, 1);
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ background ] %-8s 160x192x144, 1 thread: %.2f s wall, %.2f s CPU\n", kind_name(k), sec, cpu);
  }
}

}  // namespace
}  // namespace tessera
