#include "tessera/common/budget.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "tessera/common/error.h"

namespace tessera {

namespace {
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t round_up(uint64_t v, uint64_t d) {
  if (d <= 1) return v;
  const uint64_t r = v % d;
  return r == 0 ? v : saturating_add(v, d - r);
}

std::string cube(uint64_t edge) { return std::to_string(edge) + "³"; }
}  // namespace

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > kMax - b ? kMax : a + b; }

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kMax / b ? kMax : a * b;
}

uint64_t tile_patch_size(TileConfig cfg, uint32_t divisor) {
  const uint64_t raw = saturating_add(cfg.core, saturating_mul(2, cfg.halo));
  return round_up(raw, divisor == 0 ? 1 : divisor);
}

uint64_t patch_bytes(uint64_t edge, uint64_t bytes_per_voxel) {
  return saturating_mul(saturating_mul(saturating_mul(edge, edge), edge), bytes_per_voxel);
}

uint64_t tile_bytes(TileConfig cfg, TileCost cost) {
  return saturating_add(cost.fixed_bytes, patch_bytes(tile_patch_size(cfg, cost.divisor), cost.bytes_per_voxel));
}

uint64_t max_wasm_patch_edge(uint64_t bytes_per_voxel, uint64_t fixed_bytes) {
  const uint64_t bpv = bytes_per_voxel == 0 ? 1 : bytes_per_voxel;
  if (fixed_bytes >= WASM_MAX_PATCH_ACTIVATION_BYTES) return 0;
  // Binary search the largest e with e³·bpv <= limit; e <= 2^21 since (2^21)³ > 2.5e9.
  uint64_t lo = 0, hi = uint64_t{1} << 21;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (saturating_add(fixed_bytes, patch_bytes(mid, bpv)) <= WASM_MAX_PATCH_ACTIVATION_BYTES) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

namespace {
uint64_t within_wasm_budget(uint64_t per_tile) {
  if (per_tile == 0) return kMax;
  return std::max<uint64_t>(1, WASM_TILE_ACTIVATION_BUDGET / per_tile);
}
uint32_t wasm_in_flight(uint64_t per_tile, uint32_t threads) {
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(threads, within_wasm_budget(per_tile))));
}
}  // namespace

uint64_t tiles_within_wasm_budget(TileConfig cfg, TileCost cost) { return within_wasm_budget(tile_bytes(cfg, cost)); }

uint32_t wasm_tiles_in_flight(TileConfig cfg, TileCost cost, uint32_t threads) {
  return wasm_in_flight(tile_bytes(cfg, cost), threads);
}

uint32_t tile_concurrency(TileConfig cfg, TileCost cost, uint32_t pool, Target target) {
  return patch_concurrency(tile_bytes(cfg, cost), pool, target);
}

uint32_t patch_concurrency(uint64_t bytes_per_tile, uint32_t pool, Target target) {
  if (target == Target::Native) return std::max<uint32_t>(1, pool);
  return wasm_in_flight(bytes_per_tile, pool);
}

uint64_t wasm_heap_growth_slack(uint64_t needed_bytes) { return std::min<uint64_t>(needed_bytes / 5, 96ull << 20); }

uint64_t wasm_thread_heap_bytes(unsigned threads) {
  // Beside the stack, musl's thread descriptor, its key table (PTHREAD_KEYS_MAX pointers), the thread-local block and
  // the allocator's headers of each: under 4 KiB.
  constexpr uint64_t kThreadRecordBytes = 4096;
  return threads <= 1 ? 0 : saturating_mul(threads - 1, WASM_PTHREAD_STACK_BYTES + kThreadRecordBytes);
}

uint64_t wasm_module_heap_bytes(uint64_t needed_bytes) {
  return std::max(WASM_MODULE_INITIAL_MEMORY_BYTES, saturating_add(needed_bytes, wasm_heap_growth_slack(needed_bytes)));
}

std::string format_gb(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

PatchFit wasm_patch_fit(TileConfig cfg, TileCost cost) {
  PatchFit fit;
  const uint64_t divisor = cost.divisor == 0 ? 1 : cost.divisor;
  fit.patch_edge = tile_patch_size(cfg, cost.divisor);
  fit.bytes = tile_bytes(cfg, cost);
  fit.largest_edge = max_wasm_patch_edge(cost.bytes_per_voxel, cost.fixed_bytes) / divisor * divisor;
  const uint64_t halo2 = saturating_mul(2, cfg.halo);
  fit.largest_core = fit.largest_edge > halo2 ? fit.largest_edge - halo2 : 0;
  fit.fits = fit.bytes <= WASM_MAX_PATCH_ACTIVATION_BYTES;
  if (fit.fits) return fit;

  std::string m = "patch " + cube(fit.patch_edge) + " (core " + std::to_string(cfg.core) + " + 2×halo " +
                  std::to_string(cfg.halo) + (divisor > 1 ? ", rounded up to divisor " + std::to_string(divisor) : "") +
                  ") needs " + format_gb(fit.bytes) + " at " +
                  (cost.fixed_bytes ? format_gb(cost.fixed_bytes) + " per worker + " : std::string()) +
                  std::to_string(cost.bytes_per_voxel) + " B/voxel, over the " + format_gb(WASM_MAX_PATCH_ACTIVATION_BYTES) +
                  " single-patch limit; the largest patch that fits is " + cube(fit.largest_edge);
  if (fit.largest_edge == 0) {
    m = "this network alone holds " + format_gb(cost.fixed_bytes) + " per worker, over the " +
        format_gb(WASM_MAX_PATCH_ACTIVATION_BYTES) + " single-patch limit: it cannot run in a browser wasm heap";
  } else if (fit.largest_core > 0) {
    m += ": at halo " + std::to_string(cfg.halo) + " the largest core that fits is " + std::to_string(fit.largest_core);
  } else {
    const uint64_t max_halo = fit.largest_edge > 0 ? (fit.largest_edge - 1) / 2 : 0;
    m += ": the halo alone (2×" + std::to_string(cfg.halo) + " = " + std::to_string(halo2) +
         " voxels) leaves no room for a core; reduce the halo to at most " + std::to_string(max_halo);
  }
  fit.message = std::move(m);
  return fit;
}

void check_wasm_patch_fits(TileConfig cfg, TileCost cost) {
  PatchFit fit = wasm_patch_fit(cfg, cost);
  if (!fit.fits) throw Error(ErrorCode::BudgetExceeded, fit.message);
}

void validate_tile_config(TileConfig cfg) {
  if (cfg.core == 0) {
    throw Error(ErrorCode::InvalidArgument, "tile core must be at least 1 voxel (got 0); try core 56, halo 4");
  }
  constexpr uint32_t kMaxEdge = 1u << 16;
  if (cfg.core > kMaxEdge || cfg.halo > kMaxEdge) {
    throw Error(ErrorCode::InvalidArgument, "tile core " + std::to_string(cfg.core) + " / halo " +
                                                std::to_string(cfg.halo) + " is absurdly large (at most " +
                                                std::to_string(kMaxEdge) + ")");
  }
  if (cfg.stride > cfg.core) {
    throw Error(ErrorCode::InvalidArgument, "tile stride " + std::to_string(cfg.stride) + " is over the core " +
                                                std::to_string(cfg.core) + ": tiles would leave gaps; use a stride of at most " +
                                                std::to_string(cfg.core) + " (0 or the core: no overlap)");
  }
}

const char* blend_name(Blend blend) {
  switch (blend) {
    case Blend::Crop: return "crop";
    case Blend::Linear: return "linear";
    case Blend::Cosine: return "cosine";
    case Blend::Gaussian: return "gaussian";
  }
  return "crop";
}

Blend blend_from_name(std::string_view name) {
  for (Blend b : {Blend::Crop, Blend::Linear, Blend::Cosine, Blend::Gaussian}) {
    if (name == blend_name(b)) return b;
  }
  throw Error(ErrorCode::InvalidArgument,
              "unknown blend '" + std::string(name) + "': use crop, linear, cosine or gaussian");
}

}  // namespace tessera
