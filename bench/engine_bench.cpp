// Engine cost beside a network: gather + scatter throughput and driver overhead per tile on a
// 256×256×176 volume with an identity runner. Prints a table; run natively and as wasm:
//   build/native/tessera_engine_bench
//   node --no-experimental-fetch build/wasm/tessera_engine_bench.js
#include <chrono>
#include <cstdio>
#include <vector>

#include "tessera/engine/driver.h"
#include "tessera/engine/tiling.h"

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

class Identity : public PatchRunner {
 public:
  std::vector<float> run(std::span<const float> in, const TensorShape&) override { return {in.begin(), in.end()}; }
};

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main() {
#ifdef __EMSCRIPTEN__
  const char* where = "wasm32 (node)";
#else
  const char* where = "native";
#endif
  Geometry g;
  g.dims = {256, 256, 176};
  const uint64_t n = g.voxel_count();
  std::vector<float> field(n);
  std::vector<uint8_t> mask(n);
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const uint64_t i = g.index(x, y, z);
        field[i] = static_cast<float>((x * 7 + y * 3 + z) % 101) * 0.001f;
        const double dx = (x - 128) / 110.0, dy = (y - 128) / 120.0, dz = (z - 88) / 80.0;
        mask[i] = dx * dx + dy * dy + dz * dz <= 1.0;
      }
  std::vector<float> chi(n);
  std::printf("Tessera engine benchmark, %s, volume 256×256×176 (%.1f M voxels), identity runner\n", where, n / 1e6);

  // 1. Gather + scatter alone, over the tiles of core 56 / halo 4 (64³ patches).
  for (TileConfig cfg : {TileConfig{56, 4}, TileConfig{120, 4}}) {
    const TileGrid grid = make_tile_grid(g, mask, cfg, 8);
    const uint64_t e = grid.patch_edge;
    const std::array<uint64_t, 3> dims{e, e, e};
    std::vector<float> patch(e * e * e);
    double gather_s = 0, scatter_s = 0;
    uint64_t gathered = 0, scattered = 0;
    for (const Tile& t : grid.tiles) {
      if (t.skipped) continue;
      auto t0 = Clock::now();
      gather_patch(g, field, t.patch_lo, dims, Normalization{}, patch);
      gather_s += since(t0);
      gathered += patch.size() * sizeof(float);
      t0 = Clock::now();
      scatter_core(g, mask, t.core_lo, t.core_hi, t.patch_lo, dims, Normalization{}, patch, chi);
      scatter_s += since(t0);
      scattered += static_cast<uint64_t>((t.core_hi[0] - t.core_lo[0]) * (t.core_hi[1] - t.core_lo[1]) *
                                         (t.core_hi[2] - t.core_lo[2])) * sizeof(float);
    }
    std::printf("  core %u halo %u (patch %llu³, %llu tiles run): gather %.2f GB/s, scatter %.2f GB/s (patch bytes / s)\n",
                cfg.core, cfg.halo, static_cast<unsigned long long>(e), static_cast<unsigned long long>(grid.active),
                gathered / gather_s / 1e9, scattered / scatter_s / 1e9);
  }

  // 2. The whole driver with an identity network: wall time per tile = engine overhead per tile.
  std::printf("  driver (gather + identity copy + scatter + scheduling), per tile:\n");
  for (uint32_t threads : {1u, 2u}) {
    for (TileConfig cfg : {TileConfig{24, 4}, TileConfig{56, 4}, TileConfig{120, 4}}) {
      Identity net;
      RunOptions o;
      o.threads = threads;
      o.target = Target::Native;  // measure the engine, not the budget
      FieldNetwork fn{TileCost{8, 1100}, Normalization{}, PadRule::SmallerHalfLow};
      const RunReport r = tiled_field_inversion(g, field, mask, fn, cfg, net, o, chi);
      std::printf("    threads %u core %3u halo %u: %4llu tiles (%llu skipped) in %.3f s = %.2f ms/tile\n", threads, cfg.core,
                  cfg.halo, static_cast<unsigned long long>(r.tiles_run), static_cast<unsigned long long>(r.tiles_skipped),
                  r.wall_seconds, 1e3 * r.wall_seconds / static_cast<double>(r.tiles_run));
    }
  }
  return 0;
}
