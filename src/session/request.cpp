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

const std::vector<OptionSpec>& all_options() {
  static const std::vector<OptionSpec> all = [] {
    std::vector<OptionSpec> v(kOptions.begin(), kOptions.end());
    const std::span<const OptionSpec> acquisition = acquisition_options();
    v.insert(v.end(), acquisition.begin(), acquisition.end());
    const std::span<const OptionSpec> phase_networks = phase_network_options();
    v.insert(v.end(), phase_networks.begin(), phase_networks.end());
    quote_constants(v);
    static const std::string names = [] {
      std::string s;
      for (const MethodInfo& m : methods()) s += (s.empty() ? "" : "|") + std::string(m.name);
      return s;
    }();
    v.push_back({"method", "", 0, "tv in pipeline() unless a network is given; none in invert(): a network (model or spec) inverts", 0, 0, false, false,
                 "a classical dipole inversion instead of a network; its parameters are the <method>.<param> options", names});
    const std::span<const OptionSpec> m = method_options();
    v.insert(v.end(), m.begin(), m.end());
    const std::span<const OptionSpec> stages = pipeline_options();
    v.insert(v.end(), stages.begin(), stages.end());
    // SWI and R2* (tessera.swi(), tessera.r2star(), and the pipeline's optional outputs: also).
    v.push_back({"also", "", 0, "none", 0, 0, false, false,
                 "pipeline(): optional outputs from the same echoes, a list: swi (SWI and its minIP) and r2star (R2* and T2*)",
                 "swi|r2star"});
    const std::span<const OptionSpec> swi = swi_options();
    v.insert(v.end(), swi.begin(), swi.end());
    const std::span<const OptionSpec> r2 = r2star_options();
    v.insert(v.end(), r2.begin(), r2.end());
    return v;
  }();
  return all;
}

}  // namespace

std::span<const OptionSpec> request_options() { return all_options(); }


const OptionSpec& request_option(std::string_view name) {
  for (const OptionSpec& o : all_options()) {
    if (o.name == name) return o;
  }
  throw Error(ErrorCode::Internal, "no request option '" + std::string(name) + "'");
}

double checked_option(std::string_view name, double value) { return checked_value(request_option(name), value); }

}  // namespace tessera
