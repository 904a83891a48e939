// The auto-planner: chooses core, workers and threads per worker that minimise the estimated wall
// time of a tiled run under the memory limits, accounting for halo overhead, skipped tiles and the
// last partial wave; and says why in one sentence.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tessera/plan.h"

namespace tessera {

// How fast a network runs: seconds per patch voxel on one thread, and the parallel fraction of an
// ONNX Runtime run (Amdahl: speed-up with T threads = 1 / ((1 - f) + f / T)).
// Defaults measured on the xQSM-shaped stand-in (bench/RESULTS.md, 2-core AMD EPYC, node): 3.94e-5 s per
// 64³-patch voxel on 1 thread, 1.69× on 2 threads (f = 0.815), about 2 s to start a worker and run its
// first (slower) patch, about 0.3 s of fixed cost per tile.
struct ThroughputModel {
  double seconds_per_voxel = 3.94e-5;  // per patch voxel at 1 thread
  double parallel_fraction = 0.815;
  double worker_start_seconds = 2.0;   // ONNX Runtime session creation per worker (they start in parallel)
  double per_tile_seconds = 0.3;       // fixed cost of one tile (hand-over, ORT run set-up)
};

struct AutoPlanRequest {
  Geometry geometry;
  FieldNetwork network;
  uint32_t halo = 4;              // the network's default halo unless the user set one
  uint32_t hardware_threads = 2;  // cores available to the workers
  uint32_t fixed_core = 0;        // 0: choose; else the user's core
  uint32_t fixed_workers = 0;     // 0: choose
  uint32_t fixed_threads = 0;     // 0: choose
  Target target = kBuildTarget;
  ThroughputModel speed;
};

struct AutoPlan {
  TileConfig tile;
  uint32_t workers = 1;
  uint32_t threads_per_worker = 1;
  double estimated_seconds = 0.0;
  TilePlan plan;            // the plan of the chosen config
  std::string explanation;  // one sentence
};

// Estimated wall time of a tiled run: start-up + ceil(active / workers) waves of one tile each.
// workers >= 1; threads >= 1.
double estimate_tiled_seconds(uint64_t patch_edge, uint64_t active_tiles, uint32_t workers, uint32_t threads,
                              const ThroughputModel& speed);

// Chooses the fastest safe config. geometry valid; mask holds geometry.voxel_count() values.
// Throws Error(BudgetExceeded) when no core fits at this halo (with the planner's advice).
AutoPlan plan_auto(const AutoPlanRequest& request, std::span<const uint8_t> mask);

}  // namespace tessera
