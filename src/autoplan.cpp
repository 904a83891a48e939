#include "tessera/autoplan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tessera/error.h"

namespace tessera {

double estimate_tiled_seconds(uint64_t patch_edge, uint64_t active_tiles, uint32_t workers, uint32_t threads,
                              const ThroughputModel& s) {
  if (active_tiles == 0) return 0.0;
  const double voxels = static_cast<double>(patch_edge) * static_cast<double>(patch_edge) * static_cast<double>(patch_edge);
  const double f = std::clamp(s.parallel_fraction, 0.0, 1.0);
  const double speedup = 1.0 / ((1.0 - f) + f / std::max<uint32_t>(1, threads));
  const double per_tile = s.per_tile_seconds + voxels * s.seconds_per_voxel / speedup;
  const uint64_t k = std::max<uint32_t>(1, workers);
  const double waves = static_cast<double>((active_tiles + k - 1) / k);
  return s.worker_start_seconds + waves * per_tile;
}

AutoPlan plan_auto(const AutoPlanRequest& r, std::span<const uint8_t> mask) {
  validate_geometry(r.geometry);
  const uint32_t divisor = std::max<uint32_t>(1, r.network.cost.divisor);
  const uint32_t cores = std::max<uint32_t>(1, r.hardware_threads);
  // Patch edges to try: multiples of the divisor from the smallest holding a core >= 8 (or 1) up to the
  // largest that fits the single-patch limit (wasm) and no larger than the volume needs.
  const uint64_t halo2 = 2ull * r.halo;
  uint64_t max_dim = 0;
  for (int64_t d : r.geometry.dims) max_dim = std::max<uint64_t>(max_dim, static_cast<uint64_t>(d));
  uint64_t hi = (max_dim + halo2 + divisor - 1) / divisor * divisor;
  if (r.target == Target::Wasm) hi = std::min<uint64_t>(hi, max_wasm_patch_edge(r.network.cost.bytes_per_voxel, r.network.cost.fixed_bytes) / divisor * divisor);
  std::vector<uint32_t> cores_to_try;
  if (r.fixed_core) {
    cores_to_try.push_back(r.fixed_core);
  } else {
    for (uint64_t p = divisor; p <= hi; p += divisor) {
      if (p <= halo2) continue;
      const uint64_t core = p - halo2;
      if (core < std::min<uint64_t>(8, max_dim) && p + divisor <= hi) continue;  // tiny cores: all overhead
      cores_to_try.push_back(static_cast<uint32_t>(core));
    }
  }
  if (cores_to_try.empty()) {
    const PatchFit fit = wasm_patch_fit(TileConfig{1, r.halo}, r.network.cost);
    throw Error(ErrorCode::BudgetExceeded, fit.fits ? "no tile configuration fits" : fit.message);
  }

  AutoPlan best;
  bool found = false;
  for (uint32_t core : cores_to_try) {
    const TileConfig cfg{core, r.halo};
    const TilePlan plan = plan_tiled(r.geometry, mask, r.network, cfg, cores, r.target);
    if (!plan.feasible) {
      if (r.fixed_core) throw Error(ErrorCode::BudgetExceeded, plan.message);
      continue;
    }
    const uint64_t budget_tiles = r.target == Target::Wasm ? tiles_within_wasm_budget(cfg, r.network.cost) : cores;
    for (uint32_t k = 1; k <= cores; ++k) {
      if (r.fixed_workers && k != r.fixed_workers) continue;
      if (k > budget_tiles) break;
      if (k > 1 && k > plan.tiles_active) break;
      for (uint32_t t = 1; k * t <= cores || (r.fixed_threads && t == r.fixed_threads); ++t) {
        if (r.fixed_threads && t != r.fixed_threads) continue;
        const double est = estimate_tiled_seconds(plan.patch_edge, plan.tiles_active, k, t, r.speed);
        // Strictly faster wins; on a tie (within 0.5%) fewer workers (less memory) win.
        if (!found || est < best.estimated_seconds * 0.995) {
          found = true;
          best.tile = cfg;
          best.workers = k;
          best.threads_per_worker = t;
          best.estimated_seconds = est;
          best.plan = plan;
        }
        if (r.fixed_threads && t == r.fixed_threads) break;
      }
    }
  }
  if (!found) {
    const PatchFit fit = wasm_patch_fit(TileConfig{r.fixed_core ? r.fixed_core : 1, r.halo}, r.network.cost);
    throw Error(ErrorCode::BudgetExceeded, fit.fits ? "no tile configuration fits the limits" : fit.message);
  }
  // The chosen plan with the chosen worker count (plan_tiled was asked with every core as a worker).
  best.plan = plan_tiled(r.geometry, mask, r.network, best.tile, best.workers, r.target);
  const uint64_t fit_tiles = r.target == Target::Wasm ? tiles_within_wasm_budget(best.tile, r.network.cost) : cores;
  char head[256], why[256], tail[96];
  std::snprintf(head, sizeof head, "core %u, halo %u (%llu³ patches): %llu tile%s to run (%llu skipped) on %u worker%s × %u thread%s",
                best.tile.core, best.tile.halo, static_cast<unsigned long long>(best.plan.patch_edge),
                static_cast<unsigned long long>(best.plan.tiles_active), best.plan.tiles_active == 1 ? "" : "s",
                static_cast<unsigned long long>(best.plan.tiles_skipped), best.workers, best.workers == 1 ? "" : "s",
                best.threads_per_worker, best.threads_per_worker == 1 ? "" : "s");
  if (r.target == Target::Wasm && best.plan.bytes_per_tile > WASM_TILE_ACTIVATION_BUDGET) {
    std::snprintf(why, sizeof why, "because one %.0f MB tile is over the %.1f GB in-flight budget, so tiles run one at a time",
                  best.plan.bytes_per_tile / 1e6, WASM_TILE_ACTIVATION_BUDGET / 1e9);
  } else {
    std::snprintf(why, sizeof why, "because %llu tile%s of %.0f MB fit%s the %.1f GB budget and %u hardware thread%s %s available",
                  static_cast<unsigned long long>(std::min<uint64_t>(fit_tiles, 999)), fit_tiles == 1 ? "" : "s",
                  best.plan.bytes_per_tile / 1e6, fit_tiles == 1 ? "s" : "", WASM_TILE_ACTIVATION_BUDGET / 1e9, cores,
                  cores == 1 ? "" : "s", cores == 1 ? "is" : "are");
  }
  std::snprintf(tail, sizeof tail, "; estimated %.0f s", best.estimated_seconds);
  best.explanation = std::string(head) + ", " + why + tail;

  return best;
}

}  // namespace tessera
