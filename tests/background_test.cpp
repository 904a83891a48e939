#include "tessera/common/morphology.h"
#include "tessera/background/background.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "support.h"
#include "tessera/common/dipole.h"
#include "tessera/sim/phantom.h"

namespace tessera {
namespace {

// A head with its background: the phantom's brain χ inside its mask, an air-like +9 ppm block below the brain and a
// −2 ppm skull-like shell 2 to 3 voxels outside the mask (Chebyshev), fields by the forward model with 2× padding.
struct Scene {
  Geometry g;
  std::vector<uint8_t> mask;
  std::vector<float> total;        // forward(all χ)
  std::vector<float> local;        // forward(χ inside the mask): the truth
  std::vector<float> background;   // forward(χ outside the mask)
};

const Scene& scene() {
  static const Scene s = [] {
    Scene sc;
    sc.g = test::geometry(64, 64, 48);
    sc.g.voxel_mm = {3.0, 3.0, 3.0};
    const Phantom ph = make_phantom_chi(sc.g, 1);
    sc.mask = ph.mask;
    const Geometry& g = sc.g;
    std::vector<float> inside = ph.chi, outside(g.voxel_count(), 0.0f);
    // shell: outside the mask, Chebyshev distance 2..3 from it
    for (int64_t z = 0; z < g.dims[2]; ++z)
      for (int64_t y = 0; y < g.dims[1]; ++y)
        for (int64_t x = 0; x < g.dims[0]; ++x) {
          if (sc.mask[g.index(x, y, z)]) continue;
          int near = 99;
          for (int64_t dz = -3; dz <= 3; ++dz)
            for (int64_t dy = -3; dy <= 3; ++dy)
              for (int64_t dx = -3; dx <= 3; ++dx) {
                const int64_t px = x + dx, py = y + dy, pz = z + dz;
                if (px < 0 || py < 0 || pz < 0 || px >= g.dims[0] || py >= g.dims[1] || pz >= g.dims[2]) continue;
                if (!sc.mask[g.index(px, py, pz)]) continue;
                near = std::min<int>(near, static_cast<int>(std::max({std::abs(dx), std::abs(dy), std::abs(dz)})));
              }
          if (near >= 2 && near <= 3) outside[g.index(x, y, z)] = -2.0f;
        }
    // air block below the frontal brain
    for (int64_t z = 0; z < 4; ++z)
      for (int64_t y = 30; y < 54; ++y)
        for (int64_t x = 20; x < 44; ++x)
          if (!sc.mask[g.index(x, y, z)]) outside[g.index(x, y, z)] = 9.0f;
    std::vector<float> all(g.voxel_count());
    for (size_t i = 0; i < all.size(); ++i) all[i] = inside[i] + outside[i];
    sc.total = forward_field(g, all, 2);
    sc.local = forward_field(g, inside, 2);
    sc.background = forward_field(g, outside, 2);
    return sc;
  }();
  return s;
}

// ‖a − b‖ over the mask.
double distance(std::span<const float> a, std::span<const float> b, std::span<const uint8_t> m) {
  double s = 0.0;
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i]) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(s);
}

double norm(std::span<const float> a, std::span<const uint8_t> m) {
  const std::vector<float> zero(a.size(), 0.0f);
  return distance(a, zero, m);
}

// The mask eroded by brute force: every offset within radius_mm (|d|² <= r²) inside the mask and the volume.
std::vector<uint8_t> brute_erode(const Geometry& g, std::span<const uint8_t> mask, double r) {
  std::vector<uint8_t> out(mask.size(), 0);
  int64_t reach[3];
  for (int a = 0; a < 3; ++a) reach[a] = static_cast<int64_t>(std::floor(r / g.voxel_mm[a]));
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        if (!mask[g.index(x, y, z)]) continue;
        bool ok = true;
        for (int64_t dz = -reach[2]; ok && dz <= reach[2]; ++dz)
          for (int64_t dy = -reach[1]; ok && dy <= reach[1]; ++dy)
            for (int64_t dx = -reach[0]; ok && dx <= reach[0]; ++dx) {
              const double d2 = dx * g.voxel_mm[0] * dx * g.voxel_mm[0] + dy * g.voxel_mm[1] * dy * g.voxel_mm[1] +
                                dz * g.voxel_mm[2] * dz * g.voxel_mm[2];
              if (d2 > r * r) continue;
              const int64_t px = x + dx, py = y + dy, pz = z + dz;
              ok = px >= 0 && py >= 0 && pz >= 0 && px < g.dims[0] && py < g.dims[1] && pz < g.dims[2] &&
                   mask[g.index(px, py, pz)];
            }
        out[g.index(x, y, z)] = ok ? 1 : 0;
      }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Small, fast settings for the checks that need not run the defaults.
VSharpParams quick_vsharp() {
  VSharpParams p;
  p.max_radius_mm = 18.0;  // 6 of the scene's 3 mm voxels
  return p;
}

PdfParams quick_pdf() {
  PdfParams p;
  p.pad_voxels = 10;
  p.max_iterations = 20;
  return p;
}

TEST(Background, VSharpRemovesTheBackground) {
  const Scene& s = scene();
  const auto t0 = std::chrono::steady_clock::now();
  const LocalField out = vsharp(s.g, s.total, s.mask);
  const double t = seconds_since(t0);
  const double err = distance(out.field, s.local, out.mask);
  const double before = distance(s.total, s.local, out.mask);
  const double nrmse = err / norm(s.local, out.mask);
  std::printf("V-SHARP defaults: %.2f s, NRMSE vs true local %.3f, background removed %.4f\n", t, nrmse,
              1.0 - err / before);
  // measured: NRMSE 0.22, 98.9 % removed
  EXPECT_GT(1.0 - err / before, 0.97);
  EXPECT_LT(nrmse, 0.3);
}

TEST(Background, VSharpMaskIsTheErosionBySmallestRadius) {
  const Scene& s = scene();
  VSharp v(s.g, s.total, s.mask, quick_vsharp());
  const std::vector<double> radii = v.radii_mm();
  ASSERT_EQ(radii.size(), 3u);  // 18, 12, 6 mm at 3 mm voxels (steps of 2 voxels)
  EXPECT_DOUBLE_EQ(radii.front(), 18.0);
  EXPECT_DOUBLE_EQ(radii[1], 12.0);
  EXPECT_DOUBLE_EQ(radii.back(), 6.0);
  EXPECT_EQ(v.total_steps(), 4u);
  EXPECT_EQ(v.name(), "V-SHARP");
  run_to_end(v);
  const LocalField out = v.take_result();
  EXPECT_EQ(out.mask, brute_erode(s.g, s.mask, 6.0));
  for (size_t i = 0; i < out.mask.size(); ++i)
    if (!out.mask[i]) ASSERT_EQ(out.field[i], 0.0f) << i;
}

TEST(Background, ErodeMaskMatchesBruteForceOnAnisotropicVoxels) {
  Geometry g = test::geometry(24, 20, 16);
  g.voxel_mm = {1.0, 1.5, 2.0};
  std::vector<uint8_t> mask = test::ellipsoid_mask(g, 0.95);
  mask[g.index(12, 10, 8)] = 0;  // a hole inside
  for (int64_t x = 0; x < 24; ++x) mask[g.index(x, 10, 0)] = 1;  // a line on the volume's face
  for (double r : {0.0, 1.0, 1.5, 2.9, 4.0, 6.5}) {
    EXPECT_EQ(erode_mask_mm(g, mask, r, 1), brute_erode(g, mask, r)) << r;
    EXPECT_EQ(erode_mask_mm(g, mask, r, 3), brute_erode(g, mask, r)) << r;
  }
}

TEST(Background, SharpIsOneRadius) {
  const Scene& s = scene();
  VSharpParams p;
  p.max_radius_mm = 12.0;  // the scene's voxels are 3 mm: min_radius_voxels 4 is 12 mm too
  p.min_radius_voxels = 4.0;
  VSharp v(s.g, s.total, s.mask, p);
  EXPECT_EQ(v.name(), "SHARP");
  EXPECT_EQ(v.total_steps(), 2u);
  run_to_end(v);
  const LocalField out = v.take_result();
  EXPECT_EQ(out.mask, brute_erode(s.g, s.mask, 12.0));
  const double removed = 1.0 - distance(out.field, s.local, out.mask) / distance(s.total, s.local, out.mask);
  std::printf("SHARP 12 mm: background removed %.4f\n", removed);
  EXPECT_GT(removed, 0.95);
}

TEST(Background, PdfRemovesTheBackground) {
  const Scene& s = scene();
  const auto t0 = std::chrono::steady_clock::now();
  Pdf solver(s.g, s.total, s.mask, {}, quick_pdf());
  run_to_end(solver);
  const double t = seconds_since(t0);
  const uint32_t iterations = solver.steps_done();
  const double residual = solver.relative_residual();
  const LocalField out = solver.take_result();
  const std::vector<uint8_t> inner = brute_erode(s.g, s.mask, 6.0);
  const double err = distance(out.field, s.local, out.mask);
  const double before = distance(s.total, s.local, out.mask);
  const double nrmse = err / norm(s.local, out.mask);
  const double inner_nrmse = distance(out.field, s.local, inner) / norm(s.local, inner);
  std::printf("PDF pad 10, 20 iterations: %.2f s, %u iterations, residual %.2e, NRMSE vs true local %.3f (%.3f on the "
              "mask eroded by 6 mm), background removed %.4f\n",
              t, iterations, residual, nrmse, inner_nrmse, 1.0 - err / before);
  EXPECT_EQ(out.mask, std::vector<uint8_t>(s.mask.begin(), s.mask.end()));
  EXPECT_EQ(iterations, 20u);
  EXPECT_LT(residual, 0.05);
  // measured: removed 98.0 %, NRMSE 0.44 (its error sits at the mask's edge, next to the shell), 0.24 inside
  EXPECT_GT(1.0 - err / before, 0.97);
  EXPECT_LT(nrmse, 0.55);
  EXPECT_LT(inner_nrmse, 0.3);
}

TEST(Background, PureBackgroundLeavesNearZero) {
  const Scene& s = scene();
  const LocalField v = vsharp(s.g, s.background, s.mask, quick_vsharp());
  const double v_left = norm(v.field, v.mask) / norm(s.background, v.mask);
  const LocalField p = pdf(s.g, s.background, s.mask, {}, quick_pdf());
  const double p_left = norm(p.field, p.mask) / norm(s.background, p.mask);
  std::printf("pure background left: V-SHARP %.4f, PDF %.4f of its norm\n", v_left, p_left);
  EXPECT_LT(v_left, 0.03);
  EXPECT_LT(p_left, 0.03);
}

TEST(Background, UnitPassesThrough) {
  // Both methods are linear: a field × 4 (exact in floating point) gives a local field × 4, bit for bit.
  const Scene& s = scene();
  std::vector<float> scaled(s.total.size());
  for (size_t i = 0; i < scaled.size(); ++i) scaled[i] = 4.0f * s.total[i];
  PdfParams pp = quick_pdf();
  pp.max_iterations = 4;
  const LocalField a = vsharp(s.g, s.total, s.mask, quick_vsharp()), b = vsharp(s.g, scaled, s.mask, quick_vsharp());
  const LocalField c = pdf(s.g, s.total, s.mask, {}, pp), d = pdf(s.g, scaled, s.mask, {}, pp);
  for (size_t i = 0; i < a.field.size(); ++i) {
    ASSERT_EQ(4.0f * a.field[i], b.field[i]) << i;
    ASSERT_EQ(4.0f * c.field[i], d.field[i]) << i;
  }
}

TEST(Background, BitIdenticalForAnyThreadCount) {
  const Scene& s = scene();
  PdfParams pp = quick_pdf();
  pp.max_iterations = 4;
  const LocalField v1 = vsharp(s.g, s.total, s.mask, quick_vsharp(), 1);
  const LocalField v3 = vsharp(s.g, s.total, s.mask, quick_vsharp(), 3);
  ASSERT_EQ(v1.field.size(), v3.field.size());
  EXPECT_EQ(0, std::memcmp(v1.field.data(), v3.field.data(), v1.field.size() * sizeof(float)));
  EXPECT_EQ(v1.mask, v3.mask);
  const LocalField p1 = pdf(s.g, s.total, s.mask, {}, pp, 1);
  const LocalField p3 = pdf(s.g, s.total, s.mask, {}, pp, 3);
  EXPECT_EQ(0, std::memcmp(p1.field.data(), p3.field.data(), p1.field.size() * sizeof(float)));
}

TEST(Background, WeightsEnterAsTheirSquares) {
  // Weighted least squares is blind to a uniform weight: W = 2 everywhere (exact in floating point) gives the unweighted
  // fit bit for bit, which holds only when W² weighs both the operator and the right-hand side; a weight of 0 on half
  // the mask changes the fit there.
  const Scene& s = scene();
  PdfParams pp = quick_pdf();
  pp.max_iterations = 6;
  const std::vector<float> two(s.total.size(), 2.0f);
  std::vector<float> half(s.total.size(), 1.0f);
  for (int64_t z = 0; z < 48; ++z)
    for (int64_t y = 0; y < 64; ++y)
      for (int64_t x = 32; x < 64; ++x) half[s.g.index(x, y, z)] = 0.0f;
  const LocalField plain = pdf(s.g, s.total, s.mask, {}, pp);
  const LocalField doubled = pdf(s.g, s.total, s.mask, two, pp);
  const LocalField halved = pdf(s.g, s.total, s.mask, half, pp);
  EXPECT_EQ(0, std::memcmp(plain.field.data(), doubled.field.data(), plain.field.size() * sizeof(float)));
  EXPECT_GT(distance(plain.field, halved.field, s.mask), 1e-3 * norm(plain.field, s.mask));
  EXPECT_EQ(halved.mask, plain.mask);
}

TEST(Background, CancelBetweenSteps) {
  const Scene& s = scene();
  std::atomic<bool> cancel{false};
  auto stop_after_two = [&](uint64_t done, uint64_t) {
    if (done == 2) cancel = true;
  };
  VSharp v(s.g, s.total, s.mask, quick_vsharp());
  std::string m = test::error_of([&] { run_to_end(v, stop_after_two, &cancel); }, ErrorCode::Cancelled);
  EXPECT_EQ(m, "V-SHARP cancelled after 2 of 4 steps");
  cancel = false;
  Pdf p(s.g, s.total, s.mask, {}, quick_pdf());
  m = test::error_of([&] { run_to_end(p, stop_after_two, &cancel); }, ErrorCode::Cancelled);
  EXPECT_EQ(m, "PDF cancelled after 2 of 20 steps");
  EXPECT_FALSE(p.finished());
  test::error_of([&] { p.take_result(); }, ErrorCode::Internal);
}

TEST(Background, RefusesBadInputsByName) {
  const Scene& s = scene();
  const std::vector<uint8_t> empty(s.mask.size(), 0);
  EXPECT_NE(test::error_of([&] { VSharp(s.g, s.total, empty); }, ErrorCode::InvalidArgument).find("vsharp: the mask holds no voxel"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { Pdf(s.g, s.total, empty); }, ErrorCode::InvalidArgument).find("pdf: the mask holds no voxel"),
            std::string::npos);
  // A 9×7×5 box at 1 mm: its deepest voxels lie 3 mm from the nearest outside voxel (along z). A smallest radius that
  // erodes it to nothing is named, with the depth; the default largest radius fits nowhere there, and the
  // radii that fit no voxel are dropped: V-SHARP runs from the largest that fits (2 mm).
  const Geometry bg = test::geometry(24, 24, 24);
  const std::vector<uint8_t> box = test::box_mask(bg, {5, 5, 5}, {14, 12, 10});
  const std::vector<float> zero(bg.voxel_count(), 0.0f);
  VSharpParams big;
  big.min_radius_voxels = 3.0;
  EXPECT_EQ(test::error_of([&] { VSharp(bg, zero, box, big); }, ErrorCode::InvalidArgument),
            "vsharp: the smallest radius 3 mm (min_radius_voxels 3) erodes the mask to nothing: its deepest voxel lies "
            "3 mm inside; lower min_radius_voxels or give a larger mask");
  big.min_radius_voxels = 1.0;
  VSharp fits(bg, zero, box, big);
  EXPECT_EQ(fits.radii_mm(), (std::vector<double>{2.0, 1.0}));
  EXPECT_EQ(fits.total_steps(), 3u);
  run_to_end(fits);
  const LocalField line = fits.take_result();
  uint64_t left = 0;
  for (uint8_t b : line.mask) left += b;
  EXPECT_EQ(left, 105u);  // the mask eroded by 1 mm: 7×5×3 voxels

  VSharpParams p;
  p.threshold = 0.0;
  EXPECT_NE(test::error_of([&] { validate(p); }, ErrorCode::InvalidArgument).find("vsharp.threshold must be in (0, 1), got 0"),
            std::string::npos);
  p = {};
  p.min_radius_voxels = 0.5;
  EXPECT_NE(test::error_of([&] { validate(p); }, ErrorCode::InvalidArgument).find("vsharp.minRadius must be in [1, 64] voxels, got 0.5"),
            std::string::npos);
  p = {};
  p.max_radius_mm = 0.5;
  EXPECT_NE(test::error_of([&] { validate(p); }, ErrorCode::InvalidArgument).find("vsharp.maxRadius must be in [1, 100] mm, got 0.5"),
            std::string::npos);
  p = {};
  p.step_voxels = 0.01;
  EXPECT_NE(test::error_of([&] { vsharp_radii_mm({1.0, 1.0, 1.0}, p); }, ErrorCode::InvalidArgument).find("raise step_voxels"),
            std::string::npos);
  p = {};
  p.max_radius_mm = 3.0;  // below the smallest radius (2 voxels of 2 mm): that one radius
  p.min_radius_voxels = 2.0;
  EXPECT_EQ(vsharp_radii_mm({2.0, 2.0, 2.0}, p), (std::vector<double>{4.0}));
  EXPECT_EQ(vsharp_radii_mm({100.0, 100.0, 100.0}, VSharpParams{}), (std::vector<double>{200.0}));
  PdfParams q;
  q.max_iterations = 0;
  EXPECT_NE(test::error_of([&] { validate(q); }, ErrorCode::InvalidArgument).find("pdf.maxIterations must be a whole number in [1, 10000], got 0"),
            std::string::npos);
  q = {};
  q.tolerance = 2.0;
  EXPECT_NE(test::error_of([&] { validate(q); }, ErrorCode::InvalidArgument).find("tolerance must be in (0, 1)"),
            std::string::npos);

  // NaN inside the mask is refused; outside it is never read
  std::vector<float> f = s.total;
  size_t outside = 0;
  while (s.mask[outside]) ++outside;
  f[outside] = std::nanf("");
  EXPECT_NO_THROW(Pdf(s.g, f, s.mask, {}, quick_pdf()));
  size_t inside = 0;
  while (!s.mask[inside]) ++inside;
  f[inside] = std::nanf("");
  EXPECT_NE(test::error_of([&] { VSharp(s.g, f, s.mask); }, ErrorCode::NonFiniteInput).find("inside the mask"),
            std::string::npos);
  const std::vector<float> short_weights(10, 1.0f);
  EXPECT_NE(test::error_of([&] { Pdf(s.g, s.total, s.mask, short_weights); }, ErrorCode::InvalidArgument).find("pdf: weights hold 10 values"),
            std::string::npos);
}

TEST(Background, WorkspaceFitsAndGrows) {
  // A 256³ 1 mm head fits the wasm heap with the defaults; more radius or padding costs more.
  Geometry g = test::geometry(256, 256, 256);
  const uint64_t v = vsharp_workspace_bytes(g, {}), p = pdf_workspace_bytes(g, {});
  std::printf("workspace 256^3: V-SHARP %.0f MB, PDF %.0f MB\n", v / 1e6, p / 1e6);
  // at least the two complex volumes of the padded box (V-SHARP) / one complex and six float volumes (PDF)
  EXPECT_GT(v, 2ull * 8 * (256 + 36) * (256 + 36) * (256 + 36));
  EXPECT_GT(p, (8ull + 24) * (256 + 40) * (256 + 40) * (256 + 40));
  EXPECT_LT(v, 3'500'000'000ull);
  EXPECT_LT(p, 3'500'000'000ull);
  VSharpParams big;
  big.max_radius_mm = 60;
  PdfParams wide;
  wide.pad_voxels = 80;
  EXPECT_GT(vsharp_workspace_bytes(g, big), v);
  EXPECT_GT(pdf_workspace_bytes(g, wide), p);
}

}  // namespace
}  // namespace tessera
