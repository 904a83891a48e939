// From a scanner's multi-echo phase (and magnitude) to χ: echo combination with phase unwrapping (tessera/echo_fit.h),
// a brain mask from the magnitude when none is given (tessera/brain_mask.h), Hz → ppm, background field removal
// (tessera/background.h), and, when a method is asked for, the dipole inversion (tessera/methods.h); a method that
// inverts the total field (MethodInfo::total_field, TFI) replaces the background removal and gets the total field. One Iterative: each
// step is a step of the current stage, so a driver shows progress and cancels anywhere. Every intermediate is kept.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/background/background.h"
#include "tessera/contrast/min_intensity_projection.h"
#include "tessera/contrast/r2star.h"
#include "tessera/contrast/swi.h"
#include "tessera/phase/brain_mask.h"
#include "tessera/phase/echo_fit.h"
#include "tessera/inversion/methods.h"

namespace tessera {

enum class BackgroundRemoval { Vsharp, Pdf, Lbv, Ismv, Sharp, Resharp };

// The schema's word for a background removal ("vsharp", "pdf", "lbv", "ismv", "sharp", "resharp").
constexpr std::string_view background_name(BackgroundRemoval b) {
  switch (b) {
    case BackgroundRemoval::Vsharp: return "vsharp";
    case BackgroundRemoval::Pdf: return "pdf";
    case BackgroundRemoval::Lbv: return "lbv";
    case BackgroundRemoval::Ismv: return "ismv";
    case BackgroundRemoval::Sharp: return "sharp";
    case BackgroundRemoval::Resharp: return "resharp";
  }
  return "";
}

// A background removal as people read it ("V-SHARP", "PDF", "LBV", "iSMV", "SHARP", "RESHARP").
constexpr std::string_view background_title(BackgroundRemoval b) {
  switch (b) {
    case BackgroundRemoval::Vsharp: return "V-SHARP";
    case BackgroundRemoval::Pdf: return "PDF";
    case BackgroundRemoval::Lbv: return "LBV";
    case BackgroundRemoval::Ismv: return "iSMV";
    case BackgroundRemoval::Sharp: return "SHARP";
    case BackgroundRemoval::Resharp: return "RESHARP";
  }
  return "";
}

// The pipeline's background removal when none is asked for: RESHARP (Sun & Wilman 2014), whose radius shrinks to the
// mask's depth. Measured on seven generated heads that vary in size, shape, sinuses, skull, an oblique slab, a
// partial-coverage slab, anisotropic voxels (0.8–2.5 mm), SNR 40–200 and 3–8 echoes, against each head's true local
// field inside the brain mask eroded by 5 voxels, mean / worst r: RESHARP 0.966 / 0.927, V-SHARP 0.961 / 0.920, LBV
// 0.961 / 0.914, PDF 0.950 / 0.889, iSMV 0.938 / 0.898, SHARP 0.850 / 0.727; χ r after TV RESHARP 0.970 / 0.940
// (V-SHARP 0.971 / 0.904). The best mean and worst case of the local field, the best worst case of χ. It runs on a
// small head and a real 24 × 24 × 41 mm slab (keeping 40–42 % of the mask, as V-SHARP does), where LBV keeps 3–6 %.
inline constexpr BackgroundRemoval kDefaultBackground = BackgroundRemoval::Resharp;

// The pipeline's inversion when neither a method nor a network is asked for: TV-ADMM. On the same seven heads after
// RESHARP, χ r mean / worst: TV 0.970 / 0.940, RTS 0.912 / 0.869 (RTS under 0.90 on the noisiest head and the slab);
// at 160×192×144 in node, 2 threads, the whole default pipeline took 13.0 s (RTS 9.9 s).
inline constexpr Method kDefaultPipelineMethod = Method::Tv;

// The units of a total field map the pipeline starts from instead of multi-echo phase (a vendor B0 map: GE and
// Philips write Hz); None: the pipeline starts from phase.
enum class TotalFieldUnits { None, Hz, RadPerS, Ppm };

// The request's word for the units ("hz", "rad/s", "ppm"; "" for None).
constexpr std::string_view total_field_units_name(TotalFieldUnits u) {
  switch (u) {
    case TotalFieldUnits::None: return "";
    case TotalFieldUnits::Hz: return "hz";
    case TotalFieldUnits::RadPerS: return "rad/s";
    case TotalFieldUnits::Ppm: return "ppm";
  }
  return "";
}

// The units named by a word ("hz", "rad/s", "ppm"; case-insensitive); else Error(InvalidArgument) naming the choices.
TotalFieldUnits total_field_units_from_name(std::string_view name);

// The total field converted to ppm of the Larmor frequency at b0_tesla (the echo fit's γ̄, echo_fit.h).
// units not None; b0_tesla finite and > 0.
std::vector<float> total_field_to_ppm(std::span<const float> field, TotalFieldUnits units, double b0_tesla);

// The refusal of a total field that is not finite inside mask, or whose robust range inside mask (input_checks.h's
// robust_range, after conversion to ppm) reaches beyond ±kMaxTotalFieldPpm, naming the units that would fit and the
// fix; empty when plausible. total_ppm.size() == mask.size().
std::string implausible_total_field_text(std::span<const float> total_ppm, std::span<const uint8_t> mask, TotalFieldUnits units,
                                         double b0_tesla);

struct PipelineRequest {
  // Not None: the pipeline starts from a total field map in these units (the constructor's phase holds it, one
  // volume; te_s and echo_fit are unused): it is converted to ppm, the fit mask is the mask, and no echo fit runs.
  TotalFieldUnits total_field_units = TotalFieldUnits::None;
  // true: the phase is one phase difference of two echoes (a Siemens field map, φ(TE2) − φ(TE1), wrapped radians) and
  // te_s holds its one ΔTE = TE2 − TE1: the echo fit unwraps it as one echo at TE = ΔTE with no receive-phase offset
  // (the offset cancels in the difference), so the field is the unwrapped difference / (2π·ΔTE).
  bool phase_difference = false;
  std::vector<double> te_s;         // one per echo, seconds (a phase difference: its ΔTE)
  double b0_tesla = 3.0;
  EchoFitParams echo_fit;           // the unwrapper
  BrainMaskParams brain_mask;       // used when no mask is given
  // Voxels whose echo fit leaves a weighted RMS phase residual above this (rad) are left out of the background removal
  // and the inversion: a field that varies by more than π between neighbours (next to air) cannot be unwrapped, and on
  // the phantom head every such voxel, and no other, lies above 1 rad (tests/pipeline_test.cpp).
  double fit_residual_limit = echo_fit_defaults::kResidualLimitRad;
  BackgroundRemoval background = kDefaultBackground;
  VSharpParams vsharp;
  PdfParams pdf;
  LbvParams lbv;
  IsmvParams ismv;
  SharpParams sharp;
  ResharpParams resharp;
  std::optional<Method> method;     // the inversion; none: the pipeline ends at the local field (a network inverts it)
  MethodParams method_params;
  // Optional outputs from the same echoes, after the inversion: SWI and its minIP (tessera/contrast/swi.h, on the echo
  // fit's unwrapped phase and the brain mask) and R2*/T2* (tessera/contrast/r2star.h, on the magnitude and the brain
  // mask). Both need multi-echo phase and magnitude (not a total field).
  bool also_swi = false;
  bool also_r2star = false;
  SwiParams swi;
  double min_ip_slab_mm = kMinIpSlabMm;  // the minIP's slab along z, mm
  R2starParams r2star;
  unsigned threads = 1;
};

// The optional outputs' names as requests spell them ("swi", "r2star"), and the one that sets them from a name.
// name is "swi" or "r2star" (else Error InvalidArgument naming both).
void set_pipeline_also(PipelineRequest& request, std::string_view name);

struct PipelineResult {
  std::vector<uint8_t> mask;          // the brain mask (given, or made from the first echo's magnitude)
  std::vector<float> unwrapped_rad;   // every echo's unwrapped phase (rad), echo after echo; empty from a total field
  std::vector<float> offset_rad;      // the receive-phase offset removed; empty from a total field
  std::vector<float> field_hz;        // the total field, Hz
  std::vector<float> total_ppm;       // the total field, ppm of the Larmor frequency (0 outside the mask from a total field)
  std::vector<float> residual_rad;    // the echo fit's weighted RMS phase residual; empty from a total field
  // The mask where the fit is reliable (residual ≤ fit_residual_limit); from a total field, the mask.
  std::vector<uint8_t> fit_mask;
  // The local field after background removal, ppm; empty for a method that inverts the total field (TFI: no
  // background removal runs).
  std::vector<float> local_ppm;
  // Where the local field (and χ) is defined: V-SHARP erodes the mask; for a total-field method, the fit mask.
  std::vector<uint8_t> local_mask;
  std::vector<float> chi;             // χ in ppm on local_mask; empty without a method
  SwiResult swi;                      // also_swi: SWI, the echoes' RSS, the high-passed phase and the phase mask
  std::vector<float> min_ip;          // also_swi: the SWI's minimum-intensity projection
  R2starResult r2star;                // also_r2star: R2* (s⁻¹), T2* (s), S0 and the fit's relative residual
  // What was assumed or left out, one sentence each (input_checks.h, the mask's reach, the stages' shares of the mask).
  std::vector<std::string> warnings;
};

// A given mask whose voxels lie at or below the magnitude's tissue threshold (brain_mask's step 1: air, noise, bone)
// in more than this share reaches outside the tissue: a warning. tests/pipeline_test.cpp checks the phantom's true brain
// mask lies under it and the mask grown by 2 voxels into skull and air above it.
inline constexpr double kMaskBackgroundWarnShare = 0.1;
// ... in more than this share the mask is mostly background (an all-ones mask): refused, since χ would be made of air.
inline constexpr double kMaskBackgroundRefuseShare = 0.5;

// The share of mask's voxels at or below the tissue threshold of magnitude's first echo.
// magnitude holds at least mask.size() finite values; mask has a voxel.
double mask_background_share(std::span<const float> magnitude, std::span<const uint8_t> mask, const BrainMaskParams& params);

// The stages' schema options ("unwrap", "background", "vsharp.*", "pdf.*", "lbv.*", "ismv.*", "sharp.*", "resharp.*",
// "brainMask.*").
std::span<const OptionSpec> pipeline_options();

// Sets a pipeline option by its schema name (checked_option's range; a worded option by its choice): one of
// pipeline_options()', swi_options()' or r2star_options()' (else Error Internal).
void set_pipeline_option(PipelineRequest& request, std::string_view name, double value);
void set_pipeline_choice(PipelineRequest& request, std::string_view name, std::string_view choice);

class Pipeline : public Iterative {
 public:
  // Checks everything up front (one clear line each): echoes vs TEs, TEs in seconds, a phase that is wrapped radians,
  // a magnitude of the phase's size, a mask of the volume's size with a voxel, no mask and no magnitude, a volume too
  // thin for a 3D inversion, a given mask mostly outside the tissue (with a magnitude). Warns (result's warnings) of a
  // voxel size outside 0.1–10 mm and a mask reaching outside the tissue. From a total field (request's
  // total_field_units): a field of the volume's size, finite inside the mask and plausible for its units.
  // geometry valid; phase holds te_s.size() · voxel_count wrapped radians (echo after echo), or, from a total field,
  // voxel_count values in its units; magnitude empty or as many values; mask empty (made from the magnitude) or
  // voxel_count values. All outlive the pipeline.
  Pipeline(const Geometry& geometry, std::span<const float> phase, std::span<const float> magnitude,
           std::span<const uint8_t> mask, PipelineRequest request);
  ~Pipeline() override;

  uint32_t total_steps() const override;
  uint32_t steps_done() const override { return done_; }
  bool finished() const override { return finished_; }
  // A step that fails throws its stage's Error with "the <stage> stage failed: " before its message (Cancelled as it is).
  void step() override;
  // The current stage: "brain mask", "echo fit" ("total field" while a given total field is checked), the background removal's name ("V-SHARP", "PDF", "LBV", "iSMV",
  // "SHARP", "RESHARP"), the method's title, then "SWI", "minIP", "R2* (ARLO)" or "R2* (log-linear)" when asked for.
  std::string name() const override;

  // The intermediates; finished() is true. Moves them out (call once).
  PipelineResult take_result();

  // The intermediates of the stages that finished so far (after a failed step too: the failed stage's are empty).
  const PipelineResult& intermediates() const { return result_; }

 private:
  void next_stage();
  void advance();  // step() without the stage's name on an error
  void start_from_total_field();  // the given total field in ppm, checked on the mask, and the fit mask

  Geometry geometry_;
  std::span<const float> phase_, magnitude_;
  std::span<const uint8_t> given_mask_;
  PipelineRequest request_;
  PipelineResult result_;
  int stage_ = 0;                          // 1 mask, 2 echo fit, 3 background, 4 inversion, 5 SWI, 6 minIP, 7 R2*, then done
  std::unique_ptr<Iterative> current_;     // the stage running
  std::string current_name_;
  uint32_t done_ = 0;
  uint32_t planned_ = 0;
  bool finished_ = false;
};

// The plan of a pipeline: its stages, memory against the wasm heap limit, or the refusal with the largest volume.
struct PipelinePlan {
  bool feasible = false;
  // "brain mask" (no mask given), "echo fit" (not from a total field), the background removal's name (none before a total-field method), the
  // method's title, then "SWI", "minIP" (also_swi) and "R2*" (also_r2star)
  std::vector<std::string> stages;
  std::string method;  // the classical method's name ("tv"), empty when a network inverts
  uint64_t input_bytes = 0;         // phase and magnitude of every echo (or the total field and one magnitude), the mask, χ copied out
  uint64_t workspace_bytes = 0;
  uint64_t module_heap_bytes = 0;
  uint64_t largest_voxels = 0;
  Dims3 largest_dims{};             // the volume's dims scaled alike to hold at most largest_voxels: the largest crop
  std::string message;              // the refusal with advice; empty when feasible
};

// geometry valid; request's parameters valid.
PipelinePlan plan_pipeline(const Geometry& geometry, const PipelineRequest& request, bool mask_given, bool magnitude,
                           Target target = kBuildTarget);

// Heap bytes the pipeline holds at its peak beyond its inputs: the largest of its stages' peaks, each what the earlier stages
// kept plus its own workspace.
// geometry valid; request's parameters valid.
uint64_t pipeline_workspace_bytes(const Geometry& geometry, const PipelineRequest& request, bool mask_given);

}  // namespace tessera
