#include "tessera/engine/autoplan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <tuple>

#include "tessera/common/error.h"
#include "tessera/engine/tiling.h"

namespace tessera {

namespace {

double speedup(uint32_t threads, const ThroughputModel& s) {
  const double f = std::clamp(s.parallel_fraction, 0.0, 1.0);
  return 1.0 / ((1.0 - f) + f / std::max<uint32_t>(1, threads));
}

uint64_t largest_dim(const Geometry& g) {
  uint64_t m = 0;
  for (int64_t d : g.dims) m = std::max<uint64_t>(m, static_cast<uint64_t>(d));
  return m;
}

// The largest patch edge worth trying: what covers the volume with this halo, capped by the single-patch limit.
uint64_t largest_edge(const AutoPlanRequest& r, uint32_t divisor, uint64_t halo2) {
  uint64_t hi = (largest_dim(r.geometry) + halo2 + divisor - 1) / divisor * divisor;
  if (r.target == Target::Wasm) {
    hi = std::min<uint64_t>(hi, max_wasm_patch_edge(r.network.cost.bytes_per_voxel, r.network.cost.fixed_bytes) / divisor * divisor);
  }
  return hi;
}

// Estimated wall time of patches of these voxel counts on `workers` workers of `threads` threads: largest first, they
// run in waves of `workers`, each wave as long as its largest patch; equal patches give estimate_tiled_seconds.
// voxels_desc is sorted largest first.
double waves_seconds(std::span<const uint64_t> voxels_desc, uint32_t workers, uint32_t threads, const ThroughputModel& s) {
  if (voxels_desc.empty()) return 0.0;
  const uint64_t k = std::max<uint32_t>(1, workers);
  const double per_voxel = s.seconds_per_voxel / speedup(threads, s);
  double seconds = s.worker_start_seconds;
  for (uint64_t i = 0; i < voxels_desc.size(); i += k) seconds += s.per_tile_seconds + static_cast<double>(voxels_desc[i]) * per_voxel;
  return seconds;
}

std::vector<uint64_t> largest_first(std::vector<uint64_t> voxels) {
  std::sort(voxels.begin(), voxels.end(), std::greater<>());
  return voxels;
}

// The fastest (workers, threads) for a config whose active tiles run these patch voxels (any order); workers capped by
// the budget and the tiles.
struct Pace {
  uint32_t workers = 0, threads = 0;
  double seconds = 0;
};
Pace fastest_pace(const AutoPlanRequest& r, const TileConfig& cfg, std::vector<uint64_t> patch_voxels) {
  const std::vector<uint64_t> voxels_desc = largest_first(std::move(patch_voxels));
  const uint32_t cores = std::max<uint32_t>(1, r.hardware_threads);
  const uint64_t budget_tiles = r.target == Target::Wasm ? tiles_within_wasm_budget(cfg, r.network.cost) : cores;
  const uint64_t tiles = voxels_desc.size();
  Pace best;
  for (uint32_t k = 1; k <= cores; ++k) {
    if (r.fixed_workers && k != r.fixed_workers) continue;
    if (k > budget_tiles) break;
    if (k > 1 && k > tiles) break;
    for (uint32_t t = 1; k * t <= cores || (r.fixed_threads && t == r.fixed_threads); ++t) {
      if (r.fixed_threads && t != r.fixed_threads) continue;
      const double est = waves_seconds(voxels_desc, k, t, r.speed);
      // Strictly faster wins; on a tie (within 0.5%) fewer workers (less memory) win.
      if (best.workers == 0 || est < best.seconds * 0.995) best = Pace{k, t, est};
      if (r.fixed_threads && t == r.fixed_threads) break;
    }
  }
  return best;
}

std::string tiling_head(const AutoPlan& a) {
  char head[320];
  const TileConfig& c = a.tile;
  std::string stride;
  if (c.overlapping()) stride = ", stride " + std::to_string(c.stride) + " (" + blend_name(c.blend) + " blend)";
  std::snprintf(head, sizeof head, "core %u, halo %u%s (%llu³ patches): %llu tile%s to run (%llu skipped) on %u worker%s × %u thread%s",
                c.core, c.halo, stride.c_str(), static_cast<unsigned long long>(a.plan.patch_edge),
                static_cast<unsigned long long>(a.plan.tiles_active), a.plan.tiles_active == 1 ? "" : "s",
                static_cast<unsigned long long>(a.plan.tiles_skipped), a.workers, a.workers == 1 ? "" : "s",
                a.threads_per_worker, a.threads_per_worker == 1 ? "" : "s");
  return head;
}

std::string budget_reason(const AutoPlanRequest& r, const AutoPlan& a) {
  const uint32_t cores = std::max<uint32_t>(1, r.hardware_threads);
  const uint64_t fit_tiles = r.target == Target::Wasm ? tiles_within_wasm_budget(a.tile, r.network.cost) : cores;
  char why[256];
  if (r.target == Target::Wasm && a.plan.bytes_per_tile > WASM_TILE_ACTIVATION_BUDGET) {
    std::snprintf(why, sizeof why, "because one %.0f MB tile is over the %.1f GB in-flight budget, so tiles run one at a time",
                  a.plan.bytes_per_tile / 1e6, WASM_TILE_ACTIVATION_BUDGET / 1e9);
  } else {
    std::snprintf(why, sizeof why, "because %llu tile%s of %.0f MB fit%s the %.1f GB budget and %u hardware thread%s %s available",
                  static_cast<unsigned long long>(std::min<uint64_t>(fit_tiles, 999)), fit_tiles == 1 ? "" : "s",
                  a.plan.bytes_per_tile / 1e6, fit_tiles == 1 ? "s" : "", WASM_TILE_ACTIVATION_BUDGET / 1e9, cores,
                  cores == 1 ? "" : "s", cores == 1 ? "is" : "are");
  }
  return why;
}

std::string estimate_text(double seconds) {
  char tail[64];
  std::snprintf(tail, sizeof tail, "estimated %.0f s", seconds);
  return tail;
}

std::string fidelity_text(const FidelityPrediction& f) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "predicted r %.3f, NRMSE %.3f against the whole-volume run%s", f.r, f.nrmse,
                f.beyond_fit ? " (with the caution for a reach beyond the fidelity model's fit)" : "");
  return buf;
}

// Why a prediction carries the caution, and what to do about it.
std::string beyond_fit_text() {
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "; this network reaches further than the fidelity model was fitted on (a %u-voxel graph radius), so its "
                "predicted NRMSE is multiplied by %.1f, the largest under-prediction measured on such a network (one "
                "with random weights): measure its reach (receptiveField's probe as the request's context; CLI --probe), "
                "which in a trained network often lies far inside its graph's and then lifts the caution, or check the "
                "result against a whole-volume run where one fits",
                kFidelityFit.fit_radius, kFidelityFit.beyond_fit_caution);
  return buf;
}

std::string target_text(Quality q) {
  const FidelityTarget t = fidelity_target(q);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s target r ≥ %.2f, NRMSE ≤ %.2f", quality_name(q), t.min_r, t.max_nrmse);
  return buf;
}

// The speed-only planner (quality fast): the fastest crop-and-stitch at the given halo.
AutoPlan plan_fastest(const AutoPlanRequest& r, std::span<const uint8_t> mask, const FidelityModel* model) {
  const uint32_t divisor = std::max<uint32_t>(1, r.network.cost.divisor);
  const uint32_t cores = std::max<uint32_t>(1, r.hardware_threads);
  const uint64_t halo2 = 2ull * r.halo;
  const uint64_t max_dim = largest_dim(r.geometry);
  const uint64_t hi = largest_edge(r, divisor, halo2);
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
    const TilePlan plan = plan_tiled(r.geometry, mask, r.network, cfg, cores, r.target, model);
    if (!plan.feasible) {
      if (r.fixed_core) throw Error(ErrorCode::BudgetExceeded, plan.message);
      continue;
    }
    const Pace pace = fastest_pace(r, cfg, active_patch_voxels(plan.grid, plan.patch_dims));
    if (pace.workers && (!found || pace.seconds < best.estimated_seconds * 0.995)) {
      found = true;
      best.tile = cfg;
      best.workers = pace.workers;
      best.threads_per_worker = pace.threads;
      best.estimated_seconds = pace.seconds;
    }
  }
  if (!found) {
    const PatchFit fit = wasm_patch_fit(TileConfig{r.fixed_core ? r.fixed_core : 1, r.halo}, r.network.cost);
    throw Error(ErrorCode::BudgetExceeded, fit.fits ? "no tile configuration fits the limits" : fit.message);
  }
  best.plan = plan_tiled(r.geometry, mask, r.network, best.tile, best.workers, r.target, model);
  best.explanation = tiling_head(best) + ", " + budget_reason(r, best) + "; " +
                     (best.plan.fidelity_known ? fidelity_text(best.plan.fidelity) + " (quality fast: no target); " : "") +
                     estimate_text(best.estimated_seconds);
  return best;
}

// The halos tried when the user did not set one.
const std::vector<uint32_t>& halo_choices() {
  static const std::vector<uint32_t> h{0, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64};
  return h;
}

struct Candidate {
  TileConfig cfg;
  uint64_t patch_edge = 0;
  FidelityPrediction fidelity;
  Pace pace;
};

}  // namespace

const char* quality_name(Quality q) {
  switch (q) {
    case Quality::Faithful: return "faithful";
    case Quality::Balanced: return "balanced";
    case Quality::Fast: return "fast";
  }
  return "faithful";
}

Quality quality_from_name(std::string_view name) {
  for (Quality q : {Quality::Faithful, Quality::Balanced, Quality::Fast}) {
    if (name == quality_name(q)) return q;
  }
  throw Error(ErrorCode::InvalidArgument, "unknown quality '" + std::string(name) + "': use faithful, balanced or fast");
}

FidelityTarget fidelity_target(Quality q) {
  switch (q) {
    case Quality::Faithful: return FidelityTarget{0.99, 0.10};
    case Quality::Balanced: return FidelityTarget{0.97, 0.20};
    case Quality::Fast: break;
  }
  return FidelityTarget{};
}

const char* speed_source_name(SpeedSource s) {
  switch (s) {
    case SpeedSource::Default: return "default";
    case SpeedSource::Graph: return "graph";
    case SpeedSource::Registry: return "registry";
    case SpeedSource::Measured: return "measured";
  }
  return "default";
}

ThroughputModel fit_throughput(std::span<const SpeedPoint> points, const ThroughputModel& base) {
  // y = a + b·x with x = edge³ / speed-up(threads): a is the fixed cost of a tile, b the seconds per voxel on 1 thread.
  double sx = 0, sy = 0, sxx = 0, sxy = 0, x_min = 1e300, x_max = 0;
  for (const SpeedPoint& p : points) {
    if (p.patch_edge < 1 || p.threads < 1 || !std::isfinite(p.seconds) || p.seconds <= 0) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "speed point (edge %llu, %u threads, %g s) is not a measurement: edge and threads must be "
                    ">= 1 and seconds finite and > 0", static_cast<unsigned long long>(p.patch_edge), p.threads, p.seconds);
      throw Error(ErrorCode::InvalidArgument, buf);
    }
    const double e = static_cast<double>(p.patch_edge);
    const double x = e * e * e / speedup(p.threads, base);
    sx += x;
    sy += p.seconds;
    sxx += x * x;
    sxy += x * p.seconds;
    x_min = std::min(x_min, x);
    x_max = std::max(x_max, x);
  }
  const double n = static_cast<double>(points.size());
  if (points.size() < 2 || x_max <= x_min * (1 + 1e-12)) {
    throw Error(ErrorCode::InvalidArgument, "a speed fit needs patches of at least two sizes: measure two or more patch edges");
  }
  double b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  double a = (sy - b * sx) / n;
  if (a < 0) {  // noise put the intercept below zero: no fixed cost, the slope through the origin
    a = 0;
    b = sxy / sxx;
  }
  if (!(b > 0)) {
    throw Error(ErrorCode::InvalidArgument, "the measured patch times do not grow with the patch size: the machine was too busy "
                                            "to measure; measure again or leave the speed out");
  }
  ThroughputModel m = base;
  m.per_tile_seconds = a;
  m.seconds_per_voxel = b;
  return m;
}

SpeedProbeEdges speed_probe_edges(uint64_t voxels_run, uint32_t divisor, uint64_t largest_edge) {
  const uint64_t d = std::max<uint32_t>(1, divisor);
  const auto up = [d](uint64_t e) { return (e + d - 1) / d * d; };
  const auto down = [d](uint64_t e) { return e / d * d; };
  const uint64_t least = up(voxels_run > 0 ? 16 : 32);  // the smallest patch worth timing
  uint64_t large = up(64);
  if (voxels_run > 0) {
    const uint64_t share = down(static_cast<uint64_t>(std::cbrt(kSpeedProbeShare * static_cast<double>(voxels_run))));
    large = std::clamp<uint64_t>(share, up(32), large);
  }
  large = std::min(large, down(largest_edge));
  if (large <= least) {
    char buf[240];
    std::snprintf(buf, sizeof buf, "the speed probe needs patches of %llu³ and larger, but the single-patch limit allows %llu³",
                  static_cast<unsigned long long>(least), static_cast<unsigned long long>(largest_edge));
    throw Error(ErrorCode::BudgetExceeded, buf);
  }
  return {std::max(least, std::min(up(large / 2), large - d)), large};
}

double estimate_tiled_seconds(uint64_t patch_edge, uint64_t active_tiles, uint32_t workers, uint32_t threads,
                              const ThroughputModel& s) {
  return waves_seconds(std::vector<uint64_t>(active_tiles, patch_edge * patch_edge * patch_edge), workers, threads, s);
}

double estimate_plan_seconds(const TilePlan& plan, uint32_t workers, uint32_t threads, const ThroughputModel& s) {
  return waves_seconds(largest_first(active_patch_voxels(plan.grid, plan.patch_dims)), workers, threads, s);
}

// The whole volume as the auto-planner's choice, when it fits and neither a core nor several workers are fixed.
static std::optional<AutoPlan> whole_volume_choice(const AutoPlanRequest& r) {
  const TilePlan whole = plan_whole(r.geometry, r.network, r.target, r.crop.cropped ? &r.crop : nullptr);
  if (!whole.feasible || r.fixed_core || r.fixed_workers > 1) return std::nullopt;
  const uint32_t threads = r.fixed_threads ? r.fixed_threads : std::max<uint32_t>(1, r.hardware_threads);
  AutoPlan w;
  w.whole_volume = true;
  w.workers = 1;
  w.threads_per_worker = threads;
  w.estimated_seconds = estimate_plan_seconds(whole, 1, threads, r.speed);
  w.plan = whole;
  const std::string what = r.crop.cropped ? "the mask's bounding box + " + std::to_string(r.crop.margin) +
                                                " voxels as one patch (" + crop_text(r.geometry, r.crop) +
                                                "; only zeros of the input are left out)"
                                          : std::string("the whole volume");
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "%s (%llu×%llu×%llu, %.2f GB of activations) fits the %.1f GB single-patch limit and "
                "%s; %s; 1 worker × %u thread%s; ",
                what.c_str(), static_cast<unsigned long long>(whole.patch_dims[0]), static_cast<unsigned long long>(whole.patch_dims[1]),
                static_cast<unsigned long long>(whole.patch_dims[2]), whole.bytes_per_tile / 1e9,
                WASM_MAX_PATCH_ACTIVATION_BYTES / 1e9,
                r.whole_when_fits ? "a tiled physics loop runs the whole algorithm per patch (off-design), so it runs whole when it fits"
                                  : ("no tiling that meets the " + target_text(r.quality) + " is estimated " +
                                     std::to_string(static_cast<int>(std::lround((1.0 - kTilingOverWhole) * 100))) + " % faster").c_str(),
                r.crop.cropped ? "the whole-volume answer up to the network's response to the zeros left out (at a margin of 2-4 "
                                 "voxels NRMSE <= 0.027 measured on three phantoms)"
                               : "exact by definition",
                threads, threads == 1 ? "" : "s");
  w.explanation = buf + estimate_text(w.estimated_seconds);
  return w;
}

// Whether a run of fidelity a taking seconds_a is more faithful than b: lower predicted NRMSE (by more than 0.1 %),
// then the faster of equals.
static bool more_faithful(const FidelityPrediction& a, double seconds_a, const FidelityPrediction& b, double seconds_b) {
  return a.nrmse < b.nrmse * 0.999 || (a.nrmse <= b.nrmse * 1.001 && seconds_a < seconds_b);
}

// The warning of a plan that falls short of the quality target: the most faithful run within the limits.
static std::string short_of_target_text(Quality q, const FidelityPrediction& f) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "no tiling within the memory budget reaches the %s (the best is predicted r %.3f, NRMSE %.3f): the run "
                "takes the most faithful one; the result is approximate",
                target_text(q).c_str(), f.r, f.nrmse);
  std::string text = buf;
  if (f.beyond_fit) text += beyond_fit_text();
  return text;
}

// The mask's box over the single-patch limit, run as slabs (plan_box_split): only the cut faces need context, so it
// costs far fewer patch voxels than a cubic tiling at the same halo. Per halo and axis the fewest pieces that fit (more
// pieces only add cut faces); none when the box fits as one patch, or a core or several workers are fixed.
struct BoxSplits {
  std::optional<AutoPlan> fastest_meeting;  // the fastest split that meets the target
  std::optional<AutoPlan> most_faithful;    // the split of the lowest predicted NRMSE (then the fastest)
};

static BoxSplits box_split_choice(const AutoPlanRequest& r, std::span<const uint8_t> mask, const FidelityModel& model,
                                  const std::vector<uint32_t>& halos,
                                  const std::function<bool(const FidelityPrediction&)>& meets) {
  BoxSplits out;
  if ((!r.crop.cropped && !r.view_slabs) || r.fixed_core || r.fixed_workers > 1) return out;
  // The box to cut: the mask's, else (no crop asked, or the box at the asked margin is the whole padded volume) the
  // field of view, whose slabs are still far fewer patch voxels than cubic tiles at the same context.
  const CropBox box = r.crop.cropped ? r.crop : whole_volume_box(r.geometry, r.network);
  if (plan_whole(r.geometry, r.network, r.target, &box).feasible) return out;
  const uint32_t threads = r.fixed_threads ? r.fixed_threads : std::max<uint32_t>(1, r.hardware_threads);
  for (uint32_t h : halos) {
    for (uint32_t axis = 0; axis < 3; ++axis) {
      const int64_t extent = box.hi[axis] - box.lo[axis];
      for (uint32_t n = 2; n <= 16 && n <= extent; ++n) {
        CropBox c = box;
        c.split = BoxSplit{axis, n, h};
        TilePlan p = plan_box_split(r.geometry, mask, r.network, c, 1, r.target, &model);
        if (!p.feasible) continue;  // over the single-patch limit: more pieces
        AutoPlan a;
        a.tile = p.tile;
        a.workers = 1;
        a.threads_per_worker = threads;
        a.estimated_seconds = estimate_plan_seconds(p, 1, threads, r.speed);
        a.plan = std::move(p);
        if (meets(a.plan.fidelity) && (!out.fastest_meeting || a.estimated_seconds < out.fastest_meeting->estimated_seconds)) {
          out.fastest_meeting = a;
        }
        const AutoPlan* m = out.most_faithful ? &*out.most_faithful : nullptr;
        if (!m || more_faithful(a.plan.fidelity, a.estimated_seconds, m->plan.fidelity, m->estimated_seconds)) {
          out.most_faithful = std::move(a);
        }
        break;  // the fewest pieces that fit: more add cut faces and voxels
      }
    }
  }
  for (std::optional<AutoPlan>* choice : {&out.fastest_meeting, &out.most_faithful}) {
    if (!*choice) continue;
    AutoPlan& best = **choice;
    const TilePlan& p = best.plan;
    char buf[720];
    const std::string what = r.crop.cropped ? "the mask's bounding box + " + std::to_string(r.crop.margin) + " voxels"
                                            : std::string("the whole field of view");
    std::snprintf(buf, sizeof buf,
                  "%s (%s) needs more than the %.1f GB single-patch limit as one patch, "
                  "so it runs in %s (patches %llu×%llu×%llu, %.2f GB each, %llu to run): only the cut faces need context; "
                  "1 worker × %u thread%s; %s (%s); ",
                  what.c_str(), crop_text(r.geometry, box).c_str(), WASM_MAX_PATCH_ACTIVATION_BYTES / 1e9,
                  split_text(p.crop.split).c_str(), static_cast<unsigned long long>(p.patch_dims[0]),
                  static_cast<unsigned long long>(p.patch_dims[1]), static_cast<unsigned long long>(p.patch_dims[2]),
                  p.bytes_per_tile / 1e9, static_cast<unsigned long long>(p.tiles_active), threads, threads == 1 ? "" : "s",
                  fidelity_text(p.fidelity).c_str(), target_text(r.quality).c_str());
    best.explanation = buf + estimate_text(best.estimated_seconds);
  }
  return out;
}

AutoPlan plan_auto(const AutoPlanRequest& r, std::span<const uint8_t> mask) {
  validate_geometry(r.geometry);
  const bool assumed = r.network.context.within.empty();
  ContextProfile context = r.network.context;
  if (assumed) {
    context = dipole_context_profile(kAssumedReceptiveRadius);
    context.assumed = true;
  }
  const FidelityModel model(r.geometry, mask, context, kFidelityFit);
  const std::string assumption =
      assumed ? " (the network's receptive field is unknown: assumed " + std::to_string(kAssumedReceptiveRadius) +
                    " voxels; give its weights or spec.receptiveRadius)"
              : "";
  if (r.whole_when_fits) {
    if (std::optional<AutoPlan> whole = whole_volume_choice(r)) return *whole;
  }
  if (r.quality == Quality::Fast) {
    AutoPlan a = plan_fastest(r, mask, &model);
    a.explanation += assumption;
    return a;
  }
  const FidelityTarget target = fidelity_target(r.quality);
  const uint32_t divisor = std::max<uint32_t>(1, r.network.cost.divisor);
  const uint32_t cores = std::max<uint32_t>(1, r.hardware_threads);
  const uint64_t max_dim = largest_dim(r.geometry);
  const std::vector<uint32_t> fixed{r.halo};
  const std::vector<uint32_t>& halos = r.fixed_halo ? fixed : halo_choices();

  // Every (core, halo, stride) worth trying: its predicted fidelity and its estimated time on its exact tile count.
  const MaskRuns runs(r.geometry, mask);
  std::vector<Candidate> all;
  // Patches off the whole volume's pooling grid alias in the network's max-poolings and miss the whole-volume answer
  // everywhere, not only near their faces (off the grid, 2-4× the NRMSE of the same core on it): only configs whose
  // every patch sits on the grid are candidates, with strides in whole divisors.
  const Dims3 pad_low = whole_volume_shape(r.geometry, r.network).pad_low;
  // done[k]: stride variant k of this (patch, halo) already has a candidate (from a smaller slack: a larger core on the
  // same patch, so fewer tiles).
  auto consider = [&](uint32_t core, uint32_t halo, std::array<bool, 3>& done) {
    const TileConfig base{core, halo};
    const uint64_t P = tile_patch_size(base, divisor);
    if (r.target == Target::Wasm && !wasm_patch_fit(base, r.network.cost).fits) return;
    constexpr int kEighths[3] = {8, 6, 4};  // stride = core, ¾ core, ½ core
    for (int k = 0; k < 3; ++k) {
      if (done[k]) continue;
      const int eighths = kEighths[k];
      const uint32_t stride = eighths == 8 ? core : (core * eighths / 8) / divisor * divisor;
      if (eighths < 8 && (stride == 0 || stride >= core)) continue;
      Candidate c;
      c.cfg = TileConfig{core, halo, eighths < 8 ? stride : 0, eighths < 8 ? Blend::Cosine : Blend::Crop};
      if (!on_pooling_grid(r.geometry, c.cfg, divisor, pad_low)) continue;
      done[k] = true;
      c.patch_edge = P;
      all.push_back(c);  // paced and predicted below, fastest first
    }
  };
  if (r.fixed_core) {
    for (uint32_t h : halos) {
      std::array<bool, 3> done{false, false, false};
      consider(r.fixed_core, h, done);
    }
  } else {
    const uint64_t top = largest_edge(r, divisor, 0);
    for (uint64_t P = divisor; P <= top; P += divisor) {
      for (uint32_t h : halos) {
        if (2ull * h >= P) break;
        // The rounding slack (core + 2·halo short of the patch by 0..divisor − 1) lets a patch reach the grid; the
        // smallest slack that does is the one worth running.
        std::array<bool, 3> done{false, false, false};
        for (uint64_t slack = 0; slack < divisor && 2ull * h + slack < P; ++slack) {
          const uint64_t core = P - 2ull * h - slack;
          if (core < std::min<uint64_t>(8, max_dim)) break;
          if (core > max_dim + 2ull * divisor) continue;  // a core well past the volume is the smaller one again
          consider(static_cast<uint32_t>(core), h, done);
          if (done[0] && done[1] && done[2]) break;
        }
      }
    }
  }
  // Each candidate's pace on its exact patch voxels. The mask voxels each window serves depend on the core and the
  // stride only, so they are found once for all the halos of a (core, stride).
  std::sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    return std::make_pair(a.cfg.core, a.cfg.step()) < std::make_pair(b.cfg.core, b.cfg.step());
  });
  ServedWindows windows;
  for (Candidate& c : all) {
    if (windows.core != c.cfg.core || windows.step != c.cfg.step()) windows = runs.served_windows(c.cfg.core, c.cfg.step());
    c.pace = fastest_pace(r, c.cfg, runs.patch_voxels(c.cfg, divisor, pad_low, windows));
  }
  std::erase_if(all, [](const Candidate& c) { return c.pace.workers == 0; });
  auto meets = [&](const FidelityPrediction& f) {
    return f.nrmse <= target.max_nrmse * kFidelityMargin && f.r >= 1.0 - (1.0 - target.min_r) * kFidelityMargin;
  };
  // Fastest first, in a total order (the same choice natively and in wasm): time, then the smaller patch, core, halo,
  // stride. The first that meets the target is the choice: predictions are made only down to it.
  std::sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.pace.seconds != b.pace.seconds) return a.pace.seconds < b.pace.seconds;
    return std::tie(a.patch_edge, a.cfg.core, a.cfg.halo, a.cfg.stride) < std::tie(b.patch_edge, b.cfg.core, b.cfg.halo, b.cfg.stride);
  });
  const Candidate* first_good = nullptr;
  for (Candidate& c : all) {
    c.fidelity = model.predict(c.cfg, c.patch_edge);
    if (meets(c.fidelity)) {
      first_good = &c;
      break;
    }
  }

  // The whole volume, when it fits: exact by definition.
  std::optional<AutoPlan> whole = whole_volume_choice(r);
  AutoPlan best;
  bool found = false;
  if (first_good) {
    found = true;
    best.tile = first_good->cfg;
    best.workers = first_good->pace.workers;
    best.threads_per_worker = first_good->pace.threads;
    best.estimated_seconds = first_good->pace.seconds;
  }
  if (whole && (!found || best.estimated_seconds > whole->estimated_seconds * kTilingOverWhole)) return *whole;
  // The mask's box as slabs, when it is faster than the tiling (or the tiling misses the target).
  BoxSplits splits = box_split_choice(r, mask, model, halos, meets);
  if (splits.fastest_meeting && (!found || splits.fastest_meeting->estimated_seconds < best.estimated_seconds)) {
    return *splits.fastest_meeting;
  }
  if (!found) {
    // Nothing meets the target within the budget: the most faithful feasible tiling or split (then the fastest).
    const Candidate* most = nullptr;
    for (const Candidate& c : all) {
      if (!most || more_faithful(c.fidelity, c.pace.seconds, most->fidelity, most->pace.seconds)) most = &c;
    }
    const AutoPlan* split = splits.most_faithful ? &*splits.most_faithful : nullptr;
    if (!most && !split) {
      const PatchFit fit = wasm_patch_fit(TileConfig{r.fixed_core ? r.fixed_core : 1, r.fixed_halo ? r.halo : 0u}, r.network.cost);
      throw Error(ErrorCode::BudgetExceeded, fit.fits ? "no tile configuration fits the limits" : fit.message);
    }
    if (split && (!most || more_faithful(split->plan.fidelity, split->estimated_seconds, most->fidelity, most->pace.seconds))) {
      AutoPlan a = *split;
      a.warning = short_of_target_text(r.quality, a.plan.fidelity);
      return a;
    }
    const TilePlan plan = plan_tiled(r.geometry, mask, r.network, most->cfg, cores, r.target, &model);
    const Pace pace = fastest_pace(r, most->cfg, active_patch_voxels(plan.grid, plan.patch_dims));
    best.tile = most->cfg;
    best.workers = pace.workers;
    best.threads_per_worker = pace.threads;
    best.estimated_seconds = pace.seconds;
    best.warning = short_of_target_text(r.quality, most->fidelity);
  }
  best.plan = plan_tiled(r.geometry, mask, r.network, best.tile, best.workers, r.target, &model);
  best.explanation = tiling_head(best) + ", " + budget_reason(r, best) + "; " + fidelity_text(best.plan.fidelity) + " (" +
                     target_text(r.quality) + ")" + assumption + "; " + estimate_text(best.estimated_seconds);
  return best;
}

}  // namespace tessera
