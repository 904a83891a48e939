#include "tessera/phase/unwrap.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "support.h"
#include "tessera/common/error.h"

namespace {

using tessera::ErrorCode;
using tessera::Geometry;
using tessera::test::error_of;

using tessera::test::kTwoPi;

// A smooth phase (rad) spanning several 2π: three Gaussians and a ramp; its steepest step between neighbours is
// below π (checked by max_step).
std::vector<float> smooth_phase(const Geometry& g) {
  struct Blob {
    double cx, cy, cz, sigma, amplitude;
  };
  const Blob blobs[] = {{24, 30, 20, 9, 22.0}, {42, 36, 28, 8, -16.0}, {30, 20, 30, 11, 12.0}};
  std::vector<float> phase(g.voxel_count());
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        double v = 0.25 * (x - 32.0) - 0.1 * (z - 24.0);
        for (const Blob& b : blobs) {
          const double r2 = (x - b.cx) * (x - b.cx) + (y - b.cy) * (y - b.cy) + (z - b.cz) * (z - b.cz);
          v += b.amplitude * std::exp(-r2 / (2.0 * b.sigma * b.sigma));
        }
        phase[g.index(x, y, z)] = static_cast<float>(v);
      }
  return phase;
}

double max_step(const Geometry& g, const std::vector<float>& phase) {
  double worst = 0.0;
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const float v = phase[g.index(x, y, z)];
        if (x + 1 < g.dims[0]) worst = std::max(worst, std::fabs(double(phase[g.index(x + 1, y, z)]) - v));
        if (y + 1 < g.dims[1]) worst = std::max(worst, std::fabs(double(phase[g.index(x, y + 1, z)]) - v));
        if (z + 1 < g.dims[2]) worst = std::max(worst, std::fabs(double(phase[g.index(x, y, z + 1)]) - v));
      }
  return worst;
}

std::vector<float> wrap(const std::vector<float>& phase) {
  std::vector<float> w(phase.size());
  for (size_t i = 0; i < phase.size(); ++i) w[i] = static_cast<float>(std::remainder(double(phase[i]), kTwoPi));
  return w;
}

Geometry test_geometry() {
  Geometry g = tessera::test::geometry(64, 64, 48);
  g.voxel_mm = {1.0, 1.5, 2.0};
  return g;
}

// Counts of mask voxels where result − truth is within tol of the global 2π·k of the first mask voxel, and the k.
struct Exactness {
  uint64_t exact = 0, inside = 0;
  long k = 0;
};
Exactness exactness(const std::vector<float>& result, const std::vector<float>& truth, const std::vector<uint8_t>& mask,
                    double tol = 1e-3) {
  Exactness e;
  bool first = true;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) continue;
    const double diff = double(result[i]) - truth[i];
    if (first) e.k = std::lround(diff / kTwoPi), first = false;
    ++e.inside;
    if (std::fabs(diff - kTwoPi * double(e.k)) < tol) ++e.exact;
  }
  return e;
}

// Every value of the result is the wrapped input plus a multiple of 2π (inside the mask), 0 outside.
void expect_congruent(const std::vector<float>& result, const std::vector<float>& wrapped,
                      const std::vector<uint8_t>& mask) {
  uint64_t bad = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) {
      bad += result[i] != 0.0f;
      continue;
    }
    const double k = (double(result[i]) - wrapped[i]) / kTwoPi;
    bad += std::fabs(k - std::nearbyint(k)) > 1e-4;
  }
  EXPECT_EQ(bad, 0u);
}

}  // namespace

TEST(Unwrap, TestFieldSpansSeveralTurnsWithStepsBelowPi) {
  const Geometry g = test_geometry();
  const auto truth = smooth_phase(g);
  const auto [lo, hi] = std::minmax_element(truth.begin(), truth.end());
  EXPECT_GT(*hi - *lo, 4 * kTwoPi);
  EXPECT_LT(max_step(g, truth), 0.8 * std::numbers::pi);
}

TEST(Unwrap, RegionGrowingIsExactUpToOneGlobalTurn) {
  const Geometry g = test_geometry();
  const auto truth = smooth_phase(g);
  const auto wrapped = wrap(truth);
  const auto mask = tessera::test::ellipsoid_mask(g, 0.9);
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = tessera::unwrap_region_growing(g, wrapped, {}, mask);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Exactness e = exactness(result, truth, mask);
  EXPECT_EQ(e.exact, e.inside);
  expect_congruent(result, wrapped, mask);
  // a magnitude changes the order of growth, not the result
  std::vector<float> magnitude(g.voxel_count());
  for (size_t i = 0; i < magnitude.size(); ++i) magnitude[i] = 0.5f + 0.5f * std::cos(0.05f * float(i % 977));
  const auto with_magnitude = tessera::unwrap_region_growing(g, wrapped, magnitude, mask);
  const Exactness em = exactness(with_magnitude, truth, mask);
  EXPECT_EQ(em.exact, em.inside);
  std::printf("region growing 64x64x48: %llu of %llu exact, %.3f s\n", (unsigned long long)e.exact,
              (unsigned long long)e.inside, seconds);
}

TEST(Unwrap, RegionGrowingUnwrapsEachComponentFromItsOwnSeed) {
  const Geometry g = test_geometry();
  const auto truth = smooth_phase(g);
  const auto wrapped = wrap(truth);
  const auto a = tessera::test::box_mask(g, {4, 4, 4}, {28, 60, 44});
  const auto b = tessera::test::box_mask(g, {34, 4, 4}, {60, 60, 44});
  std::vector<uint8_t> both(g.voxel_count());
  for (size_t i = 0; i < both.size(); ++i) both[i] = a[i] | b[i];
  const auto result = tessera::unwrap_region_growing(g, wrapped, {}, both);
  const Exactness ea = exactness(result, truth, a), eb = exactness(result, truth, b);
  EXPECT_EQ(ea.exact, ea.inside);
  EXPECT_EQ(eb.exact, eb.inside);
  expect_congruent(result, wrapped, both);
}

TEST(Unwrap, RegionGrowingIsBitIdenticalForAnyThreadCount) {
  const Geometry g = test_geometry();
  const auto wrapped = wrap(smooth_phase(g));
  const auto mask = tessera::test::ellipsoid_mask(g, 0.9);
  const auto magnitude = tessera::test::random_field(g, 5);
  const auto one = tessera::unwrap_region_growing(g, wrapped, magnitude, mask, 1);
  const auto three = tessera::unwrap_region_growing(g, wrapped, magnitude, mask, 3);
  ASSERT_EQ(one.size(), three.size());
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
}

TEST(Unwrap, LaplacianIsExactOnASmoothField) {
  const Geometry g = test_geometry();
  const auto truth = smooth_phase(g);
  const auto wrapped = wrap(truth);
  const auto mask = tessera::test::ellipsoid_mask(g, 0.9);
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = tessera::unwrap_laplacian(g, wrapped, mask);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expect_congruent(result, wrapped, mask);
  const Exactness e = exactness(result, truth, mask);
  std::printf("laplacian 64x64x48, smooth everywhere: %llu of %llu exact (%.4f), %.3f s\n",
              (unsigned long long)e.exact, (unsigned long long)e.inside, double(e.exact) / double(e.inside), seconds);
  EXPECT_EQ(e.exact, e.inside);
}

TEST(Unwrap, LaplacianWithNoiseOutsideTheMask) {
  // Outside a brain the phase is noise: the Laplacian there is meaningless, yet the result inside stays congruent
  // and exact away from the boundary.
  const Geometry g = test_geometry();
  const auto truth = smooth_phase(g);
  auto wrapped = wrap(truth);
  const auto mask = tessera::test::ellipsoid_mask(g, 0.8);
  const auto noise = tessera::test::random_field(g, 11);
  for (size_t i = 0; i < wrapped.size(); ++i)
    if (!mask[i]) wrapped[i] = static_cast<float>(std::numbers::pi) * noise[i];
  const auto result = tessera::unwrap_laplacian(g, wrapped, mask);
  expect_congruent(result, wrapped, mask);
  const Exactness e = exactness(result, truth, mask);
  // the same count, allowing the global 2π·k to be set by the most frequent one
  std::vector<uint64_t> per_k(64, 0);
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) ++per_k[static_cast<size_t>(32 + std::lround((double(result[i]) - truth[i]) / kTwoPi))];
  const uint64_t best = *std::max_element(per_k.begin(), per_k.end());
  std::printf("laplacian with noise outside the mask: %llu of %llu exact (%.4f)\n", (unsigned long long)best,
              (unsigned long long)e.inside, double(best) / double(e.inside));
  EXPECT_GT(double(best) / double(e.inside), 0.99);
}

TEST(Unwrap, LaplacianIsBitIdenticalForAnyThreadCount) {
  const Geometry g = test_geometry();
  const auto wrapped = wrap(smooth_phase(g));
  const auto mask = tessera::test::ellipsoid_mask(g, 0.9);
  const auto one = tessera::unwrap_laplacian(g, wrapped, mask, 1);
  const auto three = tessera::unwrap_laplacian(g, wrapped, mask, 3);
  ASSERT_EQ(one.size(), three.size());
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
}

TEST(Unwrap, SingleVoxelThickVolumes) {
  // A 2D slice (nz = 1) unwraps like any other volume.
  const Geometry g = tessera::test::geometry(64, 64, 1);
  std::vector<float> truth(g.voxel_count());
  for (int64_t y = 0; y < 64; ++y)
    for (int64_t x = 0; x < 64; ++x) truth[g.index(x, y, 0)] = static_cast<float>(0.4 * x + 0.3 * y - 20.0);
  const auto wrapped = wrap(truth);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const Exactness l = exactness(tessera::unwrap_laplacian(g, wrapped, mask), truth, mask);
  const Exactness r = exactness(tessera::unwrap_region_growing(g, wrapped, {}, mask), truth, mask);
  EXPECT_EQ(l.exact, l.inside);
  EXPECT_EQ(r.exact, r.inside);
}

TEST(Unwrap, RefusesAPhaseThatIsNotWrappedRadians) {
  const Geometry g = tessera::test::geometry(8, 8, 8);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  std::vector<float> phase(g.voxel_count());
  auto message = [&](bool laplacian) {
    return error_of(
        [&] {
          if (laplacian) tessera::unwrap_laplacian(g, phase, mask);
          else tessera::unwrap_region_growing(g, phase, {}, mask);
        },
        ErrorCode::InvalidArgument);
  };
  for (size_t i = 0; i < phase.size(); ++i) phase[i] = float(i % 4096);  // raw 12-bit scanner values
  std::string m = message(true);
  EXPECT_NE(m.find("spans 0 to 511"), std::string::npos) << m;
  EXPECT_NE(m.find("raw scanner units"), std::string::npos) << m;
  for (size_t i = 0; i < phase.size(); ++i) phase[i] = -31.0f + 59.0f * float(i) / float(phase.size() - 1);
  m = message(false);
  EXPECT_NE(m.find("spans -31 to 28"), std::string::npos) << m;
  EXPECT_NE(m.find("already unwrapped"), std::string::npos) << m;
  for (size_t i = 0; i < phase.size(); ++i) phase[i] = -180.0f + 360.0f * float(i) / float(phase.size());
  m = message(true);
  EXPECT_NE(m.find("degrees"), std::string::npos) << m;
  for (size_t i = 0; i < phase.size(); ++i) phase[i] = 6.28f * float(i) / float(phase.size());
  m = message(false);
  EXPECT_NE(m.find("[0, 2π)"), std::string::npos) << m;
  phase.assign(phase.size(), 0.5f);
  phase[77] = std::nanf("");
  m = message(true);
  EXPECT_NE(m.find("NaN"), std::string::npos) << m;
  EXPECT_NE(m.find("index 77"), std::string::npos) << m;
  // the edges of the range pass: float(π) is a hair above π
  phase.assign(phase.size(), static_cast<float>(std::numbers::pi));
  phase[0] = -static_cast<float>(std::numbers::pi);
  EXPECT_NO_THROW(tessera::unwrap_laplacian(g, phase, mask));
}

TEST(Unwrap, RefusesMismatchedSizesAndAnEmptyMask) {
  const Geometry g = tessera::test::geometry(8, 8, 8);
  const std::vector<float> phase(g.voxel_count(), 0.1f);
  const std::vector<uint8_t> mask(g.voxel_count(), 1), empty(g.voxel_count(), 0), short_mask(10, 1);
  std::string m = error_of([&] { tessera::unwrap_laplacian(g, phase, short_mask); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("mask holds 10 values"), std::string::npos) << m;
  m = error_of([&] { tessera::unwrap_region_growing(g, phase, std::vector<float>(5, 1.0f), mask); },
               ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("magnitude holds 5 values"), std::string::npos) << m;
  m = error_of([&] { tessera::unwrap_region_growing(g, phase, {}, empty); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("holds no voxel"), std::string::npos) << m;
}

TEST(Unwrap, WorkspaceBytesCountTheBuffers) {
  const Geometry g = test_geometry();
  const uint64_t n = g.voxel_count();
  // the mirrored complex volume alone is 8·N·8 bytes
  EXPECT_GE(tessera::unwrap_laplacian_workspace_bytes(g, 1), 64 * n + 4 * n);
  // weights 3, visited 1, seeds 8, result 4; the bucket queue: one pending item (8 bytes) per voxel in doubling vectors
  EXPECT_GE(tessera::unwrap_region_growing_workspace_bytes(g), 32 * n);
  // 64-bit arithmetic on wasm32: a volume that wasm can address but whose workspace passes 4 GiB
  const Geometry big = tessera::test::geometry(640, 640, 512);
  EXPECT_GT(tessera::unwrap_laplacian_workspace_bytes(big, 1), 64 * big.voxel_count());
  EXPECT_GT(tessera::unwrap_region_growing_workspace_bytes(big), uint64_t{4} << 30);
}
