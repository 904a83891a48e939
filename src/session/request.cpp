#include "tessera/session/request.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/message_number.h"
#include "tessera/engine/autoplan.h"
#include "tessera/engine/crop.h"
#include "tessera/inversion/methods.h"
#include "tessera/networks/phase_networks.h"
#include "tessera/pipeline/pipeline.h"
#include "tessera/contrast/r2star.h"
#include "tessera/contrast/swi.h"
#include "tessera/common/error.h"
#include "tessera/common/input_checks.h"

namespace tessera {

namespace {

constexpr double kHuge = kUnboundedOption;

const std::array<OptionSpec, 19> kOptions{{
    {"tile", "", 0, "auto", 0, 0, false, false,
     "{core, halo} in voxels, or \"auto\": the planner chooses core, workers and threads per worker"},
    {"tile.core", "voxels", 0, "auto", 1, 4096, false, true, "output core edge of a tile"},
    {"tile.halo", "voxels", defaults::kCustomNetworkHalo, "(quote_constants)", 0, 1024, false, true,
     "context added on every side of a core"},
    {"tile.stride", "voxels", 0, "the core (no overlap)", 0, 4096, false, true,
     "cores start every stride voxels; shorter than the core, overlapping cores are blended"},
    {"tile.blend", "", 0, "crop", 0, 0, false, false,
     "how overlapping cores combine: crop (equal weights), linear, cosine (Hann) or gaussian (σ = core/8)",
     "crop|linear|cosine|gaussian"},
    {"quality", "", 0, "faithful", 0, 0, false, false,
     "(quote_constants)",
     "faithful|balanced|fast"},
    {"whole", "", 0, "false", 0, 1, false, false, "run the whole volume at once (when it fits the single-patch limit)"},
    {"crop", "", 0, "auto", 0, 0, false, false,
     "field → χ networks, automatic plans: run the mask's bounding box + cropMargin voxels (on the pooling grid) as one patch "
     "instead of the whole field of view when it fits (auto), or never (off); either runs as slabs when over the single-patch "
     "limit and faster or more faithful than tiles; whole: true always runs the whole volume",
     "auto|off"},
    {"cropMargin", "voxels", kCropMargin, "", 0, 1024, false, true,
     "voxels kept around the mask's bounding box before rounding out to the pooling grid (crop auto)"},
    {"workers", "", 0, "auto", 1, 64, false, true, "networks running at once (the budget may lower it)"},
    {"threadsPerWorker", "", defaults::kThreadsPerWorker, "", 1, 64, false, true, "ONNX Runtime intra-op threads of each worker"},
    {"spec.divisor", "voxels", defaults::kDivisor, "", 1, 1024, false, true, "patch edges are multiples of this (the network's poolings)"},
    {"spec.bytesPerVoxel", "bytes", static_cast<double>(defaults::kBytesPerVoxel),
     "(quote_constants)", 1, kHuge, false, true,
     "ONNX Runtime heap bytes per patch voxel; left out, the network is calibrated (calibrate()) with fixedBytes"},
    {"spec.fixedBytes", "bytes", 0, "", 0, kHuge, false, true, "bytes per worker whatever the patch (runtime, weights)"},
    {"spec.receptiveRadius", "voxels", 0, "derived from the ONNX graph", 1, 4096, false, true,
     "an output voxel depends on inputs within this many voxels (the network's theoretical receptive radius)"},
    {"spec.inputMean", "ppm", 0, "", -kHuge, kHuge, false, false, "network input = (field - inputMean) / inputStd"},
    {"spec.inputStd", "ppm", 1, "", 0, kHuge, true, false, "network input = (field - inputMean) / inputStd"},
    {"spec.outputMean", "ppm", 0, "", -kHuge, kHuge, false, false, "χ = outputStd · output + outputMean"},
    {"spec.outputStd", "ppm", 1, "", -kHuge, kHuge, false, false, "χ = outputStd · output + outputMean"},
}};

}  // namespace

namespace {

// The run options, then the classical methods' parameters (tessera/methods.h): one schema.
// The texts that quote a constant, made from it (kOptions holds a placeholder for each).
void quote_constants(std::vector<OptionSpec>& v) {
  static const std::string quality = [] {
    const FidelityTarget f = fidelity_target(Quality::Faithful), b = fidelity_target(Quality::Balanced);
    return "the auto-planner's fidelity target against the whole-volume run: faithful (r ≥ " +
           message_number(f.min_r) + ", NRMSE ≤ " + message_number(f.max_nrmse) + "), balanced (r ≥ " +
           message_number(b.min_r) + ", NRMSE ≤ " + message_number(b.max_nrmse) + ") or fast (no target)";
  }();
  static const std::string b0_align =
      "networks that assume B0 along the third axis (field → χ): resample the field to a B0-aligned grid and χ back when "
      "B0 is more than " + message_number(defaults::kB0AlignThresholdDegrees) +
      "° off it (auto), at any tilt (on), or never "
      "(off); a warning above " + message_number(defaults::kB0WarnDegrees) + "°";
  static const std::string halo = "the network's default halo (" + message_number(defaults::kCustomNetworkHalo) +
                                  " for a custom network)";
  static const std::string bytes = "calibrated from the weights (without weights: " +
                                   message_number(static_cast<double>(defaults::kBytesPerVoxel)) +
                                   ", the reference engine's figure)";
  for (OptionSpec& o : v) {
    if (o.name == "quality") o.help = quality;
    if (o.name == "b0Align") o.help = b0_align;
    if (o.name == "tile.halo") o.default_text = halo;
    if (o.name == "spec.bytesPerVoxel") o.default_text = bytes;
  }
}

// The schema's options with the kinds of request each table's options belong to (RequestKindBits), side by side.
struct JoinedOptions {
  std::vector<OptionSpec> options;
  std::vector<uint8_t> kinds;
  void add(std::span<const OptionSpec> table, uint8_t k) {
    options.insert(options.end(), table.begin(), table.end());
    kinds.insert(kinds.end(), table.size(), k);
  }
};

const JoinedOptions& joined_options() {
  static const JoinedOptions all = [] {
    JoinedOptions j;
    // The run's options are a network's; a custom network's spec also a pipeline's (its network inverts the local field).
    for (const OptionSpec& o : kOptions) {
      j.add({&o, 1}, o.name.starts_with("spec.") ? kNetworkRequest | kPipelineRequest : kNetworkRequest);
    }
    // The echo times also go to swi() and r2star(), which read no field strength.
    for (const OptionSpec& o : acquisition_options()) {
      j.add({&o, 1}, o.name == "te" ? kNetworkRequest | kPipelineRequest | kSwiRequest | kR2starRequest : kNetworkRequest | kPipelineRequest);
    }
    j.add(phase_network_options(), kNetworkRequest);
    quote_constants(j.options);
    static const std::string names = [] {
      std::string s;
      for (const MethodInfo& m : methods()) s += (s.empty() ? "" : "|") + std::string(m.name);
      return s;
    }();
    static const OptionSpec method{"method", "", 0, "tv in pipeline() unless a network is given; none in invert(): a network (model or spec) inverts", 0, 0, false, false,
                                   "a classical dipole inversion instead of a network; its parameters are the <method>.<param> options", names};
    j.add({&method, 1}, kMethodRequest | kPipelineRequest);
    j.add(method_options(), kMethodRequest | kPipelineRequest);
    // swi() unwraps the phase and makes its brain mask as the pipeline does.
    for (const OptionSpec& o : pipeline_options()) {
      j.add({&o, 1}, o.name == "unwrap" || o.name.starts_with("brainMask.") ? kPipelineRequest | kSwiRequest : kPipelineRequest);
    }
    // SWI and R2* (tessera.swi(), tessera.r2star(), and the pipeline's optional outputs: also).
    static const OptionSpec also{"also", "", 0, "none", 0, 0, false, false,
                                 "pipeline(): optional outputs from the same echoes, a list: swi (SWI and its minIP) and r2star (R2* and T2*)",
                                 "swi|r2star"};
    j.add({&also, 1}, kPipelineRequest);
    j.add(swi_options(), kPipelineRequest | kSwiRequest);
    j.add(r2star_options(), kPipelineRequest | kR2starRequest);
    return j;
  }();
  return all;
}

const std::vector<OptionSpec>& all_options() { return joined_options().options; }

// The index of option in the schema (it is one of its entries, else Error Internal).
size_t schema_index(const OptionSpec& option) {
  const std::vector<OptionSpec>& all = all_options();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].name == option.name) return i;
  }
  throw Error(ErrorCode::Internal, "no request option '" + std::string(option.name) + "'");
}

// The words of a choice option as a TypeScript union: "'a' | 'b'".
std::string words_type(const OptionSpec& option) {
  std::string out;
  for (std::string_view c : option_choices(option)) out += (out.empty() ? "'" : " | '") + std::string(c) + "'";
  return out;
}

// The request keys that are no schema option, by kind (a key whose type or doc differs by kind has a row per kind);
// kInversionRequests: the requests that end in χ.
constexpr uint8_t kInversionRequests = kNetworkRequest | kMethodRequest | kPipelineRequest;
constexpr std::string_view kVolumeType = "Float32Array | Volume<VoxelArray>";
constexpr std::string_view kWeightsType = "Uint8Array | ArrayBuffer | (Uint8Array | ArrayBuffer)[]";
// fieldUnits' doc, with the bounds the field checks apply.
const std::string kFieldUnitsDoc = "'ppm' states the field is ppm: a local field beyond ±" + message_number(kMaxLocalFieldPpm) +
                                   " ppm (a total-field network's beyond ±" + message_number(kMaxTotalFieldPpm) +
                                   " ppm) is otherwise refused as Hz or rad/s";
const RequestKey kRequestKeys[] = {
    {"field", kNetworkRequest, kVolumeType, "local field (ppm), x-fastest, or a Volume (its geometry is used); not for the phase networks"},
    {"field", kMethodRequest, kVolumeType, "local field (ppm), x-fastest, or a Volume", KeyPresence::RequiredToRun},
    {"fieldUnits", kNetworkRequest | kMethodRequest, "'ppm'",
     kFieldUnitsDoc},
    {"phase", kNetworkRequest, kVolumeType, "phase networks: wrapped phase (rad), x-fastest, echo after echo, or a Volume"},
    {"phase", kPipelineRequest, kVolumeType, "wrapped phase (rad), every echo (a 4D Volume, or x-fastest echo after echo with geometry); or give totalField"},
    {"totalField", kPipelineRequest, kVolumeType, "a total field map (a vendor B0 map), one 3D volume, instead of phase and te: no echo fit runs"},
    {"totalFieldUnits", kPipelineRequest, "'hz' | 'rad/s' | 'ppm'", "totalField's units; 'hz' for GE's and Philips' B0 maps"},
    {"phaseDifference", kPipelineRequest, kVolumeType,
     "a phase difference of two echoes, φ(TE2) − φ(TE1) (a Siemens field map), one 3D wrapped phase in radians (scanner integers are read as such with a warning); instead of phase and te"},
    {"deltaTE", kPipelineRequest, "number", "TE2 − TE1 of phaseDifference, seconds"},
    {"magnitude", kNetworkRequest, kVolumeType, "phase networks: magnitude, same size as phase (weights the echoes by (magnitude·TE)²), or a Volume"},
    {"magnitude", kMethodRequest, kVolumeType, "MEDI: the magnitude (its edge prior), or a Volume"},
    {"magnitude", kPipelineRequest, kVolumeType,
     "same size as phase (one volume with totalField): the fit's weights; the brain mask is made from the first echo's when no mask is given; plan(): true says one is given",
     KeyPresence::Optional, "Float32Array | Volume<VoxelArray> | boolean"},
    {"phase", kSwiRequest, kVolumeType, "wrapped phase (rad), every echo (a 4D Volume, or x-fastest echo after echo with geometry)",
     KeyPresence::RequiredToRun},
    {"magnitude", kSwiRequest, kVolumeType, "same size as phase", KeyPresence::RequiredToRun},
    {"magnitude", kR2starRequest, kVolumeType, "every echo (a 4D Volume, or x-fastest echo after echo with geometry)", KeyPresence::RequiredToRun},
    {"mask", kInversionRequests, "ArrayLike<number> | Volume<VoxelArray>", "the mask: inside where > 0 (0, negative and non-finite values are outside), or a Volume"},
    {"mask", kSwiRequest, "ArrayLike<number> | Volume<VoxelArray>",
     "where the phase is unwrapped and high-passed (default: a brain mask made from the first echo's magnitude)"},
    {"mask", kR2starRequest, "ArrayLike<number> | Volume<VoxelArray>", "the voxels fitted (default: every voxel whose first echo is > 0)"},
    {"geometry", kInversionRequests, "Geometry", "{dims, voxelMm, b0Dir}: optional when a Volume (field, phase or mask) carries it"},
    {"geometry", kSwiRequest | kR2starRequest, "Geometry", "{dims, voxelMm, b0Dir}: optional when a Volume (the echoes or the mask) carries it"},
    {"model", kNetworkRequest | kPipelineRequest, "string", "a registry network's id (tessera.registry())"},
    {"spec.maskedInput", kNetworkRequest | kPipelineRequest, "boolean", "the network takes the field multiplied by the mask"},
    {"weights", kNetworkRequest, kWeightsType, "ONNX bytes; an array for networks with several files (NeXtQSM); plan() may read the network's reach from its graph",
     KeyPresence::RequiredToRun},
    {"weights", kPipelineRequest, kWeightsType, "the network's ONNX bytes (with model or spec)"},
    {"verifyWeights", kNetworkRequest, "boolean",
     "false: weights other than the registry's file run under its id (your own export): the run warns and report.weights records their sha256"},
    {"network", kPipelineRequest, "Partial<InvertRequest>", "further invert() options of the network that inverts the local field"},
    {"plan", kNetworkRequest, "Plan", "the plan() of this request and volume, handed back: the run obeys the held plan (made here when absent)"},
    {"plan", kMethodRequest, "MethodPlan", "the plan() of this request and volume, handed back: the run obeys the held plan (made here when absent)"},
    {"plan", kPipelineRequest, "PipelinePlan", "the plan() of this request and volume, handed back: the run obeys the held plan (made here when absent)"},
    {"pipeline", kPipelineRequest, "true", "plan(): true plans a pipeline() request", KeyPresence::PlanOnly},
    {"inputNames", kNetworkRequest, "Record<string, string>", "multi-input networks: {role: ONNX input name} where the export's names are not recognised"},
    {"context", kNetworkRequest, "{ within: number[] } | { radius: number }",
     "how far the network looks: receptiveField()'s probe, or {radius} (derived from weights when given)"},
    {"verify", kNetworkRequest, "boolean", "plan (and run) the self-check: the largest box that runs whole, compared with the tiled result"},
    {"executionProviders", kNetworkRequest, "ExecutionProvider[]", "this run's ONNX Runtime execution providers, first first (default: the runtime's)"},
    {"speed", kNetworkRequest, "SpeedMeasurement", "this machine's measured speed of the network (measureSpeed()'s result): the estimate uses it"},
    {"measureSpeed", kNetworkRequest, "boolean", "measure the speed first (needs weights; kept per weights and threads for the runtime's lifetime)"},
    {"keepInputs", kInversionRequests | kSwiRequest | kR2starRequest, "boolean",
     "true: a run copies its input volumes to the runtime and they stay the caller's; by default they are transferred (the caller's arrays are left empty)"},
    {"signal", kInversionRequests | kSwiRequest | kR2starRequest, "AbortSignal", "an AbortSignal that cancels the call"},
    {"onProgress", kInversionRequests | kSwiRequest | kR2starRequest, "(p: Progress) => void", "called with the run's progress"},
};

}  // namespace

std::span<const std::string_view> request_kind_names() {
  static constexpr std::string_view names[] = {"network", "method", "pipeline", "swi", "r2star"};
  return names;
}

uint8_t request_option_kinds(const OptionSpec& option) { return joined_options().kinds[schema_index(option)]; }

uint8_t request_option_required(const OptionSpec& option) {
  schema_index(option);
  if (option.name == "method") return kMethodRequest;
  return option.name == "te" ? kSwiRequest | kR2starRequest : 0;
}

std::string request_option_type(const OptionSpec& option) {
  schema_index(option);
  if (option.name == "tile") return "TileOptions | 'auto'";
  if (option.name == "tile.core") return "number | 'auto'";
  if (option.name == "te") return "number | number[]";
  const std::string words = words_type(option);
  if (option.name == "also") return words + " | Array<" + words + ">";
  if (!words.empty()) return words;
  if (option.default_text == "false" && option.min == 0 && option.max == 1) return "boolean";
  return "number";
}

std::span<const RequestKey> request_keys() { return kRequestKeys; }

std::span<const OptionSpec> request_options() { return all_options(); }


const OptionSpec& request_option(std::string_view name) {
  for (const OptionSpec& o : all_options()) {
    if (o.name == name) return o;
  }
  throw Error(ErrorCode::Internal, "no request option '" + std::string(name) + "'");
}

double checked_option(std::string_view name, double value) { return checked_value(request_option(name), value); }

}  // namespace tessera
