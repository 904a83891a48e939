#include "tessera/request.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "internal/message_number.h"
#include "tessera/autoplan.h"
#include "tessera/crop.h"
#include "tessera/methods.h"
#include "tessera/pipeline.h"
#include "tessera/error.h"

namespace tessera {

namespace {

constexpr double kHuge = 1e15;

const std::array<OptionSpec, 24> kOptions{{
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
    {"te", "s", 0, "required for the phase networks", 0, 1, true, false,
     "echo time of every echo, in seconds (20 ms = 0.02)"},
    {"b0", "T", defaults::kB0Tesla, "", 0, 30, true, false, "field strength in tesla"},
    {"erodeRadius", "voxels", defaults::kErodeRadius, "", 0, 255, false, true, "mask erosion before a phase network (the reference's 3)"},
    {"phaseSign", "", defaults::kPhaseSign, "", -1, 1, false, true, "+1 or -1: multiplies the phase (the reference negates it)"},
    {"b0Align", "", 0, "auto", 0, 0, false, false,
     "(quote_constants)",
     "auto|on|off"},
}};

}  // namespace

std::string number_text(double v) { return message_number(v, 10); }

std::string numbers_text(std::span<const double> values) {
  std::string s;
  for (double x : values) s += (s.empty() ? "" : ", ") + number_text(x);
  return "[" + s + "]";
}

std::vector<std::string_view> option_choices(const OptionSpec& option) {
  std::vector<std::string_view> out;
  for (std::string_view rest = option.choices; !rest.empty();) {
    const size_t bar = rest.find('|');
    out.push_back(rest.substr(0, bar));
    rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
  }
  return out;
}

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
    quote_constants(v);
    static const std::string names = [] {
      std::string s;
      for (const MethodInfo& m : methods()) s += (s.empty() ? "" : "|") + std::string(m.name);
      return s;
    }();
    v.push_back({"method", "", 0, "none: a network (model or spec) inverts", 0, 0, false, false,
                 "a classical dipole inversion instead of a network; its parameters are the <method>.<param> options", names});
    const std::span<const OptionSpec> m = method_options();
    v.insert(v.end(), m.begin(), m.end());
    const std::span<const OptionSpec> stages = pipeline_options();
    v.insert(v.end(), stages.begin(), stages.end());
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

double checked_option(std::string_view name, double value) {
  const OptionSpec& o = request_option(name);
  const bool low_ok = o.min_exclusive ? value > o.min : value >= o.min;
  const bool whole = !o.integer || value == std::floor(value);
  const bool sign_ok = o.name != "phaseSign" || value == 1.0 || value == -1.0;
  if (std::isfinite(value) && low_ok && value <= o.max && whole && sign_ok) return value;
  std::string range;
  if (o.name == "phaseSign") {
    range = "+1 or -1";
  } else if (o.max >= kHuge && o.min <= -kHuge) {
    range = "a finite number";
  } else {
    range = std::string(o.integer ? "a whole number in " : "in ") + (o.min_exclusive ? "(" : "[") + number_text(o.min) +
            ", " + (o.max >= kHuge ? std::string("∞)") : number_text(o.max) + "]");
  }
  const std::string unit = o.unit.empty() ? "" : " " + std::string(o.unit);
  std::string message = std::string(o.name) + " must be " + range + unit + ", got " + number_text(value);
  if (o.name == "te" && value > 1 && value <= 1000) {
    message += ": give TE in seconds (20 ms = 0.02)";
  } else {
    message += " (" + std::string(o.help) + ")";
  }
  throw Error(ErrorCode::InvalidArgument, message);
}

}  // namespace tessera
