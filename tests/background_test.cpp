#include "tessera/background.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "support.h"
#include "tessera/dipole.h"
#include "tessera/phantom.h"

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

TEST(Background, VSharpRemovesTheBackground) {
  const Scene& s = scene();
  const auto t0 = std::chrono::steady_clock::now();
  const LocalField out = vsharp(s.g, s.total, s.mask);
  const double t = seconds_since(t0);
  const double err = distance(out.field, s.local, out.mask);
  const double before = distance(s.total, s.local, out.mask);
  const double nrmse = err / norm(s.local, out.mask);
  std::printf("V-SHARP defaults: %.2f s, NRMSE vs true local %.3f, background removed %.4f\n", t, nrmse, 1.0 - err / before);
  EXPECT_GT(1.0 - err / before, 0.95);
  EXPECT_LT(nrmse, 0.5);
}

TEST(Background, PdfRemovesTheBackground) {
  const Scene& s = scene();
  const auto t0 = std::chrono::steady_clock::now();
  Pdf solver(s.g, s.total, s.mask);
  run_to_end(solver);
  const double t = seconds_since(t0);
  const uint32_t iterations = solver.steps_done();
  const double residual = solver.relative_residual();
  const LocalField out = solver.take_result();
  const double err = distance(out.field, s.local, out.mask);
  const double before = distance(s.total, s.local, out.mask);
  const double nrmse = err / norm(s.local, out.mask);
  std::printf("PDF defaults: %.2f s, %u iterations, residual %.2e, NRMSE vs true local %.3f, background removed %.4f\n",
              t, iterations, residual, nrmse, 1.0 - err / before);
  EXPECT_EQ(out.mask, std::vector<uint8_t>(s.mask.begin(), s.mask.end()));
  EXPECT_GT(1.0 - err / before, 0.95);
  EXPECT_LT(nrmse, 0.5);
}

}  // namespace
}  // namespace tessera
