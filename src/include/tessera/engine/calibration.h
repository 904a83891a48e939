// A network's memory cost from measured worker heaps: the patch edges to measure, the safe line
// heap = fixed + bytes_per_voxel · patch voxels fitted to the measurements, and the verdict on a run's
// measured heaps against its plan. Measuring the heaps is the caller's (JavaScript, in ONNX Runtime Web
// workers); the arithmetic is here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/budget.h"

namespace tessera {

// One measurement: a fresh worker ran patches of `voxels` voxels.
struct HeapPoint {
  uint64_t voxels = 0;               // patch voxels (edge³)
  uint64_t heap_bytes = 0;           // the worker's wasm heap after the patches (its high-water: it never shrinks)
  uint64_t after_session_bytes = 0;  // the same heap right after the session was created, before any patch
};

// The fitted cost. A heap is committed in Emscripten's growth steps, so a measured heap only says that the
// network held between heap / 1.2 and heap: slope_bound is the steepest slope those intervals allow between the
// smallest and the largest patch (at least the least-squares slope), and the safe line is
// (1 + slope_margin) · (top + slope_bound · voxels), top being the smallest intercept that puts every measured heap
// under top + slope_bound · voxels. Every measured heap_bytes and after_session_bytes lies under the safe line.
struct CalibrationFit {
  uint64_t fixed_bytes = 0;           // safe fixed part, rounded up to 1 MiB
  uint64_t bytes_per_voxel = 0;       // safe: slope_bound · (1 + slope_margin), rounded up to 10 B
  double fitted_fixed_bytes = 0;      // least squares over the points that grew the heap
  double fitted_bytes_per_voxel = 0;  // its slope
  double r2 = 0;                      // of that fit (1 for two points)
  double slope_bound = 0;             // the steepest slope the measurements allow (>= fitted_bytes_per_voxel)
  double slope_margin = 0;            // the fraction added to the line (Emscripten's growth step)
  uint32_t points_fitted = 0;         // points whose patches grew the heap past its after-session size
  bool slope_measured = false;        // false: fewer than two patch sizes grew the heap; bytes_per_voxel is assumed
  uint64_t raised_bytes = 0;          // fixed_bytes − the fitted fixed part (what the raise added)
  std::string note;                   // how the figures were obtained, in words
};

// The slope margin: Emscripten commits up to 20 % more heap than a growth asks for (its geometric step,
// tessera/budget.h wasm_heap_growth_slack), so a heap measured at one size may sit up to 20 % over what
// the network holds, and a larger patch may land anywhere in the next step.
inline constexpr double kCalibrationSlopeMargin = 0.20;

// Patch edges to measure, smallest first: multiples of divisor from 16 voxels, at least 8 apart.
// count >= 1; a divisor of 0 is treated as 1.
std::vector<uint64_t> calibration_edges(uint32_t divisor, uint32_t count);

// Whether these points measure a slope: at least two patch sizes grew the heap past its after-session size.
// Below that, activations fit in heap that session creation freed and larger patches must be measured.
bool calibration_slope_measured(std::span<const HeapPoint> points);

// The safe cost line of these measurements.
// points holds at least two distinct voxel counts (else Error InvalidArgument).
// Every point has voxels >= 1 and heap_bytes >= after_session_bytes (else Error InvalidArgument).
// Without a measured slope (calibration_slope_measured false) bytes_per_voxel is defaults::kBytesPerVoxel, said in note.
CalibrationFit fit_calibration(std::span<const HeapPoint> points);

// A run's measured memory against its plan.
struct MeasuredMemory {
  uint64_t worker_heap_bytes = 0;          // the largest ONNX Runtime worker heap high-water of the run
  uint64_t module_heap_bytes = 0;          // the C++ module's heap after the run
  uint64_t module_heap_before_bytes = 0;   // the same before the run (0: unknown); it never shrinks
  uint64_t planned_bytes_per_tile = 0;     // plan: fixed + bytes_per_voxel · patch voxels
  uint64_t planned_module_heap_bytes = 0;  // plan: the module heap with growth slack
  uint64_t patch_voxels = 0;               // voxels of one patch (the whole padded volume for a whole run)
  TileCost cost;                           // the cost the plan used
};

// The verdict: ratios, and when a heap exceeds its plan a warning with the figure to declare.
struct MemoryVerdict {
  double worker_heap_vs_plan = 0;           // 1 = exact; above 1 the plan was too low
  double module_heap_vs_plan = 0;
  bool over = false;                        // either ratio above 1
  uint64_t measured_bytes_per_voxel = 0;    // (worker heap − fixed) / patch voxels, rounded up to 10 B; 0 when unknown
  std::string warning;                      // empty when nothing exceeded its plan
};

// Compares a run's measured heaps with its plan. The module heap is only said to exceed its plan when it grew during
// the run: a heap that was already larger (the runtime computed something bigger before) is not this plan's error.
// planned_bytes_per_tile and planned_module_heap_bytes are >= 1 (else Error InvalidArgument).
// network names the network for the advice ("spec net.json", "demo-unet"); custom: declared in a spec, not the registry.
MemoryVerdict check_measured_memory(const MeasuredMemory& m, const std::string& network, bool custom);

}  // namespace tessera
