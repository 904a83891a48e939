// The tile budget: how big a patch may be and how many may be in flight under the browser's
// wasm memory limits. All arithmetic is 64-bit and saturating (size_t is 32 bits on wasm32).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

// How the outputs of overlapping tiles are combined at a voxel (tessera/blend.h): each tile's window (its core)
// is weighted by a per-axis profile and the weights are normalised per voxel. Crop gives every voxel of a window
// the same weight; without overlap (stride = core) every blend is the plain crop-and-stitch.
enum class Blend { Crop, Linear, Cosine, Gaussian };

// Output core edge and halo (context) edge of a cubic tile, in voxels; tiles start every `stride` voxels
// (0: every core, no overlap) and overlapping cores are combined by `blend`.
// {128, 8} is the budget's worked example (the reference engine's config), not what a request defaults to:
// requests default to automatic tiling (tessera/request.h).
struct TileConfig {
  uint32_t core = 128;
  uint32_t halo = 8;
  uint32_t stride = 0;  // 0: core (tiles do not overlap)
  Blend blend = Blend::Crop;

  uint32_t step() const { return stride ? stride : core; }
  bool overlapping() const { return step() < core; }
};

// Stable name of a blend ("crop", "linear", "cosine", "gaussian"), as requests and reports spell it.
const char* blend_name(Blend blend);

// The blend with this name.
// Throws Error(InvalidArgument) naming the known blends.
Blend blend_from_name(std::string_view name);

// The reference engine's budgeting figure: ONNX Runtime heap bytes per patch voxel of an xQSM-sized U-Net (a network
// declared without its own figure is budgeted at this until it is calibrated).
inline constexpr uint64_t kReferenceBytesPerVoxel = 1100;

// What one network costs: patch edges must be multiples of divisor; the memory one worker running a
// patch holds is fixed_bytes (runtime + weights + what session creation keeps) + bytes_per_voxel · edge³.
struct TileCost {
  uint32_t divisor = 1;
  uint64_t bytes_per_voxel = kReferenceBytesPerVoxel;
  uint64_t fixed_bytes = 0;         // per worker, whatever the patch
};

// Activations of all tiles in flight together.
inline constexpr uint64_t WASM_TILE_ACTIVATION_BUDGET = 1'500'000'000ull;
// One patch over this is refused up front: near the heap ceiling a run stalls instead of failing.
inline constexpr uint64_t WASM_MAX_PATCH_ACTIVATION_BYTES = 2'500'000'000ull;
// The 32-bit wasm heap ceiling (4 GiB).
inline constexpr uint64_t WASM_HEAP_CEILING_BYTES = 4ull << 30;
// An ONNX Runtime worker whose heap would pass this fails its tile (MemoryCeiling) instead of growing on: near
// the ceiling a run stalls (one measured here reached 4.15 GB and never returned). 3.5 GB leaves 795 MB (8 of Emscripten's 96 MiB growth
// steps) below 4 GiB, and is 1.4× the single-patch limit: a plan within its limits reaches it only when the
// network's cost is under-declared by 40 % or more.
inline constexpr uint64_t WASM_WORKER_HEAP_GUARD_BYTES = 3'500'000'000ull;

// A computation of the C++ core (a classical method, the pipeline) whose module heap would pass this is refused up
// front: near the 4 GiB ceiling growth stalls instead of failing (the same margin as the worker heap guard).
inline constexpr uint64_t WASM_COMPUTE_HEAP_LIMIT_BYTES = WASM_WORKER_HEAP_GUARD_BYTES;

// The limits above as one value (what the module reports to JavaScript: limits()).
struct WasmLimits {
  uint64_t tile_activation_budget = WASM_TILE_ACTIVATION_BUDGET;
  uint64_t max_patch_activation_bytes = WASM_MAX_PATCH_ACTIVATION_BYTES;
  uint64_t heap_ceiling_bytes = WASM_HEAP_CEILING_BYTES;
  uint64_t worker_heap_guard_bytes = WASM_WORKER_HEAP_GUARD_BYTES;
  uint64_t compute_heap_limit_bytes = WASM_COMPUTE_HEAP_LIMIT_BYTES;
};
// What the C++ module's allocator holds before any volume (static data, the main stack, the runtime), its threads'
// stacks apart (wasm_thread_heap_bytes): a fresh one-thread module's break is 5.4 MB
// (tessera.status().moduleHeapBreakBytes), rounded up.
inline constexpr uint64_t WASM_MODULE_BASELINE_BYTES = 6ull << 20;
// The module's wasm memory at start (Emscripten's INITIAL_MEMORY default): its heap is never smaller.
inline constexpr uint64_t WASM_MODULE_INITIAL_MEMORY_BYTES = 16ull << 20;

// The stack of each thread the module starts beside its main one, allocated from its heap (the link's
// -sDEFAULT_PTHREAD_STACK_SIZE and the stacks common/parallel.h keeps: both come from CMake's TESSERA_PTHREAD_STACK_BYTES).
#ifndef TESSERA_PTHREAD_STACK_BYTES
#error "TESSERA_PTHREAD_STACK_BYTES is not defined: build with CMake (CMakeLists.txt defines it for every target)"
#endif
inline constexpr uint64_t WASM_PTHREAD_STACK_BYTES = TESSERA_PTHREAD_STACK_BYTES;

// Module heap the threads of a run on `threads` threads (the calling one included) hold at once: each thread beyond
// the first its stack, its descriptor, key table and thread-local block. 0 and 1 start no thread.
uint64_t wasm_thread_heap_bytes(unsigned threads);

// Emscripten grows the heap by at least 20 % of its size, at most 96 MiB, at a time (3.1.6 defaults
// MEMORY_GROWTH_GEOMETRIC_STEP / _CAP): a heap that needs N bytes may hold this much more.
uint64_t wasm_heap_growth_slack(uint64_t needed_bytes);

// The module heap a run that needs needed_bytes (the baseline included) reaches at most: the need and its growth
// slack, and never under the initial memory.
uint64_t wasm_module_heap_bytes(uint64_t needed_bytes);

// Where the tiles run: natively every pool thread may hold a tile; in wasm the budget caps them.
enum class Target { Native, Wasm };
#ifdef __EMSCRIPTEN__
inline constexpr Target kBuildTarget = Target::Wasm;
#else
inline constexpr Target kBuildTarget = Target::Native;
#endif

// Saturating 64-bit helpers (results clamp at UINT64_MAX instead of wrapping).
uint64_t saturating_add(uint64_t a, uint64_t b);
uint64_t saturating_mul(uint64_t a, uint64_t b);

// Patch edge: core + 2·halo rounded up to the divisor.
// A divisor of 0 is treated as 1.
uint64_t tile_patch_size(TileConfig cfg, uint32_t divisor);

// Activation bytes of one cubic patch of the given edge.
uint64_t patch_bytes(uint64_t edge, uint64_t bytes_per_voxel);

// Bytes one tile of this config and cost holds: fixed_bytes + patch_bytes.
uint64_t tile_bytes(TileConfig cfg, TileCost cost);

// Largest cubic patch edge whose bytes (fixed_bytes + edge³ · bytes_per_voxel) fit WASM_MAX_PATCH_ACTIVATION_BYTES.
// bytes_per_voxel 0 is treated as 1; 0 when the fixed part alone does not fit.
uint64_t max_wasm_patch_edge(uint64_t bytes_per_voxel, uint64_t fixed_bytes = 0);

// How many tiles fit WASM_TILE_ACTIVATION_BUDGET together (at least 1).
uint64_t tiles_within_wasm_budget(TileConfig cfg, TileCost cost);

// Tiles in flight in wasm: min(threads, tiles_within_wasm_budget), at least 1.
uint32_t wasm_tiles_in_flight(TileConfig cfg, TileCost cost, uint32_t threads);

// Tiles in flight for a pool of the given size: native the pool, wasm min(pool, budget); at least 1.
uint32_t tile_concurrency(TileConfig cfg, TileCost cost, uint32_t pool, Target target = kBuildTarget);

// The same for patches of any shape, given the activation bytes of one (fixed bytes included).
uint32_t patch_concurrency(uint64_t bytes_per_tile, uint32_t pool, Target target = kBuildTarget);

// The verdict on one config against the single-patch limit, with advice when refused.
struct PatchFit {
  bool fits = false;
  uint64_t patch_edge = 0;    // the patch this config asks for
  uint64_t bytes = 0;         // its activation bytes
  uint64_t largest_edge = 0;  // largest patch edge that fits, rounded down to the divisor
  uint64_t largest_core = 0;  // at this halo; 0 when the halo alone leaves no room
  std::string message;        // empty when it fits
};

// Judges a config against WASM_MAX_PATCH_ACTIVATION_BYTES and explains a refusal.
PatchFit wasm_patch_fit(TileConfig cfg, TileCost cost);

// Throws Error(BudgetExceeded) with wasm_patch_fit's message when the patch does not fit.
void check_wasm_patch_fits(TileConfig cfg, TileCost cost);

// Throws Error(InvalidArgument) for a config that cannot tile (core 0, stride over the core, absurd sizes).
void validate_tile_config(TileConfig cfg);

// "3.28 GB" style rendering (decimal GB, 2 decimals), as used in every budget message.
std::string format_gb(uint64_t bytes);

}  // namespace tessera
