#include "tessera/pipeline/pipeline.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tessera/common/error.h"
#include "tessera/common/input_checks.h"
#include "common/message_number.h"
#include "tessera/common/schema.h"
#include "tessera/background/options.h"
#include "tessera/phase/options.h"

namespace tessera {

namespace {

// The pipeline's own option, the choice of background removal (the phase stage's and the background removals' options
// are their layers' tables): {name, unit, default, default text, min, max, min exclusive, integer, help, choices}.
const OptionSpec kPipelineStageOptions[] = {
    {"background", "", 0, background_name(kDefaultBackground), 0, 0, false, false,
     "background field removal: vsharp (Wu 2012; erodes the mask by the smallest radius), pdf (Liu 2011; keeps the "
     "mask), lbv (Zhou 2014; peels lbv.peel mm and a voxel off the mask), ismv (Wen 2014), sharp (Schweser 2011) or resharp (Sun "
     "2014; these three erode the mask by their radius)",
     "vsharp|pdf|lbv|ismv|sharp|resharp"},
};

// A step that runs a function once (the brain mask).
class Once : public Iterative {
 public:
  Once(std::string name, std::function<void()> body) : name_(std::move(name)), body_(std::move(body)) {}
  uint32_t total_steps() const override { return 1; }
  uint32_t steps_done() const override { return done_ ? 1 : 0; }
  bool finished() const override { return done_; }
  void step() override {
    body_();
    done_ = true;
  }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  std::function<void()> body_;
  bool done_ = false;
};

// The optional outputs' steps: SWI (an echo each, a smoothing axis each, the mask), the minIP and R2* (a slice each).
uint32_t also_steps(const Geometry& g, const PipelineRequest& r) {
  const uint32_t slices = static_cast<uint32_t>(g.dims[2]);
  uint32_t steps = 0;
  if (r.also_swi) steps += static_cast<uint32_t>(r.te_s.size()) + (r.swi.high_pass_sigma_z_voxels > 0.0 ? 3 : 2) + 1 + slices;
  if (r.also_r2star) steps += slices;
  return steps;
}

bool pipeline_from_total_field(const PipelineRequest& r) { return r.total_field_units != TotalFieldUnits::None; }

// Hz per unit of a total field at b0_tesla.
double total_field_hz_per_unit(TotalFieldUnits u, double b0_tesla) {
  switch (u) {
    case TotalFieldUnits::Hz: return 1.0;
    case TotalFieldUnits::RadPerS: return 1.0 / (2.0 * 3.14159265358979323846);
    case TotalFieldUnits::Ppm: return kGammaBarMHzPerT * b0_tesla;  // ppm · MHz = Hz
    case TotalFieldUnits::None: break;
  }
  throw Error(ErrorCode::Internal, "no units for a total field");
}

// A method that inverts the total field (TFI) fits the background itself: no background removal before it.
bool pipeline_skips_background(const PipelineRequest& r) { return r.method && method_info(*r.method).total_field; }

uint32_t background_steps(const Geometry& g, const PipelineRequest& r) {
  if (pipeline_skips_background(r)) return 0;
  switch (r.background) {
    case BackgroundRemoval::Vsharp: return static_cast<uint32_t>(vsharp_radii_mm(g.voxel_mm, r.vsharp).size()) + 1;
    case BackgroundRemoval::Pdf: return r.pdf.max_iterations;
    case BackgroundRemoval::Lbv: return r.lbv.max_iterations;
    case BackgroundRemoval::Ismv: return r.ismv.max_iterations;
    case BackgroundRemoval::Sharp: return 2;
    case BackgroundRemoval::Resharp: return r.resharp.max_iterations;
  }
  throw Error(ErrorCode::Internal, "no such background removal");
}

uint64_t background_workspace_bytes(const Geometry& g, const PipelineRequest& r) {
  switch (r.background) {
    case BackgroundRemoval::Vsharp: return vsharp_workspace_bytes(g, r.vsharp, r.threads);
    case BackgroundRemoval::Pdf: return pdf_workspace_bytes(g, r.pdf, r.threads);
    case BackgroundRemoval::Lbv: return lbv_workspace_bytes(g, r.lbv, r.threads);
    case BackgroundRemoval::Ismv: return ismv_workspace_bytes(g, r.ismv, r.threads);
    case BackgroundRemoval::Sharp: return sharp_workspace_bytes(g, r.sharp, r.threads);
    case BackgroundRemoval::Resharp: return resharp_workspace_bytes(g, r.resharp, r.threads);
  }
  throw Error(ErrorCode::Internal, "no such background removal");
}

std::span<const float> first_echo(std::span<const float> magnitude, uint64_t n) {
  return magnitude.empty() ? magnitude : magnitude.first(static_cast<size_t>(n));
}

}  // namespace

std::span<const OptionSpec> pipeline_options() {
  // The phase stage's options up to the brain mask's (their layer's table), the choice of background removal, the
  // background removals' options (their layer's table), then the brain mask's.
  static const std::vector<OptionSpec> all = [] {
    const std::span<const OptionSpec> phase = phase_options();
    const auto mask_rows = std::find_if(phase.begin(), phase.end(), [](const OptionSpec& o) { return o.name.starts_with("brainMask."); });
    std::vector<OptionSpec> v(phase.begin(), mask_rows);
    v.insert(v.end(), std::begin(kPipelineStageOptions), std::end(kPipelineStageOptions));
    const std::span<const OptionSpec> background = background_options();
    v.insert(v.end(), background.begin(), background.end());
    v.insert(v.end(), mask_rows, phase.end());
    return v;
  }();
  return all;
}

TotalFieldUnits total_field_units_from_name(std::string_view name) {
  std::string w(name);
  for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (w == "hz") return TotalFieldUnits::Hz;
  if (w == "rad/s") return TotalFieldUnits::RadPerS;
  if (w == "ppm") return TotalFieldUnits::Ppm;
  throw Error(ErrorCode::InvalidArgument, "the total field's units must be hz, rad/s or ppm, got '" + std::string(name) + "'");
}

std::vector<float> total_field_to_ppm(std::span<const float> field, TotalFieldUnits units, double b0_tesla) {
  if (units == TotalFieldUnits::Ppm) {
    hz_to_ppm(0.0, b0_tesla);  // B0's check
    return std::vector<float>(field.begin(), field.end());
  }
  const double to_hz = total_field_hz_per_unit(units, b0_tesla);
  std::vector<float> hz(field.size());
  for (size_t i = 0; i < field.size(); ++i) hz[i] = static_cast<float>(static_cast<double>(field[i]) * to_hz);
  return units == TotalFieldUnits::Hz ? hz_to_ppm(field, b0_tesla) : hz_to_ppm(hz, b0_tesla);
}

std::string implausible_total_field_text(std::span<const float> total_ppm, std::span<const uint8_t> mask, TotalFieldUnits units,
                                         double b0_tesla) {
  uint64_t bad = 0;
  for (size_t i = 0; i < mask.size(); ++i) bad += mask[i] && !std::isfinite(total_ppm[i]);
  if (bad) {
    return "the total field holds " + std::to_string(bad) + " NaN or infinite value(s) inside the mask: the field map is "
           "undefined there (a vendor map's masked-out voxels?); give a mask that leaves them out, or fill them";
  }
  const RobustRange r = robust_range(total_ppm, mask);
  const double reach = std::max(std::abs(r.p1), std::abs(r.p99));
  if (reach <= kMaxTotalFieldPpm) return {};
  const double hz_per_ppm = kGammaBarMHzPerT * b0_tesla;
  const std::string given(total_field_units_name(units));
  std::string likely;
  if (units == TotalFieldUnits::Ppm) {
    likely = reach / hz_per_ppm <= kMaxTotalFieldPpm ? "Hz (--units hz; API totalFieldUnits: 'hz')"
                                                     : "rad/s (--units rad/s; API totalFieldUnits: 'rad/s')";
  } else if (units == TotalFieldUnits::Hz) {
    likely = "rad/s (--units rad/s; API totalFieldUnits: 'rad/s'), or B0 is not " + message_number(b0_tesla) + " T";
  } else {
    likely = "another unit, or B0 is not " + message_number(b0_tesla) + " T";
  }
  return "the total field, given in " + given + " at B0 " + message_number(b0_tesla) + " T, spans [" + message_number(r.p1, 4) +
         ", " + message_number(r.p99, 4) + "] ppm inside the mask (1st–99th percentile), beyond the ±" +
         message_number(kMaxTotalFieldPpm) + " ppm a head's total field reaches (1 ppm = " + message_number(hz_per_ppm, 4) +
         " Hz here): it looks like " + likely + ". State the field's units";
}

double mask_background_share(std::span<const float> magnitude, std::span<const uint8_t> mask, const BrainMaskParams& params) {
  const std::span<const float> first = magnitude.first(mask.size());
  const double t = magnitude_threshold(first, params);
  uint64_t inside = 0, dark = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) continue;
    ++inside;
    dark += static_cast<double>(first[i]) <= t;
  }
  return inside ? static_cast<double>(dark) / static_cast<double>(inside) : 0.0;
}

void set_pipeline_option(PipelineRequest& r, std::string_view name, double value) {
  if (name.starts_with("swi.")) {
    const OptionSpec& o = find_option(swi_options(), name);
    if (!o.choices.empty()) throw word_refusal(o, number_text(value));  // a worded option given a number
    const double v = checked_value(o, value);
    if (name == "swi.maskPower") r.swi.mask_power = v;
    else if (name == "swi.highPassSigmaXY") r.swi.high_pass_sigma_xy_voxels = v;
    else if (name == "swi.highPassSigmaZ") r.swi.high_pass_sigma_z_voxels = v;
    else if (name == "swi.minIpSlab") r.min_ip_slab_mm = v;
    else throw Error(ErrorCode::Internal, "no numeric SWI option '" + std::string(name) + "'");
    return;
  }
  if (name.starts_with("r2star.")) throw word_refusal(find_option(r2star_options(), name), number_text(value));
  const double v = checked_option(pipeline_options(), name, value);
  if (name == "vsharp.maxRadius") r.vsharp.max_radius_mm = v;
  else if (name == "vsharp.minRadius") r.vsharp.min_radius_voxels = v;
  else if (name == "vsharp.threshold") r.vsharp.threshold = v;
  else if (name == "pdf.maxIterations") r.pdf.max_iterations = static_cast<uint32_t>(v);
  else if (name == "pdf.padVoxels") r.pdf.pad_voxels = static_cast<uint32_t>(v);
  else if (name == "lbv.tolerance") r.lbv.tolerance = v;
  else if (name == "lbv.maxIterations") r.lbv.max_iterations = static_cast<uint32_t>(v);
  else if (name == "lbv.peel") r.lbv.peel_mm = v;
  else if (name == "ismv.radius") r.ismv.radius_mm = v;
  else if (name == "ismv.tolerance") r.ismv.tolerance = v;
  else if (name == "ismv.maxIterations") r.ismv.max_iterations = static_cast<uint32_t>(v);
  else if (name == "sharp.radius") r.sharp.radius_mm = v;
  else if (name == "sharp.threshold") r.sharp.threshold = v;
  else if (name == "resharp.radius") r.resharp.radius_mm = v;
  else if (name == "resharp.lambda") r.resharp.lambda = v;
  else if (name == "resharp.maxIterations") r.resharp.max_iterations = static_cast<uint32_t>(v);
  else if (name == "resharp.tolerance") r.resharp.tolerance = v;
  else if (name == "resharp.minKeptShare") r.resharp.min_kept_share = v;
  else if (name == "brainMask.erosion") r.brain_mask.erosion_mm = v;
  else if (name == "fitResidualLimit") r.fit_residual_limit = v;
  else if (name == "fitOffsetSigma") r.echo_fit.offset_sigma_mm = v;
  else throw Error(ErrorCode::Internal, "no numeric pipeline option '" + std::string(name) + "'");
}

void set_pipeline_also(PipelineRequest& r, std::string_view name) {
  if (name == "swi") r.also_swi = true;
  else if (name == "r2star") r.also_r2star = true;
  else throw Error(ErrorCode::InvalidArgument, "also: the pipeline's optional outputs are swi and r2star, got '" + std::string(name) + "'");
}

void set_pipeline_choice(PipelineRequest& r, std::string_view name, std::string_view choice) {
  if (name == "swi.paramagneticPhase") {
    if (choice == "positive") r.swi.paramagnetic_positive = true;
    else if (choice == "negative") r.swi.paramagnetic_positive = false;
    else throw word_refusal(find_option(swi_options(), name), choice);
    return;
  }
  if (name.starts_with("swi.")) throw word_refusal(find_option(swi_options(), name), choice);
  if (name == "r2star.method") {
    r.r2star.method = r2star_method_from_name(choice);
    return;
  }
  const OptionSpec& o = find_option(pipeline_options(), name);
  if (name == "unwrap" && choice == "region-growing") r.echo_fit.unwrapper = Unwrapper::RegionGrowing;
  else if (name == "unwrap" && choice == "laplacian") r.echo_fit.unwrapper = Unwrapper::Laplacian;
  else if (name == "fitOffset" && choice == "smooth") r.echo_fit.offset = OffsetFit::Smooth;
  else if (name == "fitOffset" && choice == "free") r.echo_fit.offset = OffsetFit::Free;
  else if (name == "background" && choice == "vsharp") r.background = BackgroundRemoval::Vsharp;
  else if (name == "background" && choice == "pdf") r.background = BackgroundRemoval::Pdf;
  else if (name == "background" && choice == "lbv") r.background = BackgroundRemoval::Lbv;
  else if (name == "background" && choice == "ismv") r.background = BackgroundRemoval::Ismv;
  else if (name == "background" && choice == "sharp") r.background = BackgroundRemoval::Sharp;
  else if (name == "background" && choice == "resharp") r.background = BackgroundRemoval::Resharp;
  else if (name == "brainMask.threshold" && choice == "otsu") r.brain_mask.threshold = MaskThreshold::Otsu;
  else if (name == "brainMask.threshold" && choice == "robust") r.brain_mask.threshold = MaskThreshold::RobustRange;
  else throw word_refusal(o, choice);  // a word for a number ("NaN"), or not one of the choices
}

Pipeline::Pipeline(const Geometry& g, std::span<const float> phase, std::span<const float> magnitude,
                   std::span<const uint8_t> mask, PipelineRequest request)
    : geometry_(g), phase_(phase), magnitude_(magnitude), given_mask_(mask), request_(std::move(request)) {
  const bool from_total = pipeline_from_total_field(request_);
  if (from_total) {
    if (request_.phase_difference) {
      throw Error(ErrorCode::InvalidArgument, "give a total field map or a phase difference with its ΔTE, not both");
    }
    validate_geometry(g);
    const uint64_t voxels = g.voxel_count();
    if (phase.size() != voxels) {
      throw Error(ErrorCode::InvalidArgument, "the total field holds " + std::to_string(phase.size()) + " values but the volume " +
                                                  dims_text(g.dims) + " has " + std::to_string(voxels) +
                                                  " voxels: give one 3D field map (not per-echo phase)");
    }
    if (!magnitude.empty() && magnitude.size() != voxels) {
      throw Error(ErrorCode::InvalidArgument, "with a total field the magnitude is one volume of " + std::to_string(voxels) +
                                                  " voxels, got " + std::to_string(magnitude.size()) + " values: give one echo's magnitude");
    }
  } else {
    if (request_.phase_difference && request_.te_s.size() != 1) {
      throw Error(ErrorCode::InvalidArgument, "a phase difference has one ΔTE = TE2 − TE1 (seconds), got " + std::to_string(request_.te_s.size()) +
                                                  " echo times: give the difference of the two echo times");
    }
    validate_echo_data(g, phase, magnitude, request_.te_s);
  }
  if (!(std::isfinite(request_.b0_tesla) && request_.b0_tesla > 0)) checked_option(acquisition_options(), "b0", request_.b0_tesla);
  if (!from_total) validate(request_.echo_fit);
  validate(request_.brain_mask);
  validate(request_.vsharp);
  validate(request_.pdf);
  validate(request_.lbv);
  validate(request_.ismv);
  validate(request_.sharp);
  validate(request_.resharp);
  validate_dipole_extent(g);
  const uint64_t n = g.voxel_count();
  if (!mask.empty()) {
    validate_volume_sizes(g, n, mask.size());
    validate_mask_not_empty(g, mask);
  } else if (magnitude.empty()) {
    throw Error(ErrorCode::InvalidArgument, "no mask and no magnitude: give a brain mask, or the magnitude to make one from");
  }
  if (std::string w = voxel_size_warning(g); !w.empty()) result_.warnings.push_back(std::move(w));
  if (!mask.empty() && !magnitude.empty()) {
    // A given mask that reaches outside the tissue: its share of voxels as dark as air, noise or bone.
    const double share = mask_background_share(magnitude, mask, request_.brain_mask);
    const std::string what = message_number(100.0 * share, 3) + " % of the mask's voxels have a magnitude at or below the tissue threshold (" +
                             "air, noise or bone)";
    if (share > kMaskBackgroundRefuseShare) {
      throw Error(ErrorCode::InvalidArgument, what + ": the mask is mostly outside the head, and χ there would be made of "
                                                     "noise. Give a brain mask, or leave the mask out to make one from the magnitude");
    }
    if (share > kMaskBackgroundWarnShare) {
      result_.warnings.push_back(what + ": the mask reaches outside the brain, where the phase is noise and the field cannot "
                                        "be trusted; χ near its edge will be wrong. Give a tighter brain mask (or leave it out "
                                        "to make one from the magnitude)");
    }
  }
  if (request_.method && method_info(*request_.method).needs_magnitude && magnitude.empty()) {
    throw Error(ErrorCode::InvalidArgument, std::string(method_info(*request_.method).title) +
                                                " needs the magnitude (its edge prior comes from it): give magnitude, or choose another method");
  }
  if (request_.also_swi || request_.also_r2star) {
    const char* what = request_.also_swi ? "SWI" : "R2*";
    if (from_total) {
      throw Error(ErrorCode::InvalidArgument, std::string(what) + " (also) needs every echo's phase and magnitude, not a total field map: "
                                                                  "give phase with te, or leave also out");
    }
    if (magnitude.empty()) {
      throw Error(ErrorCode::InvalidArgument, std::string(what) + " (also) needs the magnitude of every echo: give magnitude, or leave also out");
    }
    validate(request_.swi);
    min_ip_slices(request_.min_ip_slab_mm, g.voxel_mm[2]);
    validate(request_.r2star);
    if (request_.also_r2star && request_.r2star.method == R2starMethod::Arlo) validate_arlo_echoes(request_.te_s);
    if (request_.also_r2star && request_.te_s.size() < 2) {
      throw Error(ErrorCode::InvalidArgument, "R2* (also) needs at least 2 echoes, got 1: leave r2star out of also");
    }
  }
  request_.echo_fit.keep_unwrapped = true;
  planned_ = (mask.empty() ? 1 : 0) + (from_total ? 0 : echo_fit_steps(static_cast<uint32_t>(std::max<size_t>(1, request_.te_s.size())), request_.echo_fit)) + background_steps(g, request_) +
             (request_.method ? method_steps(*request_.method, request_.method_params) : 0) + also_steps(g, request_);
  next_stage();
}

Pipeline::~Pipeline() = default;

uint32_t Pipeline::total_steps() const { return std::max(planned_, done_); }

std::string Pipeline::name() const { return finished_ ? "pipeline" : current_name_; }

void Pipeline::next_stage() {
  const Geometry& g = geometry_;
  const unsigned threads = request_.threads;
  current_.reset();
  for (;;) {
    ++stage_;
    if (stage_ == 1) {  // the brain mask
      if (!given_mask_.empty()) {
        result_.mask.assign(given_mask_.begin(), given_mask_.end());
        continue;
      }
      current_ = std::make_unique<Once>("brain mask", [this] {
        result_.mask = brain_mask(geometry_, first_echo(magnitude_, geometry_.voxel_count()), request_.brain_mask, request_.threads);
      });
    } else if (stage_ == 2) {
      if (pipeline_from_total_field(request_)) {  // the given total field in ppm on the mask: no echo fit
        current_name_ = "total field";  // a field refused here is named by it
        start_from_total_field();
        continue;
      }
      current_name_ = "echo fit";  // a stage refused as it starts is named by it
      current_ = std::make_unique<EchoFit>(g, phase_, magnitude_, request_.te_s, result_.mask, request_.echo_fit, threads);
    } else if (stage_ == 3) {
      if (pipeline_skips_background(request_)) {  // the method gets the total field on the fit mask
        result_.local_mask = result_.fit_mask;
        continue;
      }
      current_name_ = std::string(background_title(request_.background));
      const std::span<const float> f = result_.total_ppm;
      const std::span<const uint8_t> m = result_.fit_mask;
      switch (request_.background) {
        case BackgroundRemoval::Vsharp: current_ = std::make_unique<VSharp>(g, f, m, request_.vsharp, threads); break;
        case BackgroundRemoval::Pdf: current_ = std::make_unique<Pdf>(g, f, m, std::span<const float>{}, request_.pdf, threads); break;
        case BackgroundRemoval::Lbv: current_ = std::make_unique<Lbv>(g, f, m, request_.lbv, threads); break;
        case BackgroundRemoval::Ismv: current_ = std::make_unique<Ismv>(g, f, m, request_.ismv, threads); break;
        case BackgroundRemoval::Sharp: current_ = std::make_unique<Sharp>(g, f, m, request_.sharp, threads); break;
        case BackgroundRemoval::Resharp: current_ = std::make_unique<Resharp>(g, f, m, request_.resharp, threads); break;
      }
    } else if (stage_ == 4) {
      if (!request_.method) continue;
      current_name_ = std::string(method_info(*request_.method).title);
      const bool total = pipeline_skips_background(request_);
      current_ = start_method(*request_.method, g, total ? result_.total_ppm : result_.local_ppm, result_.local_mask,
                              first_echo(magnitude_, g.voxel_count()), request_.method_params, threads);
    } else if (stage_ == 5) {  // SWI on the unwrapped echoes in the brain mask
      if (!request_.also_swi) continue;
      current_ = std::make_unique<Swi>(g, magnitude_, result_.unwrapped_rad, request_.te_s, result_.mask, request_.swi, threads);
    } else if (stage_ == 6) {
      if (!request_.also_swi) continue;
      current_ = std::make_unique<MinIntensityProjection>(g, result_.swi.swi, request_.min_ip_slab_mm, threads);
    } else if (stage_ == 7) {
      if (!request_.also_r2star) continue;
      current_ = std::make_unique<R2star>(g, magnitude_, request_.te_s, result_.mask, request_.r2star, threads);
    } else {
      finished_ = true;
      return;
    }
    current_name_ = current_->name();
    return;
  }
}

void Pipeline::start_from_total_field() {
  std::vector<float> ppm = total_field_to_ppm(phase_, request_.total_field_units, request_.b0_tesla);
  if (const std::string refusal = implausible_total_field_text(ppm, result_.mask, request_.total_field_units, request_.b0_tesla);
      !refusal.empty()) {
    throw Error(ErrorCode::InvalidArgument, refusal);
  }
  // Outside the mask the map may hold anything (NaN where a vendor masked it): no stage reads it there.
  for (size_t i = 0; i < ppm.size(); ++i) {
    if (!result_.mask[i]) ppm[i] = 0.0f;
  }
  const double hz_per_ppm = kGammaBarMHzPerT * request_.b0_tesla;
  result_.field_hz.resize(ppm.size());
  for (size_t i = 0; i < ppm.size(); ++i) result_.field_hz[i] = static_cast<float>(static_cast<double>(ppm[i]) * hz_per_ppm);
  result_.total_ppm = std::move(ppm);
  result_.fit_mask = result_.mask;
}

void Pipeline::step() {
  if (finished_) throw Error(ErrorCode::Internal, "the pipeline has finished");
  try {
    advance();
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Cancelled) throw;
    throw Error(e.code(), "the " + current_name_ + " stage failed: " + e.what());
  }
}

void Pipeline::advance() {
  current_->step();
  ++done_;
  if (!current_->finished()) return;
  // The stage's outputs, then the next stage.
  if (stage_ == 2) {
    EchoFitResult fit = static_cast<EchoFit&>(*current_).take_result();
    result_.field_hz = std::move(fit.field_hz);
    result_.offset_rad = std::move(fit.offset_rad);
    result_.unwrapped_rad = std::move(fit.unwrapped_rad);
    result_.total_ppm = hz_to_ppm(result_.field_hz, request_.b0_tesla);
    result_.residual_rad = std::move(fit.residual_rad);
    result_.fit_mask = result_.mask;
    uint64_t kept = 0;
    for (size_t i = 0; i < result_.fit_mask.size(); ++i) {
      result_.fit_mask[i] = result_.fit_mask[i] && result_.residual_rad[i] <= request_.fit_residual_limit;
      kept += result_.fit_mask[i];
    }
    if (kept == 0) {
      throw Error(ErrorCode::InvalidArgument, "the echo fit's residual is above fitResidualLimit (" + number_text(request_.fit_residual_limit) +
                                                  " rad) everywhere in the mask: check the echo times and that the phase is of these echoes");
    }
    uint64_t given = 0;
    for (uint8_t m : result_.mask) given += m != 0;
    std::string w = left_out_warning("the echo fit", kept, given,
                                     "their echoes' fit residual is above fitResidualLimit (" + number_text(request_.fit_residual_limit) +
                                         " rad): a phase the unwrapping could not make consistent (next to air, noise outside the "
                                         "head, or echo times that are not the phase's); they are left out of the background "
                                         "removal and χ");
    if (!w.empty()) result_.warnings.push_back(std::move(w));
  } else if (stage_ == 3) {
    LocalField local;
    switch (request_.background) {
      case BackgroundRemoval::Vsharp: local = static_cast<VSharp&>(*current_).take_result(); break;
      case BackgroundRemoval::Pdf: local = static_cast<Pdf&>(*current_).take_result(); break;
      case BackgroundRemoval::Lbv: local = static_cast<Lbv&>(*current_).take_result(); break;
      case BackgroundRemoval::Ismv: local = static_cast<Ismv&>(*current_).take_result(); break;
      case BackgroundRemoval::Sharp: local = static_cast<Sharp&>(*current_).take_result(); break;
      case BackgroundRemoval::Resharp: {
        auto& resharp = static_cast<Resharp&>(*current_);
        if (resharp.radius_mm() > request_.resharp.radius_mm) {
          result_.warnings.push_back(
              "RESHARP's radius (resharp.radius " + number_text(request_.resharp.radius_mm) + " mm) is under the voxel "
              "edge, where its sphere holds only its centre: it ran with " + message_number(resharp.radius_mm(), 3) +
              " mm (2 voxels of the largest edge)");
        } else if (resharp.radius_mm() < request_.resharp.radius_mm) {
          result_.warnings.push_back(
              "RESHARP's radius (resharp.radius " + number_text(request_.resharp.radius_mm) + " mm) would keep less than " +
              number_text(100.0 * request_.resharp.min_kept_share) + " % of the mask (a small head or a slab that cuts the "
              "brain): it ran with " + message_number(resharp.radius_mm(), 3) + " mm, which keeps more of the mask at the "
              "cost of a less accurate local field near its edge (resharp.minKeptShare 0 keeps the radius)");
        }
        local = resharp.take_result();
        break;
      }
    }
    result_.local_ppm = std::move(local.field);
    result_.local_mask = std::move(local.mask);
    uint64_t given = 0, kept = 0;
    for (size_t i = 0; i < result_.local_mask.size(); ++i) given += result_.fit_mask[i] != 0, kept += result_.local_mask[i] != 0;
    const std::string why = request_.background == BackgroundRemoval::Vsharp
                                ? "V-SHARP erodes the mask by its smallest sphere (vsharp.minRadius " +
                                      number_text(request_.vsharp.min_radius_voxels) + " voxels), where the local field is not defined"
                                : request_.background == BackgroundRemoval::Pdf
                                      ? std::string("PDF left them without a local field")
                                      : current_name_ + " defines the local field only on the mask it keeps (its erosion of the mask's border)";
    std::string w = left_out_warning(current_name_, kept, given, why, kBackgroundLeftOutWarnShare);
    if (!w.empty()) result_.warnings.push_back(std::move(w));
  } else if (stage_ == 4) {
    result_.chi = static_cast<MethodComputation&>(*current_).take_result();
  } else if (stage_ == 5) {
    result_.swi = static_cast<Swi&>(*current_).take_result();
  } else if (stage_ == 6) {
    result_.min_ip = static_cast<MinIntensityProjection&>(*current_).take_result();
  } else if (stage_ == 7) {
    result_.r2star = static_cast<R2star&>(*current_).take_result();
  }
  // Planned steps of a stage that converged early are not waited for.
  next_stage();
}

PipelineResult Pipeline::take_result() {
  if (!finished_) throw Error(ErrorCode::Internal, "the pipeline has not finished");
  return std::move(result_);
}

uint64_t pipeline_workspace_bytes(const Geometry& g, const PipelineRequest& r, bool mask_given) {
  const uint64_t n = g.voxel_count();
  const bool from_total = pipeline_from_total_field(r);
  const uint64_t echoes = r.te_s.size();
  const uint64_t f32 = saturating_mul(n, sizeof(float));
  EchoFitParams fit = r.echo_fit;
  fit.keep_unwrapped = true;
  // The stages run one after another: each one's peak is what the earlier stages kept plus its own workspace.
  // Brain mask (when none is given): its workspace, its result mask included.
  uint64_t peak = mask_given ? 0 : brain_mask_workspace_bytes(g, r.brain_mask, r.threads);
  // Echo fit over the mask (u8): its workspace and the unwrapped echoes it keeps; from a total field, the ppm and Hz.
  // Its peak (the smooth offset's refit) allocates float volumes after the echoes' temporaries were freed: the
  // allocator (emmalloc) grows the heap by a whole request when the free piece at the heap's top is smaller, so the top
  // may hold up to one more float volume unused.
  const uint64_t fit_stage = from_total ? saturating_mul(f32, 2)
                                        : saturating_add(echo_fit_workspace_bytes(g, static_cast<uint32_t>(echoes), fit, r.threads),
                                                         saturating_mul(f32, echoes + 1));
  peak = std::max(peak, saturating_add(n, fit_stage));
  // Kept after it: mask, fit mask (u8); unwrapped echoes, offset, field Hz, total ppm, residual (f32); from a total
  // field, field Hz and total ppm.
  uint64_t kept = saturating_add(saturating_mul(n, 2), saturating_mul(f32, from_total ? 2 : echoes + 4));
  if (!pipeline_skips_background(r)) {
    peak = std::max(peak, saturating_add(kept, background_workspace_bytes(g, r)));
    kept = saturating_add(kept, saturating_add(n, f32));  // local mask (u8), local field (f32)
  } else {
    kept = saturating_add(kept, n);  // the local mask: the fit mask's copy
  }
  // The method: its workspace and χ.
  if (r.method) {
    peak = std::max(peak, saturating_add(kept, saturating_add(method_workspace_bytes(*r.method, g, r.method_params, r.threads), f32)));
    kept = saturating_add(kept, f32);  // χ
  }
  // The optional outputs after it: SWI (its workspace and the minIP's), then its four maps and the minIP kept (20·N);
  // R2* (its workspace), then its four maps kept (16·N).
  if (r.also_swi) {
    peak = std::max(peak, saturating_add(kept, saturating_add(swi_workspace_bytes(g, r.swi, r.threads),
                                                              min_intensity_projection_workspace_bytes(g))));
    kept = saturating_add(kept, saturating_mul(f32, 5));
  }
  if (r.also_r2star) {
    peak = std::max(peak, saturating_add(kept, r2star_workspace_bytes(g, static_cast<uint32_t>(echoes), r.r2star, r.threads)));
    kept = saturating_add(kept, saturating_mul(f32, 4));
  }
  return std::max(peak, kept);
}

PipelinePlan plan_pipeline(const Geometry& g, const PipelineRequest& r, bool mask_given, bool magnitude, Target target) {
  validate_geometry(g);
  const uint64_t n = g.voxel_count();
  const bool from_total = pipeline_from_total_field(r);
  const uint64_t echoes = from_total ? 1 : std::max<uint64_t>(1, r.te_s.size());
  PipelinePlan p;
  if (!mask_given) p.stages.push_back("brain mask");
  if (!from_total) p.stages.push_back("echo fit");
  if (!pipeline_skips_background(r)) p.stages.emplace_back(background_title(r.background));
  if (r.method) p.stages.push_back(std::string(method_info(*r.method).title));
  if (r.method) p.method = std::string(method_info(*r.method).name);
  if (r.also_swi) p.stages.insert(p.stages.end(), {"SWI", "minIP"});
  if (r.also_r2star) p.stages.push_back("R2*");
  // phase (or the total field) and magnitude (f32 per echo); the volume's mask and the plan's (u8); the run's χ (f32,
  // held from its start)
  p.input_bytes = saturating_add(saturating_mul(n, echoes * sizeof(float) * (magnitude ? 2 : 1)), saturating_mul(n, 2 + sizeof(float)));
  p.workspace_bytes = pipeline_workspace_bytes(g, r, mask_given);
  const HeapFit fit = fit_heap(g, p.input_bytes, p.workspace_bytes, r.threads, target);
  p.module_heap_bytes = fit.module_heap_bytes;
  p.largest_voxels = fit.largest_voxels;
  p.largest_dims = fit.largest_dims;
  p.feasible = fit.fits;
  if (!p.feasible) {
    const uint64_t inputs_per_voxel = p.input_bytes / n;
    p.largest_dims = largest_fitting_crop(g, fit.largest_dims, [&](const Geometry& c) {
      return fit_heap(c, saturating_mul(c.voxel_count(), inputs_per_voxel), pipeline_workspace_bytes(c, r, mask_given), r.threads, target).fits;
    });
    p.largest_voxels = std::min(p.largest_voxels, static_cast<uint64_t>(p.largest_dims[0] * p.largest_dims[1] * p.largest_dims[2]));
  }
  if (!p.feasible) {
    const std::string input = from_total ? std::string("from a total field") : "with " + std::to_string(echoes) + " echoes";
    p.message = "the pipeline on " + dims_text(g.dims) + " " + input + " needs " +
                format_gb(p.module_heap_bytes) + " of the module's heap, over the " + format_gb(WASM_COMPUTE_HEAP_LIMIT_BYTES) +
                " a browser heap can safely hold: the largest crop that fits is about " + dims_text(p.largest_dims) + " (" +
                std::to_string(p.largest_voxels) + " voxels); crop the volume around the head" + (from_total ? "" : ", or give fewer echoes");
  }
  return p;
}

}  // namespace tessera
