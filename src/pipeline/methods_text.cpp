// A pipeline run's methods text (tessera/pipeline/methods_text.h).
#include "tessera/pipeline/methods_text.h"

#include <algorithm>

#include "common/message_number.h"
#include "tessera/common/error.h"
#include "tessera/phase/unwrap.h"
#include "tessera/registry/registry.h"

namespace tessera {

namespace {

// The steps, their references numbered by first citation.
class MethodsWriter {
 public:
  MethodsStep& add(std::string stage, std::string title) {
    out_.steps.push_back({std::move(stage), std::move(title), {}, {}, {}});
    return out_.steps.back();
  }
  // The number of reference, added to the list on its first citation.
  unsigned cite(MethodsStep& step, std::string_view reference) {
    auto it = std::find(out_.references.begin(), out_.references.end(), reference);
    const unsigned n = static_cast<unsigned>(it - out_.references.begin()) + 1;
    if (it == out_.references.end()) out_.references.emplace_back(reference);
    if (std::find(step.references.begin(), step.references.end(), n) == step.references.end()) step.references.push_back(n);
    return n;
  }
  // "Wu et al. 2012 [3]"
  std::string cited(MethodsStep& step, const Citation& c) { return std::string(c.cite) + " [" + std::to_string(cite(step, c.reference)) + "]"; }
  MethodsText take() {
    for (const MethodsStep& s : out_.steps) out_.text += (out_.text.empty() ? "" : " ") + s.sentence;
    return std::move(out_);
  }

 private:
  MethodsText out_;
};

// A value with its unit: "18 voxels", "0.05", "4 mm".
std::string methods_value(double v, std::string_view unit) { return number_text(v) + (unit.empty() ? "" : " " + std::string(unit)); }

// The step's parameter from a schema table: (name, value with the table's unit).
void methods_param(MethodsStep& step, std::span<const OptionSpec> table, std::string_view name, double v) {
  step.parameters.emplace_back(std::string(name), methods_value(v, find_option(table, name).unit));
}

// "a 6 mm radius, λ 0.0001": the parameters in words, "name value" joined.
std::string methods_params_text(const MethodsStep& step) {
  std::string s;
  for (const auto& [name, value] : step.parameters) {
    const size_t dot = name.find('.');
    s += (s.empty() ? "" : ", ") + (dot == std::string::npos ? name : name.substr(dot + 1)) + " " + value;
  }
  return s;
}

const Citation& background_citation(BackgroundRemoval b) {
  switch (b) {
    case BackgroundRemoval::Vsharp: return kVsharpCitation;
    case BackgroundRemoval::Pdf: return kPdfCitation;
    case BackgroundRemoval::Lbv: return kLbvCitation;
    case BackgroundRemoval::Ismv: return kIsmvCitation;
    case BackgroundRemoval::Sharp: return kSharpCitation;
    case BackgroundRemoval::Resharp: return kResharpCitation;
  }
  throw Error(ErrorCode::Internal, "no such background removal");
}

// The background removal's title and parameters.
void background_step(MethodsWriter& w, const PipelineRequest& r) {
  const std::span<const OptionSpec> t = pipeline_options();
  MethodsStep& s = w.add("background removal", std::string(background_title(r.background)));
  switch (r.background) {
    case BackgroundRemoval::Vsharp:
      methods_param(s, t, "vsharp.maxRadius", r.vsharp.max_radius_mm);
      methods_param(s, t, "vsharp.minRadius", r.vsharp.min_radius_voxels);
      methods_param(s, t, "vsharp.threshold", r.vsharp.threshold);
      break;
    case BackgroundRemoval::Pdf:
      methods_param(s, t, "pdf.maxIterations", r.pdf.max_iterations);
      methods_param(s, t, "pdf.padVoxels", r.pdf.pad_voxels);
      break;
    case BackgroundRemoval::Lbv:
      methods_param(s, t, "lbv.tolerance", r.lbv.tolerance);
      methods_param(s, t, "lbv.maxIterations", r.lbv.max_iterations);
      methods_param(s, t, "lbv.peel", r.lbv.peel_mm);
      break;
    case BackgroundRemoval::Ismv:
      methods_param(s, t, "ismv.radius", r.ismv.radius_mm);
      methods_param(s, t, "ismv.tolerance", r.ismv.tolerance);
      methods_param(s, t, "ismv.maxIterations", r.ismv.max_iterations);
      break;
    case BackgroundRemoval::Sharp:
      methods_param(s, t, "sharp.radius", r.sharp.radius_mm);
      methods_param(s, t, "sharp.threshold", r.sharp.threshold);
      break;
    case BackgroundRemoval::Resharp:
      methods_param(s, t, "resharp.radius", r.resharp.radius_mm);
      methods_param(s, t, "resharp.lambda", r.resharp.lambda);
      methods_param(s, t, "resharp.maxIterations", r.resharp.max_iterations);
      methods_param(s, t, "resharp.tolerance", r.resharp.tolerance);
      methods_param(s, t, "resharp.minKeptShare", r.resharp.min_kept_share);
      break;
  }
  s.sentence = "The background field was removed with " + s.title + " (" + w.cited(s, background_citation(r.background)) + "; " +
               methods_params_text(s) + ").";
}

// The method's parameters from MethodParams, worded ones by their choice.
void method_step(MethodsWriter& w, const PipelineRequest& r) {
  const MethodInfo& info = method_info(*r.method);
  MethodsStep& s = w.add("inversion", std::string(info.title));
  const std::string prefix = std::string(info.name) + ".";
  for (const OptionSpec& o : method_options()) {
    if (!o.name.starts_with(prefix)) continue;
    const double v = r.method_params.get(o.name);
    if (o.choices.empty()) {
      s.parameters.emplace_back(std::string(o.name), methods_value(v, o.unit));
    } else {
      const std::vector<std::string_view> words = option_choices(o);
      s.parameters.emplace_back(std::string(o.name), std::string(words.at(static_cast<size_t>(v))));
    }
  }
  std::string papers;
  for (const Citation& c : info.papers) papers += (papers.empty() ? "" : ", ") + w.cited(s, c);
  s.sentence = std::string("Susceptibility (χ, ppm) was computed from the ") + (info.total_field ? "total" : "local") + " field by " +
               s.title + " (" + papers + (s.parameters.empty() ? "" : "; " + methods_params_text(s)) + ").";
}

}  // namespace

MethodsText pipeline_methods_text(const PipelineRequest& r, bool mask_given, std::string_view network) {
  MethodsWriter w;
  const bool from_total = r.total_field_units != TotalFieldUnits::None;
  {
    MethodsStep& s = w.add("acquisition", "");
    s.parameters.emplace_back("b0", methods_value(r.b0_tesla, "T"));
    if (from_total) {
      s.parameters.emplace_back("totalFieldUnits", std::string(total_field_units_name(r.total_field_units)));
      s.sentence = "Processing started from a total field map (" + std::string(total_field_units_name(r.total_field_units)) +
                   ") at B0 " + number_text(r.b0_tesla) + " T, converted to ppm of the Larmor frequency.";
    } else {
      std::string te;
      for (double t : r.te_s) te += (te.empty() ? "" : ", ") + message_number(t * 1000.0, 6);
      s.parameters.emplace_back("te", te + " ms");
      s.sentence = "Processing used " + std::to_string(r.te_s.size()) + "-echo gradient-echo phase and magnitude (TE " + te +
                   " ms; B0 " + number_text(r.b0_tesla) + " T).";
    }
  }
  if (mask_given) {
    MethodsStep& s = w.add("brain mask", "given");
    s.sentence = "The brain mask was given with the data.";
  } else {
    const bool otsu = r.brain_mask.threshold == MaskThreshold::Otsu;
    MethodsStep& s = w.add("brain mask", otsu ? "Otsu threshold" : "robust-range threshold");
    s.parameters.emplace_back("brainMask.threshold", otsu ? "otsu" : "robust");
    methods_param(s, pipeline_options(), "brainMask.erosion", r.brain_mask.erosion_mm);
    s.sentence = "A brain mask was made from the first echo's magnitude by " +
                 (otsu ? "Otsu's threshold (" + w.cited(s, kOtsuCitation) + ")"
                       : "BET's robust-range threshold (" + w.cited(s, kBetCitation) + ")") +
                 ", morphological opening and closing, the largest connected component and hole filling" +
                 (r.brain_mask.erosion_mm > 0 ? ", eroded by " + methods_value(r.brain_mask.erosion_mm, "mm") : std::string()) + ".";
  }
  if (!from_total) {
    const bool romeo = r.echo_fit.unwrapper == Unwrapper::RegionGrowing;
    MethodsStep& u = w.add("unwrapping", romeo ? "region growing" : "Laplacian");
    u.parameters.emplace_back("unwrap", romeo ? "region-growing" : "laplacian");
    u.sentence = "Each echo's phase was unwrapped by " +
                 (romeo ? "quality-guided region growing in the spirit of ROMEO (" + w.cited(u, kRomeoCitation) + ")"
                        : "Laplacian unwrapping (" + w.cited(u, kLaplacianUnwrapCitation) + ")") +
                 ".";
    MethodsStep& f = w.add("echo fit", "weighted least squares");
    const bool smooth = r.echo_fit.offset == OffsetFit::Smooth && r.te_s.size() > 1;
    f.parameters.emplace_back("fitOffset", smooth ? "smooth" : "free");
    if (smooth) methods_param(f, pipeline_options(), "fitOffsetSigma", r.echo_fit.offset_sigma_mm);
    methods_param(f, pipeline_options(), "fitResidualLimit", r.fit_residual_limit);
    f.sentence = (smooth ? "The receive-phase offset was estimated, smoothed (Gaussian, σ " +
                               methods_value(r.echo_fit.offset_sigma_mm, "mm") + ") and removed, as in MCPC-3D-S (" +
                               w.cited(f, kMcpc3dsCitation) +
                               "), and the total field was fitted through the origin over the echo times by magnitude-weighted "
                               "least squares"
                         : std::string("The total field was fitted over the echo times by magnitude-weighted least squares "
                                       "with a free phase offset per voxel")) +
                 " and converted to ppm; voxels whose fit left an RMS phase residual above " +
                 methods_value(r.fit_residual_limit, "rad") + " were excluded from the following steps.";
  }
  const bool total_method = r.method && method_info(*r.method).total_field;
  if (!total_method) background_step(w, r);
  if (r.method) {
    method_step(w, r);
  } else if (!network.empty()) {
    const ModelSpec* m = find_model(network);
    if (!m) throw Error(ErrorCode::InvalidArgument, "methods text: no network '" + std::string(network) + "' in the registry");
    MethodsStep& s = w.add("inversion", std::string(m->name));
    s.parameters.emplace_back("model", std::string(m->id));
    s.sentence = "Susceptibility (χ, ppm) was computed from the local field by the network " + std::string(m->name) +
                 (m->citation.empty() ? std::string() : " [" + std::to_string(w.cite(s, m->citation)) + "]") + ".";
  }
  if (r.also_swi) {
    MethodsStep& s = w.add("SWI", "CLEAR-SWI");
    methods_param(s, swi_options(), "swi.maskPower", r.swi.mask_power);
    methods_param(s, swi_options(), "swi.highPassSigmaXY", r.swi.high_pass_sigma_xy_voxels);
    methods_param(s, swi_options(), "swi.highPassSigmaZ", r.swi.high_pass_sigma_z_voxels);
    s.parameters.emplace_back("swi.paramagneticPhase", r.swi.paramagnetic_positive ? "positive" : "negative");
    // Cited in reading order (the operands of + are evaluated in no set order).
    const std::string haacke = w.cited(s, kSwiCitation);
    const std::string clear = w.cited(s, kClearSwiCitation);
    s.sentence = "Susceptibility-weighted images (" + haacke + ") were computed as in CLEAR-SWI (" + clear + "): the unwrapped echoes' phase combined into one frequency, high-passed (" +
                 "Gaussian σ " + methods_value(r.swi.high_pass_sigma_xy_voxels, "voxels") + " in plane, " +
                 methods_value(r.swi.high_pass_sigma_z_voxels, "voxels") + " through plane), and its " +
                 (r.swi.paramagnetic_positive ? "positive" : "negative") + "-phase mask raised to the power " +
                 number_text(r.swi.mask_power) + " weighting the echoes' root-sum-of-squares magnitude.";
    MethodsStep& p = w.add("minIP", "minimum-intensity projection");
    methods_param(p, swi_options(), "swi.minIpSlab", r.min_ip_slab_mm);
    p.sentence = "A minimum-intensity projection of the SWI was taken over sliding " + methods_value(r.min_ip_slab_mm, "mm") +
                 " slabs along the slice axis.";
  }
  if (r.also_r2star) {
    const bool arlo = r.r2star.method == R2starMethod::Arlo;
    MethodsStep& s = w.add("R2*", arlo ? "ARLO" : "log-linear fit");
    s.parameters.emplace_back("r2star.method", std::string(r2star_method_name(r.r2star.method)));
    s.sentence = std::string("R2* (s⁻¹) and T2* = 1/R2* (s) maps were fitted to the magnitude decay over the echoes ") +
                 (arlo ? "by ARLO (" + w.cited(s, kArloCitation) + ")" : "by a log-linear least-squares fit") +
                 ", with the fit's relative RMS residual as a goodness-of-fit map.";
  }
  return w.take();
}

}  // namespace tessera
