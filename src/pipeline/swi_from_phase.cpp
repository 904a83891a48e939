// SWI and minIP from multi-echo wrapped phase (tessera/pipeline/swi_from_phase.h).
#include "tessera/pipeline/swi_from_phase.h"

#include <algorithm>

#include "tessera/common/budget.h"
#include "tessera/common/error.h"

namespace tessera {

namespace {

// The pipeline's echo-fit and brain-mask options applied to an SWI request.
template <class Set>
void swi_pipeline_option(SwiRequest& request, Set set) {
  PipelineRequest p;
  p.echo_fit = request.echo_fit;
  p.brain_mask = request.brain_mask;
  set(p);
  request.echo_fit = p.echo_fit;
  request.brain_mask = p.brain_mask;
}

}  // namespace

void set_swi_option(SwiRequest& r, std::string_view name, double value) {
  const double v = name.starts_with("swi.") ? checked_option(swi_options(), name, value) : value;
  if (name == "swi.maskPower") r.swi.mask_power = v;
  else if (name == "swi.highPassSigmaXY") r.swi.high_pass_sigma_xy_voxels = v;
  else if (name == "swi.highPassSigmaZ") r.swi.high_pass_sigma_z_voxels = v;
  else if (name == "swi.minIpSlab") r.min_ip_slab_mm = v;
  else if (name == "unwrap" || name.starts_with("brainMask.")) swi_pipeline_option(r, [&](PipelineRequest& p) { set_pipeline_option(p, name, value); });
  else throw Error(ErrorCode::Internal, "set_swi_option: no option '" + std::string(name) + "'");
}

void set_swi_choice(SwiRequest& r, std::string_view name, std::string_view choice) {
  if (name == "swi.paramagneticPhase") {
    if (choice == "positive") r.swi.paramagnetic_positive = true;
    else if (choice == "negative") r.swi.paramagnetic_positive = false;
    else throw Error(ErrorCode::InvalidArgument, "swi.paramagneticPhase must be positive or negative, got '" + std::string(choice) + "'");
  } else if (name == "unwrap" || name.starts_with("brainMask.")) {
    swi_pipeline_option(r, [&](PipelineRequest& p) { set_pipeline_choice(p, name, choice); });
  } else if (name.starts_with("swi.")) {
    throw Error(ErrorCode::InvalidArgument, std::string(name) + " takes a number, got '" + std::string(choice) + "'");
  } else {
    throw Error(ErrorCode::Internal, "set_swi_choice: no option '" + std::string(name) + "'");
  }
}

SwiFromPhase::SwiFromPhase(const Geometry& g, std::span<const float> phase, std::span<const float> magnitude,
                           std::span<const uint8_t> mask, SwiRequest request)
    : geometry_(g), phase_(phase), magnitude_(magnitude), given_mask_(mask), request_(std::move(request)) {
  validate_echo_data(g, phase, magnitude, request_.te_s);
  if (magnitude.empty()) {
    throw Error(ErrorCode::InvalidArgument, "swi: no magnitude given; SWI weights the magnitude of every echo: give it");
  }
  if (!mask.empty() && mask.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "swi: the mask holds " + std::to_string(mask.size()) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(g.voxel_count()));
  }
  validate_mask_not_empty(g, mask);
  validate(request_.swi);
  validate(request_.echo_fit);
  if (mask.empty()) validate(request_.brain_mask);
  min_ip_slices(request_.min_ip_slab_mm, g.voxel_mm[2]);
  request_.echo_fit.keep_unwrapped = true;
  request_.echo_fit.offset = OffsetFit::Free;  // SWI takes the unwrapped echoes, not the fitted field
  const uint32_t echoes = static_cast<uint32_t>(request_.te_s.size());
  const uint32_t swi_steps = echoes + (request_.swi.high_pass_sigma_z_voxels > 0.0 ? 3 : 2) + 1;
  planned_ = (mask.empty() ? 1 : 0) + echo_fit_steps(echoes, request_.echo_fit) + swi_steps + static_cast<uint32_t>(g.dims[2]);
  if (!mask.empty()) {
    result_.mask.assign(mask.begin(), mask.end());
    stage_ = 1;
    current_ = std::make_unique<EchoFit>(geometry_, phase_, magnitude_, request_.te_s, result_.mask, request_.echo_fit,
                                         request_.threads);
  }
}

SwiFromPhase::~SwiFromPhase() = default;

std::string SwiFromPhase::name() const {
  switch (stage_) {
    case 0: return "brain mask";
    case 4: return "SWI";
    default: return current_->name();
  }
}

void SwiFromPhase::step() {
  if (finished()) throw Error(ErrorCode::Internal, "swi: step() after the last step");
  if (stage_ == 0) {
    const std::span<const float> first = magnitude_.first(geometry_.voxel_count());
    result_.mask = brain_mask(geometry_, first, request_.brain_mask, request_.threads);
    ++done_;
    next_stage();
    return;
  }
  current_->step();
  ++done_;
  if (current_->finished()) next_stage();
}

void SwiFromPhase::next_stage() {
  ++stage_;
  if (stage_ == 1) {
    current_ = std::make_unique<EchoFit>(geometry_, phase_, magnitude_, request_.te_s, result_.mask, request_.echo_fit,
                                         request_.threads);
  } else if (stage_ == 2) {
    EchoFitResult fit = static_cast<EchoFit&>(*current_).take_result();
    current_.reset();
    result_.unwrapped_rad = std::move(fit.unwrapped_rad);
    current_ = std::make_unique<Swi>(geometry_, magnitude_, result_.unwrapped_rad, request_.te_s, result_.mask,
                                     request_.swi, request_.threads);
  } else if (stage_ == 3) {
    result_.swi = static_cast<Swi&>(*current_).take_result();
    current_ = std::make_unique<MinIntensityProjection>(geometry_, result_.swi.swi, request_.min_ip_slab_mm,
                                                        request_.threads);
  } else {
    result_.min_ip = static_cast<MinIntensityProjection&>(*current_).take_result();
    current_.reset();
    planned_ = done_;
  }
}

SwiRunResult SwiFromPhase::take_result() {
  if (!finished()) throw Error(ErrorCode::InvalidArgument, "swi: take_result() before the last step");
  if (taken_) throw Error(ErrorCode::InvalidArgument, "swi: take_result() called twice");
  taken_ = true;
  return std::move(result_);
}

uint64_t swi_from_phase_workspace_bytes(const Geometry& g, const SwiRequest& request, bool mask_given) {
  validate_geometry(g);
  const uint64_t n = g.voxel_count();
  const uint32_t echoes = static_cast<uint32_t>(request.te_s.size());
  EchoFitParams fit = request.echo_fit;
  fit.keep_unwrapped = true;
  const uint64_t kept = saturating_add(n, saturating_mul(saturating_mul(n, 4), echoes));  // mask, unwrapped echoes
  uint64_t stage = echo_fit_workspace_bytes(g, std::max<uint32_t>(1, echoes), fit, request.threads);
  if (!mask_given) stage = std::max(stage, brain_mask_workspace_bytes(g, request.brain_mask, request.threads));
  stage = std::max(stage, saturating_add(swi_workspace_bytes(g, request.swi, request.threads),
                                         min_intensity_projection_workspace_bytes(g)));
  return saturating_add(kept, stage);
}

namespace {

// A contrast run's plan from its inputs and workspace (fit_heap), refused with the largest volume that fits.
PipelinePlan contrast_plan(const Geometry& g, const std::string& what, uint32_t echoes, std::vector<std::string> stages,
                           uint64_t input_bytes, uint64_t workspace_bytes, unsigned threads, Target target) {
  PipelinePlan p;
  p.stages = std::move(stages);
  p.input_bytes = input_bytes;
  p.workspace_bytes = workspace_bytes;
  const HeapFit fit = fit_heap(g, p.input_bytes, p.workspace_bytes, threads, target);
  p.module_heap_bytes = fit.module_heap_bytes;
  p.largest_voxels = fit.largest_voxels;
  p.feasible = fit.fits;
  if (!p.feasible) {
    p.message = what + " on " + dims_text(g.dims) + " with " + std::to_string(echoes) + " echoes needs " + format_gb(p.module_heap_bytes) +
                " of the module's heap, over the " + format_gb(WASM_COMPUTE_HEAP_LIMIT_BYTES) +
                " a browser heap can safely hold: the largest volume that fits holds " + std::to_string(p.largest_voxels) +
                " voxels; crop the volume around the head, or give fewer echoes";
  }
  return p;
}

}  // namespace

PipelinePlan plan_swi(const Geometry& g, const SwiRequest& request, bool mask_given, Target target) {
  validate_geometry(g);
  validate(request.swi);
  const uint64_t n = g.voxel_count();
  const uint32_t echoes = static_cast<uint32_t>(std::max<size_t>(1, request.te_s.size()));
  // phase and magnitude of every echo (f32), the mask (u8)
  const uint64_t input = saturating_add(saturating_mul(saturating_mul(n, echoes), 2 * sizeof(float)), n);
  std::vector<std::string> stages;
  if (!mask_given) stages.push_back("brain mask");
  stages.insert(stages.end(), {"echo fit", "SWI", "minIP"});
  return contrast_plan(g, "SWI", echoes, std::move(stages), input, swi_from_phase_workspace_bytes(g, request, mask_given),
                      request.threads, target);
}

PipelinePlan plan_r2star(const Geometry& g, uint32_t echoes, const R2starParams& params, unsigned threads, Target target) {
  validate_geometry(g);
  const uint64_t n = g.voxel_count();
  echoes = std::max<uint32_t>(1, echoes);
  // the magnitude of every echo (f32), the mask (u8)
  const uint64_t input = saturating_add(saturating_mul(saturating_mul(n, echoes), sizeof(float)), n);
  return contrast_plan(g, "R2*", echoes, {"R2*"}, input, r2star_workspace_bytes(g, echoes, params, threads), threads, target);
}

}  // namespace tessera
