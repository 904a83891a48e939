#include "tessera/engine/blend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "engine/step_run.h"
#include "support.h"
#include "tessera/common/error.h"
#include "tessera/engine/plan.h"

using namespace tessera;
using namespace tessera::test;

namespace {

FieldNetwork plain(uint32_t divisor) { return FieldNetwork{TileCost{divisor, 1100}, Normalization{}, PadRule::SmallerHalfLow}; }

// Every tile's network output for a grid: a function of the tile and the volume position, so overlapping tiles
// disagree (as truncated context makes them) and the blend has something to average.
std::vector<float> tile_output(const Tile& t, const std::array<uint64_t, 3>& dims, uint64_t seed) {
  std::vector<float> out(dims[0] * dims[1] * dims[2]);
  Rng rng(seed * 1000003 + t.index);
  for (float& v : out) v = rng.uniform();
  return out;
}

// Writes the grid's active tiles in the given order.
std::vector<float> blend_in_order(const Geometry& g, const std::vector<uint8_t>& mask, const TileGrid& grid,
                                  const std::vector<const Tile*>& order, uint64_t seed) {
  std::vector<float> chi(g.voxel_count(), 5.0f);
  TileWriter w(g, mask, grid, Normalization{}, chi);
  const uint64_t e = grid.patch_edge;
  for (const Tile* t : order) {
    EXPECT_FALSE(w.complete());
    const std::array<uint64_t, 3> dims = tile_patch_dims(*t, {e, e, e});
    w.write(*t, dims, tile_output(*t, dims, seed));
  }
  EXPECT_TRUE(w.complete());
  return chi;
}

}  // namespace

TEST(Blend, ProfilesArePositiveSymmetricAndShaped) {
  for (Blend b : {Blend::Crop, Blend::Linear, Blend::Cosine, Blend::Gaussian}) {
    for (uint32_t n : {1u, 2u, 7u, 56u}) {
      const std::vector<double> p = blend_profile(b, n);
      ASSERT_EQ(p.size(), n);
      for (uint32_t i = 0; i < n; ++i) {
        EXPECT_GT(p[i], 0.0) << blend_name(b) << " " << n << " " << i;
        EXPECT_NEAR(p[i], p[n - 1 - i], 1e-12);
      }
    }
  }
  const std::vector<double> crop = blend_profile(Blend::Crop, 8);
  EXPECT_EQ(crop, std::vector<double>(8, 1.0));
  const std::vector<double> lin = blend_profile(Blend::Linear, 8);
  EXPECT_DOUBLE_EQ(lin[0], 0.125);  // 1 - |2·(0.5/8) - 1|
  EXPECT_DOUBLE_EQ(lin[3], 0.875);
  const std::vector<double> cosine = blend_profile(Blend::Cosine, 4);
  EXPECT_NEAR(cosine[0], std::pow(std::sin(M_PI / 8), 2), 1e-15);
  const std::vector<double> gauss = blend_profile(Blend::Gaussian, 64);  // σ = 8
  EXPECT_NEAR(gauss[31] / gauss[39], std::exp(0.5 * ((39.5 - 32) * (39.5 - 32) - 0.25) / 64.0), 1e-12);
  EXPECT_THROW(blend_profile(Blend::Cosine, 0), Error);
  EXPECT_EQ(blend_from_name("gaussian"), Blend::Gaussian);
  try {
    blend_from_name("hann");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("crop, linear, cosine or gaussian"), std::string::npos);
  }
}

TEST(Blend, StrideShorterThanTheCoreOverlapsWindowsThatCoverTheVolume) {
  const Geometry g = geometry(100, 57, 56);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const TileGrid grid = make_tile_grid(g, mask, TileConfig{56, 4, 28, Blend::Cosine}, 8);
  EXPECT_EQ(grid.counts, (std::array<uint64_t, 3>{3, 2, 1}));  // 1 + ceil((dim - 56) / 28)
  EXPECT_EQ(grid.patch_edge, 64u);
  for (const Tile& t : grid.tiles) {
    for (int a = 0; a < 3; ++a) {
      EXPECT_EQ(t.core_lo[a] % 28, 0);
      EXPECT_EQ(t.patch_lo[a], t.core_lo[a] - 4);
      EXPECT_EQ(t.core_hi[a], std::min<int64_t>(t.core_lo[a] + 56, g.dims[a]));
    }
  }
  const auto sums = blend_weight_sums(g, grid);
  for (int a = 0; a < 3; ++a)
    for (double s : sums[a]) EXPECT_GT(s, 0.0);
  // Without overlap every crop sum is 1.
  const auto crop = blend_weight_sums(g, make_tile_grid(g, mask, TileConfig{20, 2}, 1));
  for (int a = 0; a < 3; ++a)
    for (double s : crop[a]) EXPECT_EQ(s, 1.0);
  EXPECT_THROW(make_tile_grid(g, mask, TileConfig{20, 2, 21, Blend::Linear}, 1), Error);
}

TEST(Blend, WeightsSumToOneSoAgreeingTilesGiveTheirValue) {
  // When every tile gives the same value at a voxel (a network that sees enough context), any blend returns it.
  const Geometry g = geometry(45, 38, 30);
  const std::vector<float> field = random_field(g, 4);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.95);
  for (Blend b : {Blend::Crop, Blend::Linear, Blend::Cosine, Blend::Gaussian}) {
    const TilePlan plan = plan_tiled(g, mask, plain(1), TileConfig{16, 2, 6, b}, 1, Target::Native);
    ASSERT_TRUE(plan.feasible);
    std::vector<float> chi(g.voxel_count());
    StepRun run(g, field, mask, plain(1), plan, 1, chi);
    IdentityRunner id;
    while (!run.finished()) {
      std::vector<float> in(run.input_shape().size());
      const auto p = run.next(in);
      if (!p) break;
      // A shrunk patch comes in the run's own buffer, with its shape.
      run.finish(p->job, p->input.empty() ? id.run(in, run.input_shape()) : id.run(p->input, p->shape));
    }
    run.report();
    for (uint64_t i = 0; i < chi.size(); ++i) {
      ASSERT_NEAR(chi[i], mask[i] ? field[i] : 0.0f, 2e-7) << blend_name(b) << " voxel " << i;
    }
  }
}

TEST(Blend, BitIdenticalInAnyOrderAndFromSeveralThreads) {
  const Geometry g = geometry(50, 41, 33);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.6);
  for (Blend b : {Blend::Crop, Blend::Linear, Blend::Gaussian}) {
    const TileGrid grid = make_tile_grid(g, mask, TileConfig{14, 3, 7, b}, 2);
    std::vector<const Tile*> order = active_tiles(grid);
    ASSERT_GT(grid.skipped, 0u);
    const std::vector<float> first = blend_in_order(g, mask, grid, order, 9);
    std::mt19937 rng(1);
    for (int k = 0; k < 3; ++k) {
      std::shuffle(order.begin(), order.end(), rng);
      const std::vector<float> again = blend_in_order(g, mask, grid, order, 9);
      ASSERT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)), 0) << blend_name(b) << " order " << k;
    }
    // Four threads writing at once.
    std::vector<float> chi(g.voxel_count());
    TileWriter w(g, mask, grid, Normalization{}, chi);
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t) {
      pool.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < order.size();) {
          const uint64_t e = grid.patch_edge;
          const std::array<uint64_t, 3> dims = tile_patch_dims(*order[i], {e, e, e});
          w.write(*order[i], dims, tile_output(*order[i], dims, 9));
        }
      });
    }
    for (auto& t : pool) t.join();
    EXPECT_EQ(std::memcmp(first.data(), chi.data(), chi.size() * sizeof(float)), 0) << blend_name(b) << " threads";
    // The blend is a weighted mean: inside the range of the tiles' values (here [-1, 1)), 0 outside the mask.
    for (uint64_t i = 0; i < chi.size(); ++i) {
      if (!mask[i]) ASSERT_EQ(chi[i], 0.0f);
      ASSERT_LE(std::abs(chi[i]), 1.0f);
    }
  }
}

TEST(Blend, EqualsTheWeightedMeanOfTheTilesCoveringAVoxel) {
  const Geometry g = geometry(30, 9, 9);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const TileGrid grid = make_tile_grid(g, mask, TileConfig{12, 1, 5, Blend::Linear}, 1);
  const std::vector<float> chi = blend_in_order(g, mask, grid, active_tiles(grid), 3);
  const std::vector<double> p = blend_profile(Blend::Linear, 12);
  const uint64_t e = grid.patch_edge;
  for (int64_t x : {0, 4, 5, 11, 13, 29}) {
    const Dims3 v{x, 4, 6};
    double num = 0, den = 0;
    for (const Tile& t : grid.tiles) {
      bool in = true;
      for (int a = 0; a < 3; ++a) in = in && v[a] >= t.core_lo[a] && v[a] < t.core_hi[a];
      if (!in) continue;
      double w = 1;
      for (int a = 0; a < 3; ++a) w *= p[static_cast<size_t>(v[a] - t.core_lo[a])];
      const std::array<uint64_t, 3> dims = tile_patch_dims(t, {e, e, e});
      const std::vector<float> out = tile_output(t, dims, 3);
      const uint64_t px = static_cast<uint64_t>(v[0] - t.patch_lo[0]), py = static_cast<uint64_t>(v[1] - t.patch_lo[1]),
                     pz = static_cast<uint64_t>(v[2] - t.patch_lo[2]);
      num += w * out[(px * dims[1] + py) * dims[2] + pz];
      den += w;
    }
    EXPECT_NEAR(chi[g.index(v[0], v[1], v[2])], num / den, 1e-6) << "x " << x;
  }
}

TEST(Blend, ANonFiniteOutputFailsTheTileWithoutWritingIt) {
  const Geometry g = geometry(20, 20, 20);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const TileGrid grid = make_tile_grid(g, mask, TileConfig{10, 2, 5, Blend::Cosine}, 1);
  std::vector<float> chi(g.voxel_count());
  TileWriter w(g, mask, grid, Normalization{}, chi);
  const uint64_t e = grid.patch_edge;
  std::vector<float> bad(e * e * e, 0.25f);
  bad[(5 * e + 5) * e + 5] = NAN;
  try {
    w.write(grid.tiles[1], {e, e, e}, bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::RunnerFailed);
    EXPECT_NE(std::string(e.what()).find("tile 1 (core x 5-15"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos);
  }
  EXPECT_FALSE(w.complete());
}

TEST(Blend, ThePlanCountsTheAccumulator) {
  // Large enough that both plans are above the module's initial memory (which no plan goes under).
  const Geometry g = geometry(128, 128, 128);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const TilePlan crop = plan_tiled(g, mask, plain(8), TileConfig{24, 4}, 1, Target::Wasm);
  const TilePlan blended = plan_tiled(g, mask, plain(8), TileConfig{24, 4, 12, Blend::Cosine}, 1, Target::Wasm);
  ASSERT_TRUE(crop.feasible && blended.feasible);
  EXPECT_GE(blended.module_heap_bytes - crop.module_heap_bytes, g.voxel_count() * 8);
  EXPECT_EQ(TileWriter::extra_bytes(g, TileConfig{24, 4}), 0u);
  EXPECT_GT(blended.tiles_total, crop.tiles_total);
}
