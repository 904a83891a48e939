// The auto-planner: fidelity first. It chooses the tiling (patch edge, halo, stride, blend) or the whole volume,
// and the workers and threads per worker, that minimise the estimated wall time under the memory limits among the
// configurations whose predicted agreement with the whole-volume run (tessera/fidelity_model.h) meets the quality
// target; when none does, the most faithful feasible one, with a warning. It accounts for halo and overlap work,
// skipped tiles and the last partial wave, and says why in one sentence.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tessera/engine/plan.h"

namespace tessera {

// How fast a network runs: seconds per patch voxel on one thread, and the parallel fraction of an
// ONNX Runtime run (Amdahl: speed-up with T threads = 1 / ((1 - f) + f / T)).
// Defaults measured on the xQSM-shaped stand-in: 3.94e-5 s per 64³-patch voxel on 1 thread (measured
// on a 2-core AMD EPYC, node), about 0.3 s of fixed cost per tile; 0.9 s to start a worker and run its first (slower)
// patch, the measured start of the demo, xQSM-shaped and deep stand-ins, 0.6-1.0 s (it was 2 s, the
// xQSM stand-in's on a slower host); the parallel fraction 0.90 fitted to the workers × threads sweeps on a quiet 2-core Intel Xeon host, in
// node (0.905) and Chromium (0.900), 1 × 2 threads 1.70-1.81× one thread.
struct ThroughputModel {
  double seconds_per_voxel = 3.94e-5;  // per patch voxel at 1 thread
  double parallel_fraction = 0.90;
  double worker_start_seconds = 0.9;   // ONNX Runtime session creation per worker (they start in parallel)
  double per_tile_seconds = 0.3;       // fixed cost of one tile (hand-over, ORT run set-up)
};

// Seconds per multiply-accumulate of a network's convolutions in ONNX Runtime Web on 1 thread: a field -> chi network
// whose speed was not measured here is estimated at its graph's MACs per voxel times this (before its registry figure,
// one machine's at one hour: 1.5-1.8× the runs where this is within 25 % in 11 of 12). Fitted to the demo U-Net
// (53.6 k MACs per voxel), the xQSM-shaped stand-in (397 k) and the deep stand-in (65.5 k), run as one patch or as
// slabs at 2 threads in node and Chromium: 0.046-0.057 µs per 1,000 MACs after the per-tile cost
// (measured), mean 0.050, × 1.82 (the speed-up of 2 threads at parallel_fraction 0.90) for 1 thread.
inline constexpr double kSecondsPerMac = 9.2e-11;

// Where a throughput model's figures came from: the planner's defaults, the network's graph (its MACs per voxel at
// kSecondsPerMac), the network's registry entry, or a probe of the network on this machine (fit_throughput).
enum class SpeedSource { Default, Graph, Registry, Measured };

// Stable name ("default", "graph", "registry", "measured").
const char* speed_source_name(SpeedSource source);

// One probe measurement: the wall time of one whole patch of this edge run on this many ONNX Runtime threads.
struct SpeedPoint {
  uint64_t patch_edge = 0;
  uint32_t threads = 1;
  double seconds = 0.0;
};

// The throughput model whose per-tile time (per_tile_seconds + edge³ · seconds_per_voxel / speed-up(threads)) fits
// the points by least squares; base's parallel_fraction and worker_start_seconds are kept.
// points hold at least two distinct patch voxel counts (else Error InvalidArgument naming the fix).
// every point has patch_edge >= 1, threads >= 1 and finite seconds > 0 (else Error InvalidArgument).
// Throws Error(InvalidArgument) when the times do not grow with the patch size (a probe too noisy to use).
ThroughputModel fit_throughput(std::span<const SpeedPoint> points, const ThroughputModel& base);

// The share of a run's patch voxels the speed probe's larger patch may hold: the probe runs it once untimed, then it
// and the smaller patch kSpeedProbeLeastRounds times each, about 6.5 % of the voxels the run does (more when a pair is
// timed again: below).
inline constexpr double kSpeedProbeShare = 0.02;

// The seconds the speed probe's timed runs add up to at the least: pairs of patches cheaper than that are timed again,
// up to kSpeedProbeRounds pairs, and each edge's fastest is kept (a fresh worker's runs of a few milliseconds vary by
// tens of percent while its code is being optimised).
inline constexpr double kSpeedProbeLeastSeconds = 0.3;
inline constexpr uint32_t kSpeedProbeRounds = 4;

// The pairs the speed probe times at the least, each edge's fastest kept: a single pair timed while the machine is busy
// with something else sets the estimate alone (one Chromium pair measured at 1.7-1.9× the quiet
// host's times, the estimate 1.93× the run; on the quiet host every pair agrees within 15 %).
inline constexpr uint32_t kSpeedProbeLeastRounds = 2;

// The two patch edges the speed probe times, smaller first.
struct SpeedProbeEdges {
  uint64_t small = 0, large = 0;
};

// Edges for a speed probe: multiples of divisor; for a run of voxels_run patch voxels (0: not known) the larger holds
// at most kSpeedProbeShare of them, from 16 and 32 voxels up to 32 and 64 (the edges near 32 and 64 when not known);
// the smaller is about half the larger.
// divisor >= 1; largest_edge: the largest cube the single-patch limit allows.
// Throws Error(BudgetExceeded) when the limit allows no two such edges, naming the edges needed.
SpeedProbeEdges speed_probe_edges(uint64_t voxels_run, uint32_t divisor, uint64_t largest_edge);

// How faithful the auto-planner's choice must be to the whole-volume run (inside the mask):
//   faithful (the default): predicted r >= 0.99 and NRMSE <= 0.10;
//   balanced: r >= 0.97 and NRMSE <= 0.20;
//   fast: no target: the fastest crop-and-stitch at the network's default halo (the prediction is still reported).
enum class Quality { Faithful, Balanced, Fast };

// Stable name ("faithful", "balanced", "fast").
const char* quality_name(Quality quality);
// The quality with this name. Throws Error(InvalidArgument) naming the three.
Quality quality_from_name(std::string_view name);

struct FidelityTarget {
  double min_r = 0.0;
  double max_nrmse = 1e300;
};
// The target of a quality (fast: none).
FidelityTarget fidelity_target(Quality quality);

// The planner aims under the target by this factor: the model's predictions were as low as 0.70 of the measured
// NRMSE over the tiling study, so a predicted 0.7 × target is measured within the target.
inline constexpr double kFidelityMargin = 0.7;

// A tiling displaces the whole volume (or the mask's box as one patch) only when estimated at most this fraction of its
// time: the whole-volume run is the reference, and patches cut to their mask that ran 7-10 % fewer voxels than the box
// ran no faster on the demo network at 160×160×128 with twice its NRMSE against the whole volume.
inline constexpr double kTilingOverWhole = 0.85;

// When a network's context is not known (a custom network with neither a receptive radius nor weights to derive
// it from), the planner assumes the dipole profile of this radius and says so.
inline constexpr uint32_t kAssumedReceptiveRadius = 64;

struct AutoPlanRequest {
  Geometry geometry;
  FieldNetwork network;
  uint32_t halo = 4;              // the network's default halo unless the user set one
  bool fixed_halo = false;        // the user set the halo: only the patch edge and stride are chosen
  Quality quality = Quality::Faithful;
  uint32_t hardware_threads = 2;  // cores available to the workers
  uint32_t fixed_core = 0;        // 0: choose; else the user's core
  uint32_t fixed_workers = 0;     // 0: choose
  uint32_t fixed_threads = 0;     // 0: choose
  bool whole_when_fits = false;   // the whole volume whenever it fits, however fast a tiling (physics loops: tiled, off-design)
  CropBox crop;                   // crop.cropped: the whole-volume candidate is this box (tessera/crop.h)
  bool view_slabs = false;        // field → χ networks without a crop box: the field of view over the single-patch
                                  // limit may run as slabs, as a crop box does
  Target target = kBuildTarget;
  ThroughputModel speed;
};

struct AutoPlan {
  bool whole_volume = false;  // the whole volume fits and is estimated no slower than any faithful tiling
  TileConfig tile;
  uint32_t workers = 1;
  uint32_t threads_per_worker = 1;
  double estimated_seconds = 0.0;
  TilePlan plan;            // the plan of the chosen config
  std::string explanation;  // one sentence
  std::string warning;      // non-empty when nothing within the budget reaches the quality target
};

// Estimated wall time of a tiled run of equal patches: start-up + ceil(active / workers) waves of one tile each.
// workers >= 1; threads >= 1.
double estimate_tiled_seconds(uint64_t patch_edge, uint64_t active_tiles, uint32_t workers, uint32_t threads,
                              const ThroughputModel& speed);

// Estimated wall time of a plan's run: its active patches (each cut to its mask, tiling.h shrink_patch) largest first
// in waves of `workers`, each wave as long as its largest patch.
// workers >= 1; threads >= 1.
double estimate_plan_seconds(const TilePlan& plan, uint32_t workers, uint32_t threads, const ThroughputModel& speed);

// Chooses the fastest safe config. geometry valid; mask holds geometry.voxel_count() values.
// Throws Error(BudgetExceeded) when no core fits at this halo (with the planner's advice).
AutoPlan plan_auto(const AutoPlanRequest& request, std::span<const uint8_t> mask);

}  // namespace tessera
