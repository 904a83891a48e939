#include "tessera/engine/driver.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <thread>

#include "support.h"
#include "tessera/common/error.h"
#include "tessera/networks/inversion.h"
#include "tessera/networks/physics_loops.h"
#include "tessera/registry/registry.h"
#include "tessera/engine/tiling.h"

using namespace tessera;
using namespace tessera::test;
using namespace std::chrono_literals;

namespace {

FieldNetwork plain_network(uint32_t divisor, uint64_t bpv = 1100) {
  return FieldNetwork{TileCost{divisor, bpv}, Normalization{}, PadRule::SmallerHalfLow};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// out = scale · in; safe on several threads at once.
class ScaledRunner : public PatchRunner {
 public:
  explicit ScaledRunner(float scale) : scale_(scale) {}
  std::vector<float> run(std::span<const float> input, const TensorShape&) override {
    std::vector<float> out(input.begin(), input.end());
    for (float& v : out) v *= scale_;
    return out;
  }

 private:
  float scale_;
};

// One value short.
class WrongLengthRunner : public PatchRunner {
 public:
  std::vector<float> run(std::span<const float> input, const TensorShape&) override {
    return std::vector<float>(input.size() - 1, 0.0f);
  }
};

}  // namespace

TEST(Driver, IdentityReproducesFieldOnOddNonCubicAndTinyVolumes) {
  struct Case { Dims3 dims; TileConfig cfg; uint32_t divisor; uint32_t threads; };
  const Case cases[] = {
      {{1, 1, 1}, {56, 4}, 8, 1},  {{3, 5, 7}, {2, 1}, 1, 2},   {{17, 9, 4}, {5, 2}, 8, 3},
      {{33, 20, 11}, {8, 4}, 16, 4}, {{2, 1, 9}, {1, 0}, 1, 2}, {{31, 31, 31}, {10, 3}, 8, 8},
  };
  for (const Case& c : cases) {
    const Geometry g = geometry(c.dims[0], c.dims[1], c.dims[2]);
    const std::vector<float> field = random_field(g, 11);
    const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.95);
    std::vector<float> chi(g.voxel_count(), 123.0f);
    IdentityRunner net;
    const RunReport r = tiled_field_inversion(g, field, mask, plain_network(c.divisor), c.cfg, net, threads(c.threads), chi);
    for (uint64_t i = 0; i < g.voxel_count(); ++i) {
      ASSERT_EQ(chi[i], mask[i] ? field[i] : 0.0f) << "voxel " << i << " of " << c.dims[0] << "×" << c.dims[1] << "×" << c.dims[2];
    }
    EXPECT_EQ(r.tiles_run + r.tiles_skipped, r.tiles_total);
    EXPECT_EQ(static_cast<uint64_t>(net.calls.load()), r.tiles_run);
  }
}

TEST(Driver, ConvTiledEqualsWholeWhenHaloCoversReceptiveField) {
  const Geometry g = geometry(23, 19, 14);
  const std::vector<float> field = random_field(g, 3);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 1.2);
  const int radius = 2;
  ReferenceConvRunner net(radius);
  std::vector<float> whole(g.voxel_count()), tiled(g.voxel_count());
  whole_volume_inversion(g, field, mask, plain_network(1), net, threads(1), whole);
  tiled_field_inversion(g, field, mask, plain_network(1), {6, radius}, net, threads(2), tiled);
  EXPECT_EQ(std::memcmp(whole.data(), tiled.data(), whole.size() * sizeof(float)), 0) << "halo >= r must be exact";

  // Halo below the receptive radius: the tile boundaries show.
  tiled_field_inversion(g, field, mask, plain_network(1), {6, radius - 1}, net, threads(2), tiled);
  uint64_t differing = 0;
  for (uint64_t i = 0; i < whole.size(); ++i) differing += whole[i] != tiled[i];
  EXPECT_GT(differing, 100u);
}

TEST(Driver, ConcurrencyCapHoldsUnderTheWasmBudget) {
  const Geometry g = geometry(40, 40, 40);
  const std::vector<float> field = random_field(g, 1);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  // patch 16³ at 122 070 B/voxel = 0.5 GB: the 1.5 GB budget allows 3 in flight, whatever the pool.
  const TileConfig cfg{10, 3};
  const FieldNetwork net = plain_network(1, 122070);
  ASSERT_EQ(tiles_within_wasm_budget(cfg, net.cost), 3u);
  InstrumentedRunner runner(15ms);
  std::vector<float> chi(g.voxel_count());
  RunOptions o = threads(8);
  o.target = Target::Wasm;
  const RunReport r = tiled_field_inversion(g, field, mask, net, cfg, runner, o, chi);
  EXPECT_EQ(r.concurrency, 3u);
  EXPECT_LE(runner.max_in_flight.load(), 3);
  EXPECT_EQ(runner.max_in_flight.load(), 3) << "the cap should also be reached with 64 tiles";
  EXPECT_LE(r.max_in_flight, 3u);
  EXPECT_EQ(r.tiles_run, 64u);

  // Natively the pool size is the cap.
  InstrumentedRunner native(10ms);
  o.target = Target::Native;
  o.threads = 4;
  const RunReport rn = tiled_field_inversion(g, field, mask, net, cfg, native, o, chi);
  EXPECT_EQ(rn.concurrency, 4u);
  EXPECT_LE(native.max_in_flight.load(), 4);
}

TEST(Driver, FreedSlotStartsTheNextTileWithoutAWaveBarrier) {
  // Tile 0 is slow: it waits until every other tile has finished on the second slot. With a wave
  // barrier (start 2, wait for both, start 2 ...) this could never finish.
  std::atomic<int> others_done{0};
  std::atomic<bool> gave_up{false};
  std::atomic<int> order{0};
  LambdaRunner slow_first([&](int, std::span<const float> in, const TensorShape&) {
    if (order.fetch_add(1) == 0) {
      const auto deadline = std::chrono::steady_clock::now() + 5s;
      while (others_done.load() < 8 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
      if (others_done.load() < 8) gave_up = true;
    } else {
      others_done.fetch_add(1);
    }
    return std::vector<float>(in.begin(), in.end());
  });
  // 9 tiles (3×3×1 of core 10); 2 slots.
  const Geometry g2 = geometry(30, 30, 10);
  const std::vector<float> f2 = random_field(g2, 5);
  const std::vector<uint8_t> m2(g2.voxel_count(), 1);
  std::vector<float> c2(g2.voxel_count());
  RunOptions o = threads(2);
  o.target = Target::Native;
  const RunReport r = tiled_field_inversion(g2, f2, m2, plain_network(1), {10, 1}, slow_first, o, c2);
  EXPECT_FALSE(gave_up.load()) << "the other slot did not keep starting tiles while tile 0 ran";
  EXPECT_EQ(r.tiles_run, 9u);
  EXPECT_EQ(r.max_in_flight, 2u);
}

TEST(Driver, ProgressStartsAtZeroIsInOrderAndComesFromTheDriverThread) {
  const Geometry g = geometry(24, 24, 24);
  const std::vector<float> field = random_field(g, 4);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  InstrumentedRunner net(2ms);
  std::vector<std::pair<uint64_t, uint64_t>> seen;
  std::set<std::thread::id> callers;
  RunOptions o = threads(3);
  o.progress = [&](uint64_t done, uint64_t total) {
    seen.emplace_back(done, total);
    callers.insert(std::this_thread::get_id());
  };
  std::vector<float> chi(g.voxel_count());
  const RunReport r = tiled_field_inversion(g, field, mask, plain_network(1), {8, 2}, net, o, chi);
  ASSERT_EQ(r.tiles_run, 27u);
  ASSERT_EQ(seen.size(), 28u);
  for (uint64_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].first, i);
    EXPECT_EQ(seen[i].second, 27u);
  }
  ASSERT_EQ(callers.size(), 1u);
  EXPECT_EQ(*callers.begin(), std::this_thread::get_id());
  EXPECT_EQ(r.tile_seconds.size(), 27u);
  for (double s : r.tile_seconds) EXPECT_GT(s, 0.0);
}

TEST(Driver, FirstErrorStopsNewTilesAndIsRaisedNamingTheTile) {
  const Geometry g = geometry(40, 40, 40);
  const std::vector<float> field = random_field(g, 6);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  std::atomic<int> runs{0};
  LambdaRunner net([&](int call, std::span<const float> in, const TensorShape&) -> std::vector<float> {
    runs.fetch_add(1);
    std::this_thread::sleep_for(2ms);
    if (call == 3) throw std::runtime_error("out of memory in the network");
    return {in.begin(), in.end()};
  });
  std::vector<float> chi(g.voxel_count());
  const std::string m = error_of(
      [&] { tiled_field_inversion(g, field, mask, plain_network(1), {5, 1}, net, threads(2), chi); }, ErrorCode::RunnerFailed);
  EXPECT_TRUE(contains(m, "tile ")) << m;
  EXPECT_TRUE(contains(m, "out of memory in the network")) << m;
  EXPECT_LT(runs.load(), 512 / 4) << "new tiles kept starting after the error";
}

TEST(Driver, CancelStopsPromptly) {
  const Geometry g = geometry(40, 40, 40);
  const std::vector<float> field = random_field(g, 7);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  InstrumentedRunner net(10ms);
  std::atomic<bool> cancel{false};
  RunOptions o = threads(2);
  o.cancel = &cancel;
  o.progress = [&](uint64_t done, uint64_t) {
    if (done == 3) cancel = true;
  };
  std::vector<float> chi(g.voxel_count());
  const std::string m =
      error_of([&] { tiled_field_inversion(g, field, mask, plain_network(1), {5, 1}, net, o, chi); }, ErrorCode::Cancelled);
  EXPECT_TRUE(contains(m, "cancelled after")) << m;
  EXPECT_LE(net.started.load(), 3 + 2 + 2) << "tiles kept running after cancel";
  EXPECT_EQ(net.in_flight.load(), 0) << "returned with tiles still in flight";
}

TEST(Driver, EmptyMaskRunsNoTilesAndGivesZeros) {
  const Geometry g = geometry(20, 20, 20);
  const std::vector<float> field = random_field(g, 8);
  const std::vector<uint8_t> mask(g.voxel_count(), 0);
  IdentityRunner net;
  std::vector<float> chi(g.voxel_count(), 5.0f);
  std::vector<uint64_t> progress;
  RunOptions o = threads(2);
  o.progress = [&](uint64_t d, uint64_t t) { progress.push_back(d * 1000 + t); };
  const RunReport r = tiled_field_inversion(g, field, mask, plain_network(8), {8, 2}, net, o, chi);
  EXPECT_EQ(net.calls.load(), 0);
  EXPECT_EQ(r.tiles_run, 0u);
  EXPECT_EQ(r.tiles_skipped, r.tiles_total);
  EXPECT_EQ(r.tiles_total, 27u);
  for (float v : chi) ASSERT_EQ(v, 0.0f);
  EXPECT_EQ(progress, std::vector<uint64_t>{0});
}

TEST(Driver, BadInputIsRefusedWithAClearMessage) {
  const Geometry g = geometry(8, 8, 8);
  std::vector<float> field = random_field(g, 9);
  std::vector<uint8_t> mask(g.voxel_count(), 1);
  std::vector<float> chi(g.voxel_count());
  IdentityRunner net;
  const FieldNetwork n = plain_network(8);

  std::vector<uint8_t> short_mask(100, 1);
  EXPECT_TRUE(contains(error_of([&] { tiled_field_inversion(g, field, short_mask, n, {4, 2}, net, threads(1), chi); },
                                ErrorCode::InvalidArgument),
                       "same dims"));
  const Geometry zero = geometry(8, 0, 8);
  EXPECT_TRUE(contains(error_of([&] { tiled_field_inversion(zero, {}, {}, n, {4, 2}, net, threads(1), {}); },
                                ErrorCode::InvalidArgument),
                       "every dimension must be at least 1"));
  EXPECT_TRUE(contains(
      error_of([&] { tiled_field_inversion(g, field, mask, n, {0, 2}, net, threads(1), chi); }, ErrorCode::InvalidArgument),
      "core must be at least 1"));
  std::vector<float> small_chi(10);
  EXPECT_TRUE(contains(error_of([&] { tiled_field_inversion(g, field, mask, n, {4, 2}, net, threads(1), small_chi); },
                                ErrorCode::InvalidArgument),
                       "output buffer"));

  // NaN/Inf: rejected with the count and the first position (documented choice: never zeroed silently).
  field[g.index(3, 2, 1)] = std::numeric_limits<float>::quiet_NaN();
  field[g.index(5, 5, 5)] = std::numeric_limits<float>::infinity();
  const std::string nan = error_of([&] { tiled_field_inversion(g, field, mask, n, {4, 2}, net, threads(1), chi); },
                                   ErrorCode::NonFiniteInput);
  EXPECT_TRUE(contains(nan, "2 non-finite voxels")) << nan;
  EXPECT_TRUE(contains(nan, "(3, 2, 1)")) << nan;
  EXPECT_EQ(net.calls.load(), 0);
  field = random_field(g, 9);

  // A runner that returns the wrong length.
  LambdaRunner wrong([](int, std::span<const float> in, const TensorShape&) {
    return std::vector<float>(in.size() / 8);
  });
  const std::string w = error_of([&] { tiled_field_inversion(g, field, mask, n, {4, 2}, wrong, threads(2), chi); },
                                 ErrorCode::RunnerFailed);
  EXPECT_TRUE(contains(w, "returned 64 values, expected 512")) << w;
  EXPECT_TRUE(contains(w, "[1, 1, 8×8×8]")) << w;
}

TEST(Driver, BitIdenticalFor1_2_3And8Threads) {
  const Geometry g = geometry(29, 22, 17);
  const std::vector<float> field = random_field(g, 10);
  const std::vector<uint8_t> mask = ellipsoid_mask(g);
  ReferenceConvRunner net(1);
  std::vector<float> first(g.voxel_count());
  tiled_field_inversion(g, field, mask, plain_network(8), {6, 1}, net, threads(1), first);
  for (uint32_t t : {2u, 3u, 8u}) {
    std::vector<float> chi(g.voxel_count());
    const RunReport r = tiled_field_inversion(g, field, mask, plain_network(8), {6, 1}, net, threads(t), chi);
    EXPECT_EQ(std::memcmp(first.data(), chi.data(), chi.size() * sizeof(float)), 0) << t << " threads";
    EXPECT_LE(r.max_in_flight, t);
  }
}

TEST(Driver, NativeDefaultIsRefusedUpFrontForWasm) {
  const Geometry g = geometry(200, 200, 200);
  std::vector<float> field(g.voxel_count(), 0.0f);
  std::vector<uint8_t> mask(g.voxel_count(), 1);
  std::vector<float> chi(g.voxel_count());
  IdentityRunner net;
  RunOptions o = threads(2);
  o.target = Target::Wasm;
  const std::string m = error_of(
      [&] { tiled_field_inversion(g, field, mask, plain_network(8), TileConfig{}, net, o, chi); }, ErrorCode::BudgetExceeded);
  EXPECT_TRUE(contains(m, "144³")) << m;
  EXPECT_TRUE(contains(m, "largest core that fits is 112")) << m;
  EXPECT_EQ(net.calls.load(), 0);
}

TEST(Driver, TiledPhysicsLoopIsTheWholeLoopPerTileStitched) {
  // The reference: every active tile's patch (core + halo, host layout) through the loop on its own (lpcnn_invert),
  // its core written back at mask voxels, one tile after the other.
  const Geometry g = geometry(21, 18, 12);
  const std::vector<float> field = random_field(g, 12);
  const std::vector<uint8_t> mask = ellipsoid_mask(g);
  const ModelSpec& lpcnn = *find_model("lpcnn");
  const TileConfig cfg{6, 2};
  ScaledRunner net(0.5f);
  // The grid a tiled run plans: patches on the whole volume's padding grid (plan_tiled).
  const TileGrid grid =
      make_tile_grid(g, mask, cfg, lpcnn.tile_cost().divisor, whole_volume_shape(g, field_network(lpcnn)).pad_low);
  const uint64_t edge = grid.patch_edge;
  Geometry pg = g;
  pg.dims = {static_cast<int64_t>(edge), static_cast<int64_t>(edge), static_cast<int64_t>(edge)};
  std::vector<float> expected(g.voxel_count(), 0.0f);
  for (const Tile* t : active_tiles(grid)) {
    std::vector<float> f(edge * edge * edge);
    std::vector<uint8_t> m(edge * edge * edge);
    gather_host_patch(g, field, mask, t->patch_lo, edge, f, m);
    scatter_host_core(g, mask, *t, edge, lpcnn_invert(pg, f, m, net), expected);
  }

  InversionRequest r;
  r.geometry = g;
  r.model = &lpcnn;
  r.tile = cfg;
  std::vector<float> chi(g.voxel_count(), 7.0f);
  PatchRunner* nets[] = {&net};
  const RunReport report = run_inversion(r, field, mask, nets, threads(3), chi);
  EXPECT_EQ(std::memcmp(chi.data(), expected.data(), chi.size() * sizeof(float)), 0);
  EXPECT_EQ(report.tiles_run, grid.active);
  EXPECT_EQ(report.tiles_run + report.tiles_skipped, report.tiles_total);
  EXPECT_GT(grid.active, 3u);

  WrongLengthRunner wrong;
  PatchRunner* bad[] = {&wrong};
  const std::string m = error_of([&] { run_inversion(r, field, mask, bad, threads(1), chi); }, ErrorCode::RunnerFailed);
  EXPECT_TRUE(contains(m, "returned")) << m;
}

TEST(Driver, WholeVolumePadsByTheModelRuleAndCrops) {
  const Geometry g = geometry(5, 8, 3);  // divisor 8: x pads by 3, z by 5
  std::vector<float> field(g.voxel_count(), 1.0f);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  for (PadRule rule : {PadRule::SmallerHalfLow, PadRule::LargerHalfLow}) {
    TensorShape seen;
    std::vector<float> input_seen;
    LambdaRunner net([&](int, std::span<const float> in, const TensorShape& s) {
      seen = s;
      input_seen.assign(in.begin(), in.end());
      return std::vector<float>(in.begin(), in.end());
    });
    FieldNetwork n = plain_network(8);
    n.pad = rule;
    std::vector<float> chi(g.voxel_count());
    whole_volume_inversion(g, field, mask, n, net, threads(1), chi);
    EXPECT_EQ(seen.dims, (std::array<uint64_t, 3>{8, 8, 8}));
    // First x index holding data: pad_low along x (total pad 3).
    uint64_t first_x = 99, first_z = 99;
    for (uint64_t x = 0; x < 8 && first_x == 99; ++x)
      if (input_seen[(x * 8 + 0) * 8 + 4] != 0.0f) first_x = x;
    for (uint64_t z = 0; z < 8 && first_z == 99; ++z)
      if (input_seen[(4 * 8 + 0) * 8 + z] != 0.0f) first_z = z;
    EXPECT_EQ(first_x, rule == PadRule::SmallerHalfLow ? 1u : 2u);
    EXPECT_EQ(first_z, rule == PadRule::SmallerHalfLow ? 2u : 3u);
    for (float v : chi) ASSERT_EQ(v, 1.0f);
  }
}

TEST(Driver, WholeVolumeOverTheLimitIsRefusedForWasm) {
  Geometry g = geometry(256, 256, 176);
  IdentityRunner net;
  RunOptions o = threads(1);
  o.target = Target::Wasm;
  // Refused before any allocation: empty spans would fail validation, so pass real buffers.
  std::vector<float> field(g.voxel_count(), 0.0f), chi(g.voxel_count());
  std::vector<uint8_t> mask(g.voxel_count(), 1);
  const std::string m = error_of([&] { whole_volume_inversion(g, field, mask, plain_network(8), net, o, chi); },
                                 ErrorCode::BudgetExceeded);
  EXPECT_TRUE(contains(m, "256×256×176")) << m;
  EXPECT_TRUE(contains(m, "run it tiled")) << m;
  EXPECT_EQ(net.calls.load(), 0);
  const WholeVolumeShape s = whole_volume_shape(g, plain_network(8));
  EXPECT_EQ(s.bytes, 256ull * 256ull * 176ull * 1100ull);
}

TEST(Driver, MaskedInputNetworksSeeZerosOutsideTheMask) {
  const Geometry g = geometry(20, 18, 12);
  const std::vector<float> field = random_field(g, 31);
  const std::vector<uint8_t> mask = ellipsoid_mask(g, 0.7);
  std::atomic<int> nonzero_outside{0};
  std::vector<float> last_input;
  std::mutex m;
  LambdaRunner net([&](int, std::span<const float> in, const TensorShape&) {
    std::lock_guard lock(m);
    last_input.assign(in.begin(), in.end());
    return std::vector<float>(in.begin(), in.end());
  });
  FieldNetwork fn = plain_network(1);
  fn.masked_input = true;
  std::vector<float> chi(g.voxel_count());
  whole_volume_inversion(g, field, mask, fn, net, threads(1), chi);
  for (int64_t x = 0; x < 20; ++x)
    for (int64_t y = 0; y < 18; ++y)
      for (int64_t z = 0; z < 12; ++z) {
        const float v = last_input[static_cast<size_t>((x * 18 + y) * 12 + z)];
        if (!mask[g.index(x, y, z)] && v != 0.0f) nonzero_outside++;
        if (mask[g.index(x, y, z)]) ASSERT_EQ(v, field[g.index(x, y, z)]);
      }
  EXPECT_EQ(nonzero_outside.load(), 0);
  // Tiled: the same network input, so identical output.
  std::vector<float> tiled(g.voxel_count());
  tiled_field_inversion(g, field, mask, fn, {6, 2}, net, threads(2), tiled);
  EXPECT_EQ(tiled, chi);
  EXPECT_TRUE(field_network(model_spec("demo-unet")).masked_input);
  EXPECT_FALSE(field_network(model_spec("xqsm")).masked_input);
}
