#include "tessera/networks/inversion.h"

#include <algorithm>

#include "networks/runs.h"
#include "engine/threaded_driver.h"
#include "tessera/engine/autoplan.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/engine/native_patching.h"
#include "tessera/networks/physics_loops.h"
#include "tessera/networks/training_grid.h"
#include "tessera/common/schema.h"
#include "tessera/engine/verify.h"

namespace tessera {

namespace {

// Whole-volume-only networks cannot be tiled: an explicit tile config is a mistake worth saying.
void refuse_tiling(const InversionRequest& r) {
  if (r.tile_given && !r.whole_volume && !r.auto_tile) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(r.model->name) + " runs on the whole volume only: it reconstructs from wrapped phase and "
                                             "cannot be tiled; drop the tile settings or ask for the whole volume");
  }
}

uint32_t echo_count(const InversionRequest& r) { return static_cast<uint32_t>(std::max<size_t>(1, r.phase.te_s.size())); }

bool on_training_grid_run(const InversionRequest& r) { return r.model && needs_training_grid(*r.model, r.geometry); }

// The request on its network's training grid (the geometry resampled; a network reading its field unmasked is not
// cropped there, its field not being resampled yet at plan time).
InversionRequest training_request(const InversionRequest& r) {
  InversionRequest t = r;
  t.geometry = training_grid(r.geometry, r.model->training_voxel_mm);
  if (!r.model->masked_input) t.crop = false;
  return t;
}

// A plan made on the training grid, with the resampling's grid, bytes and warning.
TilePlan with_training_grid(const InversionRequest& r, const Geometry& training, TilePlan p) {
  TrainingGridPlan& g = p.training_grid;
  g.resampled = true;
  g.dims = training.dims;
  g.voxel_mm = training.voxel_mm;
  g.extra_module_bytes = training_grid_bytes(r.geometry.dims, training.dims);
  g.warning = training_grid_warning(*r.model, r.geometry, training);
  if (p.feasible) {
    const uint64_t added = saturating_add(g.extra_module_bytes, wasm_heap_growth_slack(g.extra_module_bytes));
    p.module_heap_bytes = saturating_add(p.module_heap_bytes, added);
    p.peak_bytes = saturating_add(p.peak_bytes, added);
  }
  return p;
}

}  // namespace

FieldNetwork request_network(const InversionRequest& r) {
  FieldNetwork n = r.model ? field_network(*r.model) : r.custom;
  // A physics loop's patch (the whole volume, run whole) holds the loop's volumes in the module.
  if (r.model && r.model->kind == ModelKind::PhysicsLoop) n.module_bytes_per_patch_voxel = physics_loop_module_bytes_per_voxel(r.model->id);
  // A probe's profile first; then the registry's measured one while the weights' graph agrees with the registry's;
  // else the profile of the given radius (the weights' graph, or the custom network's declaration).
  const bool registry_measured = r.model && !r.model->measured_context.empty();
  if (!r.measured_context.within.empty()) {
    n.context = r.measured_context;
  } else if (r.receptive_radius > 0 && !(registry_measured && r.receptive_radius == r.model->receptive_radius)) {
    n.context = dipole_context_profile(r.receptive_radius);
  }
  return n;
}

bool is_phase_network(const InversionRequest& r) { return r.model && takes_input(*r.model, InputRole::Phase); }

bool runs_in_steps(const InversionRequest& r) {
  return !r.model || r.model->kind == ModelKind::FieldToChi || r.model->kind == ModelKind::NativePatches;
}

TilePlan plan_of_choice(const InversionRequest& r, std::span<const uint8_t> mask, const PlanChoice& c, Target target) {
  validate_mask_not_empty(r.geometry, mask);  // a run of a choice: an all-zero mask would write an all-zero χ
  if (on_training_grid_run(r)) {
    const InversionRequest t = training_request(r);
    const std::vector<uint8_t> tm = kspace_resample_mask(r.geometry, mask, t.geometry.dims);
    return with_training_grid(r, t.geometry, plan_of_choice(t, tm, c, target));
  }
  if (assumes_b0_along_z(r) && request_b0_plan(r).resampled) {
    throw Error(ErrorCode::InvalidArgument, "this run resamples to a B0-aligned grid (b0Align): its plan is evaluated on "
                                            "the aligned volume (b0_alignment, to_aligned_grid), not on the source volume");
  }
  TilePlan p;
  if (is_phase_network(r)) {
    p = plan_inversion(r, mask, target);  // whole volume, nothing to choose
  } else if (c.whole_volume && c.crop.cropped) {
    const FieldNetwork net = request_network(r);
    validate_crop(r.geometry, mask, net, c.crop);
    p = plan_whole(r.geometry, net, target, &c.crop);
  } else if (c.crop.cropped && c.crop.split.pieces > 1) {
    const FieldNetwork net = request_network(r);
    validate_crop(r.geometry, mask, net, c.crop);
    p = plan_box_split(r.geometry, mask, net, c.crop, std::max<uint32_t>(1, c.workers), target);
  } else if (c.whole_volume || (r.model && r.model->kind == ModelKind::NativePatches)) {
    p = plan_whole(r.geometry, request_network(r), target);
  } else {
    p = plan_tiled(r.geometry, mask, request_network(r), c.tile, std::max<uint32_t>(1, c.workers), target);
  }
  if (!p.feasible) throw Error(ErrorCode::BudgetExceeded, p.message);
  if (p.tiles_total != c.tiles_total || p.tiles_active != c.tiles_active) {
    throw Error(ErrorCode::InvalidArgument,
                "the plan was made for another volume, mask or network: it counts " + std::to_string(c.tiles_active) +
                    " of " + std::to_string(c.tiles_total) + " tiles to run, this request " + std::to_string(p.tiles_active) +
                    " of " + std::to_string(p.tiles_total) + ": plan again");
  }
  if (c.tiles_in_flight == 0 || c.tiles_in_flight > p.tiles_in_flight) {
    throw Error(ErrorCode::InvalidArgument, "the plan asks for " + std::to_string(c.tiles_in_flight) +
                                                " tiles in flight; at most " + std::to_string(p.tiles_in_flight) +
                                                " fit the budget with " + std::to_string(p.workers) + " worker(s)");
  }
  p.tiles_in_flight = c.tiles_in_flight;
  p.threads_per_worker = c.threads_per_worker;
  return p;
}

uint32_t network_count(const InversionRequest& r) {
  if (!r.model) return 1;
  return r.model->weights[1].file.empty() ? 1 : 2;
}

uint32_t network_output_channels(const InversionRequest& r, uint32_t) {
  return r.model ? r.model->output_channels : 1;
}

bool assumes_b0_along_z(const InversionRequest& r) { return runs_in_steps(r); }

B0Plan request_b0_plan(const InversionRequest& r) {
  return b0_plan(r.geometry, assumes_b0_along_z(r), r.b0_align, defaults::kB0AlignThresholdDegrees, defaults::kB0WarnDegrees);
}

namespace {

// A crop box nearer the mask than the least margin measured faithful: its own error is not in the prediction.
std::string small_margin_text(uint32_t margin) {
  return "the crop margin of " + std::to_string(margin) + " voxel" + (margin == 1 ? "" : "s") + " is under the " +
         std::to_string(kMinCropMargin) + " measured faithful, and the predicted fidelity leaves out the box's own "
         "error (at 0 the demo U-Net's box moved by NRMSE 0.075 and 4-level U-Nets' by 0.11-0.22 against the whole "
         "volume): leave cropMargin at its default";
}

std::string model_warning(const InversionRequest& r) {
  if (!r.model) return "";
  if (is_phase_network(r)) return phase_warning(*r.model, r.geometry);
  if (r.model->kind == ModelKind::PhysicsLoop && !r.whole_volume) {
    return std::string(r.model->name) +
           " is a physics loop: tiled, the whole loop runs per patch and cannot see the dipole field of distant "
           "sources (off-design); results are approximate";
  }
  if (r.model->kind == ModelKind::NativePatches) {
    return std::string(r.model->name) + " uses its own fixed patching; the tile settings are ignored";
  }
  return "";
}

}  // namespace

std::string inversion_warning(const InversionRequest& r) {
  std::string w = model_warning(r);
  if (on_training_grid_run(r)) {
    const std::string t = training_grid_warning(*r.model, r.geometry, training_request(r).geometry);
    w += (w.empty() ? "" : "; ") + t;
  }
  if (assumes_b0_along_z(r)) {
    const std::string b0 = request_b0_plan(r).warning;
    if (!b0.empty()) w += (w.empty() ? "" : "; ") + b0;
  }
  return w;
}

namespace {

// The plan with its self-check planned (field -> chi networks; what the check adds counted in the plan's memory).
TilePlan with_verification(const InversionRequest& r, std::span<const uint8_t> mask, Target target, TilePlan p) {
  if (!r.verify || !p.feasible) return p;
  auto v = std::make_shared<VerifyRegion>();
  if (r.model && r.model->kind != ModelKind::FieldToChi) {
    v->message = "the self-check covers the field → χ networks; " + std::string(r.model->name) + " is " + model_kind_name(r.model->kind);
  } else if (p.whole_volume && p.crop.cropped) {
    v->message = "the mask's bounding box runs at once as one patch: it differs from the whole-volume run only by the "
                 "network's response to the zeros left out; crop: 'off' runs the whole volume";
  } else if (p.whole_volume) {
    v->message = "the whole volume runs at once: the result is the whole-volume run itself";
  } else {
    *v = plan_verification(r.geometry, mask, request_network(r), target);
  }
  if (v->possible) {
    // The check runs after the tiles: its box's activations replace theirs; its volumes and the data-consistency
    // forward model join the module heap.
    const uint64_t need = saturating_add(saturating_add(p.module_heap_bytes, v->module_heap_bytes),
                                         dipole_workspace_bytes(r.geometry, 2));
    p.module_heap_bytes = wasm_module_heap_bytes(need);
    p.peak_bytes = saturating_add(std::max(p.activation_bytes, v->plan.activation_bytes), p.module_heap_bytes);
  }
  p.verify = std::move(v);
  return p;
}

TilePlan plan_unverified(const InversionRequest& r, std::span<const uint8_t> mask, Target target,
                         std::span<const float> field);

}  // namespace

namespace {

// The plan of r on its grid (the training grid's, the B0-aligned one's, or its own), without the run's threads.
TilePlan plan_on_grid(const InversionRequest& r, std::span<const uint8_t> mask, Target target, std::span<const float> field) {
  validate_mask_not_empty(r.geometry, mask);  // a plan: refused before anything runs
  validate_geometry(r.geometry);
  if (on_training_grid_run(r)) {
    // Planned on the training grid (its dims, the resampled mask), the resampling's volumes on top.
    const InversionRequest t = training_request(r);
    const std::vector<uint8_t> tm = kspace_resample_mask(r.geometry, mask, t.geometry.dims);
    return with_training_grid(r, t.geometry, plan_on_grid(t, tm, target, {}));
  }
  B0Plan b0 = request_b0_plan(r);
  if (!b0.resampled) {
    TilePlan p = with_verification(r, mask, target, plan_unverified(r, mask, target, field));
    p.b0 = std::move(b0);
    return p;
  }
  // The run goes through the B0-aligned grid: planned there (its dims and mask come from the alignment), with the
  // source volume and the resampled χ on top of the aligned run's own volumes.
  const B0Alignment a = b0_alignment(r.geometry, mask);
  InversionRequest aligned = r;
  aligned.geometry = a.aligned;
  const std::vector<uint8_t> aligned_m = aligned_mask(a, mask);
  // The field on the aligned grid is not resampled yet: a network that reads it unmasked is not cropped there.
  if (!request_network(r).masked_input) aligned.crop = false;
  TilePlan p = with_verification(aligned, aligned_m, target, plan_unverified(aligned, aligned_m, target, {}));
  b0 = b0_plan(r.geometry, true, r.b0_align, defaults::kB0AlignThresholdDegrees, defaults::kB0WarnDegrees, a.aligned.dims);
  // Source field (f32) and mask (u8), its spline coefficients (f32), the χ resampled back (f32); the aligned χ copied
  // back in and its spline coefficients (f32 each).
  b0.extra_module_bytes = saturating_add(saturating_mul(r.geometry.voxel_count(), 3 * sizeof(float) + sizeof(uint8_t)),
                                         saturating_mul(a.aligned.voxel_count(), 2 * sizeof(float)));
  if (p.feasible) {
    const uint64_t added = saturating_add(b0.extra_module_bytes, wasm_heap_growth_slack(b0.extra_module_bytes));
    p.module_heap_bytes = saturating_add(p.module_heap_bytes, added);
    p.peak_bytes = saturating_add(p.peak_bytes, added);
  }
  p.b0 = std::move(b0);
  return p;
}

}  // namespace

TilePlan plan_inversion(const InversionRequest& r, std::span<const uint8_t> mask, Target target, std::span<const float> field) {
  TilePlan p = plan_on_grid(r, mask, target, field);
  // The module's threads (the physics loops' and resamplings' FFTs, the volume loops) hold their stacks in its heap.
  if (p.feasible) {
    const uint64_t stacks = wasm_thread_heap_bytes(r.hardware_threads);
    const uint64_t added = saturating_add(stacks, wasm_heap_growth_slack(stacks));
    p.module_heap_bytes = saturating_add(p.module_heap_bytes, added);
    p.peak_bytes = saturating_add(p.peak_bytes, added);
  }
  return p;
}

namespace {

// A plan the auto-planner did not choose runs the request's threads per worker (the schema's default when none).
TilePlan with_threads(TilePlan p, const InversionRequest& r) {
  p.threads_per_worker = r.fixed_threads ? r.fixed_threads : defaults::kThreadsPerWorker;
  return p;
}

TilePlan plan_unverified(const InversionRequest& r, std::span<const uint8_t> mask, Target target,
                         std::span<const float> field) {
  if (is_phase_network(r)) refuse_tiling(r);
  if (is_phase_network(r)) return with_threads(plan_phase(*r.model, r.geometry, mask, r.phase, echo_count(r), target), r);
  const FieldNetwork net = request_network(r);
  if (r.whole_volume || (r.model && r.model->kind == ModelKind::NativePatches)) {
    return with_threads(plan_whole(r.geometry, net, target), r);
  }
  if (!r.auto_tile) return with_threads(plan_tiled(r.geometry, mask, net, r.tile, r.workers, target), r);
  AutoPlanRequest a;
  a.geometry = r.geometry;
  a.network = net;
  a.halo = r.halo_override ? r.halo_override : (r.model ? r.model->default_halo : defaults::kCustomNetworkHalo);
  a.fixed_halo = r.halo_override != 0;
  // Physics loops run the whole loop per patch and cannot blend: they keep the speed-only crop-and-stitch.
  // They run whole whenever that fits (tiled they are off-design: the loop's dipole convolutions see one patch).
  const bool loop = r.model && r.model->kind == ModelKind::PhysicsLoop;
  a.quality = loop ? Quality::Fast : r.quality;
  a.whole_when_fits = loop;
  // Field -> chi networks: the whole-volume candidate is the input's support (the mask's box + a margin) when that
  // is smaller than the volume; physics loops keep the whole volume (their dipole convolutions see its extent).
  a.view_slabs = !r.model || r.model->kind == ModelKind::FieldToChi;
  if (r.crop && a.view_slabs) {
    a.crop = crop_to_support(r.geometry, mask, net, r.crop_margin, field);
    // Over the single-patch limit at the asked margin: the smallest margin measured faithful, when that box fits.
    const uint32_t least = std::min(r.crop_margin, kMinCropMargin);
    if (a.crop.cropped && least < r.crop_margin && !plan_whole(r.geometry, net, target, &a.crop).feasible) {
      const CropBox tighter = crop_to_support(r.geometry, mask, net, least, field);
      if (plan_whole(r.geometry, net, target, &tighter).feasible) a.crop = tighter;
    }
  }
  a.hardware_threads = std::max<uint32_t>(1, r.hardware_threads);
  a.fixed_core = r.fixed_core;
  a.fixed_workers = r.fixed_workers;
  a.fixed_threads = r.fixed_threads;
  a.target = target;
  // A field -> chi network's patch is one call of its graph, whose work per voxel the request may carry: that is its
  // speed at this engine's rate. A physics loop's patch is several calls and more: its registry figure, measured whole.
  SpeedSource source = SpeedSource::Default;
  const bool one_call = !r.model || r.model->kind == ModelKind::FieldToChi;
  const double macs = r.graph_macs_per_voxel > 0 ? r.graph_macs_per_voxel : r.model ? r.model->macs_per_voxel : 0.0;
  if (one_call && macs > 0) {
    a.speed.seconds_per_voxel = macs * kSecondsPerMac;
    source = SpeedSource::Graph;
  } else if (r.model && r.model->seconds_per_voxel > 0) {
    a.speed.seconds_per_voxel = r.model->seconds_per_voxel;
    source = SpeedSource::Registry;
  }
  if (!r.measured_speed.empty()) {
    a.speed = fit_throughput(r.measured_speed, a.speed);
    if (r.measured_start_seconds >= 0) a.speed.worker_start_seconds = r.measured_start_seconds;
    source = SpeedSource::Measured;
  }
  try {
    const AutoPlan chosen = plan_auto(a, mask);
    TilePlan p = chosen.plan;
    p.tile = chosen.tile;
    p.workers = chosen.workers;
    p.threads_per_worker = chosen.threads_per_worker;
    p.estimated_seconds = chosen.estimated_seconds;
    p.estimate_source = speed_source_name(source);
    p.explanation = chosen.explanation;
    p.fidelity_warning = chosen.warning;
    if (p.crop.cropped && p.crop.margin < kMinCropMargin) {
      const std::string w = small_margin_text(p.crop.margin);
      p.fidelity_warning = p.fidelity_warning.empty() ? w : p.fidelity_warning + "; " + w;
    }
    return p;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::BudgetExceeded) throw;
    TilePlan refused;
    refused.message = e.what();
    return refused;
  }
}

}  // namespace

RunReport run_inversion(const InversionRequest& r, std::span<const float> field, std::span<const uint8_t> mask,
                        std::span<PatchRunner* const> networks, const RunOptions& options, std::span<float> chi,
                        std::span<const float> magnitude) {
  if (networks.size() != network_count(r)) {
    throw Error(ErrorCode::InvalidArgument, "this model needs " + std::to_string(network_count(r)) + " network(s), got " +
                                                std::to_string(networks.size()));
  }
  if (is_phase_network(r)) {
    refuse_tiling(r);
    return run_phase_network(*r.model, r.geometry, field, magnitude, mask, r.phase, *networks[0], options, chi);
  }
  if (r.auto_tile) {
    throw Error(ErrorCode::InvalidArgument, "an automatic tile config must be planned first: run the plan's tile and workers");
  }
  if (!magnitude.empty()) throw Error(ErrorCode::InvalidArgument, "a magnitude is only taken by the phase networks (iQSM family)");
  const FieldNetwork net = request_network(r);
  const ModelKind kind = r.model ? r.model->kind : ModelKind::FieldToChi;

  if (on_training_grid_run(r)) {
    // On the network's training grid: field and mask resampled there, the same run on it, χ resampled back.
    validate_volume_sizes(r.geometry, field.size(), mask.size());
    if (chi.size() != r.geometry.voxel_count()) throw Error(ErrorCode::InvalidArgument, "chi must hold the volume's voxel count");
    validate_finite(r.geometry, field);
    const InversionRequest t = training_request(r);
    const std::vector<float> tf = kspace_resample(r.geometry, field, t.geometry.dims, options.threads);
    const std::vector<uint8_t> tm = kspace_resample_mask(r.geometry, mask, t.geometry.dims, options.threads);
    std::vector<float> tchi(t.geometry.voxel_count(), 0.0f);
    const RunReport report = run_inversion(t, tf, tm, networks, options, tchi);
    const std::vector<float> back = from_training_grid(t.geometry, tchi, r.geometry, mask, options.threads);
    std::copy(back.begin(), back.end(), chi.begin());
    return report;
  }

  if (assumes_b0_along_z(r) && request_b0_plan(r).resampled) {
    // Through the B0-aligned grid: the field resampled there (× mask for a network that reads it masked), the same
    // run on it (B0 along its third axis, so no second resampling), χ resampled back at the mask.
    validate_volume_sizes(r.geometry, field.size(), mask.size());
    if (chi.size() != r.geometry.voxel_count()) throw Error(ErrorCode::InvalidArgument, "chi must hold the volume's voxel count");
    const B0Alignment a = b0_alignment(r.geometry, mask);
    InversionRequest aligned = r;
    aligned.geometry = a.aligned;
    const std::vector<uint8_t> aligned_m = aligned_mask(a, mask);
    const std::vector<float> aligned_f = to_aligned_grid(a, field, net.masked_input ? mask : std::span<const uint8_t>{});
    std::vector<float> aligned_chi(a.aligned.voxel_count(), 0.0f);
    const RunReport report = run_inversion(aligned, aligned_f, aligned_m, networks, options, aligned_chi);
    const std::vector<float> back = from_aligned_grid(a, aligned_chi, mask);
    std::copy(back.begin(), back.end(), chi.begin());
    return report;
  }

  if (kind == ModelKind::FieldToChi) {
    return r.whole_volume ? whole_volume_inversion(r.geometry, field, mask, net, *networks[0], options, chi)
                          : tiled_field_inversion(r.geometry, field, mask, net, r.tile, *networks[0], options, chi);
  }

  // Physics loops (whole, or the whole loop per tile) and native patching: the step engine's run, driven by threads.
  validate_geometry(r.geometry);
  validate_volume_sizes(r.geometry, field.size(), mask.size());
  if (chi.size() != r.geometry.voxel_count()) throw Error(ErrorCode::InvalidArgument, "chi must hold the volume's voxel count");
  validate_finite(r.geometry, field);
  const bool whole = r.whole_volume || kind == ModelKind::NativePatches;
  if (!whole) validate_tile_config(r.tile);
  const TilePlan plan = whole ? plan_whole(r.geometry, net, options.target)
                              : plan_tiled(r.geometry, mask, net, r.tile, options.threads, options.target);
  if (!plan.feasible) throw Error(ErrorCode::BudgetExceeded, plan.message);
  const std::unique_ptr<PatchSteps> run = start_run(r, plan, field, mask, {}, chi, options.threads);
  return drive_threaded(*run, networks, options);
}

}  // namespace tessera
