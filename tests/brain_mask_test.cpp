#include "tessera/phase/brain_mask.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "support.h"
#include "tessera/common/error.h"

namespace {

using tessera::BrainMaskParams;
using tessera::ErrorCode;
using tessera::Geometry;
using tessera::test::error_of;
using tessera::test::Gaussian;

// (x/a)² + (y/b)² + (z/c)² in mm around the centre of the volume.
double ellipsoid(const Geometry& g, int64_t x, int64_t y, int64_t z, double a, double b, double c) {
  const double px = (x - (g.dims[0] - 1) / 2.0) * g.voxel_mm[0], py = (y - (g.dims[1] - 1) / 2.0) * g.voxel_mm[1],
               pz = (z - (g.dims[2] - 1) / 2.0) * g.voxel_mm[2];
  return px * px / (a * a) + py * py / (b * b) + pz * pz / (c * c);
}

// A synthetic head, magnitude in arbitrary units: an ellipsoid brain (1.0) with a dark hole (a ventricle, 0.05)
// inside, dark bone (0) around it, a bright scalp shell (1.6), a bright speck outside the head (1.0), Rician-like
// noise everywhere (|complex Gaussian|, σ = noise).
struct Head {
  Geometry g;
  std::vector<float> magnitude;
  std::vector<uint8_t> brain;  // the truth: the ellipsoid, hole included
  std::vector<uint8_t> hole;
};
Head make_head(double noise, uint64_t seed = 3) {
  Head h;
  h.g = tessera::test::geometry(64, 64, 48);
  h.g.voxel_mm = {3.0, 3.0, 3.0};
  const uint64_t n = h.g.voxel_count();
  h.magnitude.resize(n);
  h.brain.resize(n);
  h.hole.resize(n);
  Gaussian gauss{tessera::test::Rng(seed)};
  for (int64_t z = 0; z < 48; ++z)
    for (int64_t y = 0; y < 64; ++y)
      for (int64_t x = 0; x < 64; ++x) {
        const uint64_t i = h.g.index(x, y, z);
        double s = 0.0;
        const double brain = ellipsoid(h.g, x, y, z, 60, 70, 50);
        const double scalp_in = ellipsoid(h.g, x, y, z, 70, 80, 60);
        const double scalp_out = ellipsoid(h.g, x, y, z, 75, 85, 65);
        const double hole = ellipsoid(h.g, x + 3, y, z, 12, 12, 12);
        if (brain <= 1.0) s = 1.0;
        if (hole <= 1.0) s = 0.05;
        if (scalp_in > 1.0 && scalp_out <= 1.0) s = 1.6;
        const double sx = (x - 6) * 3.0, sy = (y - 6) * 3.0, sz = (z - 6) * 3.0;
        if (sx * sx + sy * sy + sz * sz <= 36.0) s = 1.0;  // the speck, radius 6 mm, in a corner
        h.brain[i] = brain <= 1.0;
        h.hole[i] = hole <= 1.0;
        const double re = s + noise * gauss.next(), im = noise * gauss.next();
        h.magnitude[i] = static_cast<float>(std::sqrt(re * re + im * im));
      }
  return h;
}

double dice(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  uint64_t both = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    both += a[i] && b[i];
    na += a[i] != 0;
    nb += b[i] != 0;
  }
  return 2.0 * double(both) / double(na + nb);
}

uint64_t count(const std::vector<uint8_t>& m) {
  uint64_t c = 0;
  for (uint8_t v : m) c += v != 0;
  return c;
}

}  // namespace

TEST(BrainMask, SyntheticHeadMatchesTheBrain) {
  const Head h = make_head(0.3);
  const auto t0 = std::chrono::steady_clock::now();
  const auto mask = tessera::brain_mask(h.g, h.magnitude);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double d = dice(mask, h.brain);
  std::printf("brain mask 64x64x48 at 3 mm, Otsu: Dice %.4f (%llu voxels, truth %llu), %.3f s\n", d,
              (unsigned long long)count(mask), (unsigned long long)count(h.brain), seconds);
  EXPECT_GE(d, 0.9);
  // the hole is filled, the scalp and the speck are gone
  uint64_t hole_missing = 0, outside_head = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    hole_missing += h.hole[i] && !mask[i];
    outside_head += mask[i] && !h.brain[i];
  }
  EXPECT_EQ(hole_missing, 0u);
  EXPECT_LT(outside_head, count(h.brain) / 50);
  EXPECT_EQ(mask[h.g.index(6, 6, 6)], 0);
  // one component
  std::vector<uint64_t> sizes;
  tessera::label_components(h.g, mask, &sizes);
  EXPECT_EQ(sizes.size(), 2u);
}

TEST(BrainMask, RobustRangeThresholdAlsoFindsTheBrain) {
  const Head h = make_head(0.05);
  BrainMaskParams p;
  p.threshold = tessera::MaskThreshold::RobustRange;
  p.robust_fraction = 0.3;
  const auto mask = tessera::brain_mask(h.g, h.magnitude, p);
  const double d = dice(mask, h.brain);
  std::printf("brain mask, robust range 0.3: Dice %.4f\n", d);
  EXPECT_GE(d, 0.9);
}

TEST(BrainMask, WithoutHoleFillingTheHoleStays) {
  const Head h = make_head(0.05);
  BrainMaskParams p;
  p.fill_holes = false;
  const auto mask = tessera::brain_mask(h.g, h.magnitude, p);
  uint64_t hole_inside = 0;
  for (size_t i = 0; i < mask.size(); ++i) hole_inside += h.hole[i] && mask[i];
  // the closing (4 mm) narrows the 12 mm hole but cannot fill it
  EXPECT_LT(hole_inside, count(h.hole) / 2);
}

TEST(BrainMask, ErosionRemovesExactlyTheVoxelsWithinTheRadius) {
  // A bright box 20×20×10 voxels at 1×1×2 mm in a dark volume: an erosion of 2.5 mm removes 2 voxels from each x
  // and y face and 1 from each z face (exact Euclidean distances in mm).
  Geometry g = tessera::test::geometry(40, 40, 20);
  g.voxel_mm = {1.0, 1.0, 2.0};
  const auto box = tessera::test::box_mask(g, {10, 10, 5}, {30, 30, 15});
  std::vector<float> magnitude(g.voxel_count());
  for (size_t i = 0; i < magnitude.size(); ++i) magnitude[i] = box[i] ? 1.0f : 0.0f;
  BrainMaskParams p;
  p.opening_radius_mm = 0.0;
  p.closing_radius_mm = 0.0;
  const auto whole = tessera::brain_mask(g, magnitude, p);
  EXPECT_EQ(std::memcmp(whole.data(), box.data(), box.size()), 0);
  p.erosion_mm = 2.5;
  const auto eroded = tessera::brain_mask(g, magnitude, p);
  const auto expected = tessera::test::box_mask(g, {12, 12, 6}, {28, 28, 14});
  EXPECT_EQ(std::memcmp(eroded.data(), expected.data(), expected.size()), 0);
  // at 1 mm voxels an opening of 1.5 mm takes exactly the box's 8 corners: erosion peels one voxel off each face,
  // dilation restores faces (1 mm) and edges (√2 mm) but not corners (√3 mm)
  g.voxel_mm = {1.0, 1.0, 1.0};
  p.erosion_mm = 0.0;
  p.opening_radius_mm = 1.5;
  const auto opened = tessera::brain_mask(g, magnitude, p);
  for (int64_t z = 0; z < 20; ++z)
    for (int64_t y = 0; y < 40; ++y)
      for (int64_t x = 0; x < 40; ++x) {
        const bool in = box[g.index(x, y, z)];
        const int faces = (x == 10 || x == 29) + (y == 10 || y == 29) + (z == 5 || z == 14);
        ASSERT_EQ(opened[g.index(x, y, z)] != 0, in && faces < 3) << x << "," << y << "," << z;
      }
}

TEST(BrainMask, BitIdenticalForAnyThreadCount) {
  const Head h = make_head(0.12, 9);
  BrainMaskParams p;
  p.erosion_mm = 3.0;
  const auto one = tessera::brain_mask(h.g, h.magnitude, p, 1);
  const auto three = tessera::brain_mask(h.g, h.magnitude, p, 3);
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size()), 0);
}

TEST(BrainMask, LabelsComponentsInOrder) {
  const Geometry g = tessera::test::geometry(10, 10, 10);
  const auto a = tessera::test::box_mask(g, {0, 0, 0}, {2, 2, 2});
  const auto b = tessera::test::box_mask(g, {5, 5, 5}, {10, 10, 10});
  std::vector<uint8_t> m(g.voxel_count());
  for (size_t i = 0; i < m.size(); ++i) m[i] = a[i] | b[i];
  m[g.index(3, 0, 0)] = 1;  // touches nothing: a third component
  std::vector<uint64_t> sizes;
  const auto labels = tessera::label_components(g, m, &sizes);
  ASSERT_EQ(sizes.size(), 4u);
  EXPECT_EQ(sizes[1], 8u);
  EXPECT_EQ(sizes[2], 1u);
  EXPECT_EQ(sizes[3], 125u);
  EXPECT_EQ(labels[g.index(1, 1, 1)], 1u);
  EXPECT_EQ(labels[g.index(3, 0, 0)], 2u);
  EXPECT_EQ(labels[g.index(9, 9, 9)], 3u);
  EXPECT_EQ(labels[g.index(4, 4, 4)], 0u);
}

TEST(BrainMask, RefusesBadInputAndParameters) {
  const Geometry g = tessera::test::geometry(8, 8, 8);
  const std::vector<float> flat(g.voxel_count(), 0.0f);
  std::string m = error_of([&] { tessera::brain_mask(g, std::vector<float>(7, 1.0f)); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("magnitude holds 7 values"), std::string::npos) << m;
  m = error_of([&] { tessera::brain_mask(g, flat); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("no voxel is left above the threshold"), std::string::npos) << m;
  std::vector<float> bad(g.voxel_count(), 1.0f);
  bad[5] = std::nanf("");
  m = error_of([&] { tessera::brain_mask(g, bad); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("NaN or Inf at index 5"), std::string::npos) << m;
  BrainMaskParams p;
  p.closing_radius_mm = -1.0;
  m = error_of([&] { tessera::validate(p); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("closing_radius_mm must be in [0, 100] mm, got -1"), std::string::npos) << m;
  p = {};
  p.robust_fraction = 1.5;
  m = error_of([&] { tessera::validate(p); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("robust_fraction must be in (0, 1)"), std::string::npos) << m;
  // The erosion is the schema's brainMask.erosion: refused outside [0, 100] mm by that name.
  for (double bad : {-0.5, 100.5, std::nan("")}) {
    p = {};
    p.erosion_mm = bad;
    m = error_of([&] { tessera::validate(p); }, ErrorCode::InvalidArgument);
    EXPECT_NE(m.find("brainMask.erosion must be in [0, 100] mm, got "), std::string::npos) << m;
  }
  p = {};
  p.erosion_mm = 100.0;
  EXPECT_NO_THROW(tessera::validate(p));
  p = {};
  p.histogram_bins = 2;
  m = error_of([&] { tessera::brain_mask_workspace_bytes(g, p); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("histogram_bins"), std::string::npos) << m;
}

TEST(BrainMask, WorkspaceBytes) {
  const Geometry g = tessera::test::geometry(64, 64, 48);
  EXPECT_GE(tessera::brain_mask_workspace_bytes(g, {}), 28 * g.voxel_count());
  // 64-bit arithmetic on wasm32: a volume that wasm can address but whose workspace passes 4 GiB
  const Geometry big = tessera::test::geometry(640, 640, 512);
  EXPECT_GT(tessera::brain_mask_workspace_bytes(big, {}), 28 * big.voxel_count());
  EXPECT_GT(28 * big.voxel_count(), uint64_t{4} << 30);
}
