// The request schema: every option a run takes — its unit, default and range — defined once. The C++ core
// reads and checks requests against it; JavaScript (the API, the CLI, the page) asks for it (schema()) to show
// defaults and ranges instead of keeping its own copies.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/budget.h"

namespace tessera {

struct OptionSpec {
  std::string_view name;      // as JavaScript spells it: "b0", "spec.bytesPerVoxel", "tile.halo"
  std::string_view unit;      // "s", "T", "voxels", "bytes", "ppm", "" (a plain number)
  double default_value = 0;   // the default when default_text is empty
  std::string_view default_text;  // a default that is not a number ("auto", "the network's default halo")
  double min = 0;             // inclusive unless min_exclusive
  double max = 0;             // inclusive
  bool min_exclusive = false;
  bool integer = false;
  std::string_view help;      // one line
  std::string_view choices;   // a worded option's values, '|'-separated ("faithful|balanced|fast"); empty: a number
};

// Every option, in a stable order.
std::span<const OptionSpec> request_options();

// The option with this name.
// name is one of request_options()' names (else Error Internal).
const OptionSpec& request_option(std::string_view name);

// Checks value against the option's range (and wholeness); returns it.
// Throws Error(InvalidArgument) naming the option, its unit and range, e.g. "b0 must be in (0, 30] T, got 300".
double checked_option(std::string_view name, double value);

// A worded option's choices in order ("faithful|balanced|fast" -> faithful, balanced, fast; empty: none).
std::vector<std::string_view> option_choices(const OptionSpec& option);

// A number as the request's messages word it (%.10g: 0.004, 3, 1e-05).
std::string number_text(double v);

// Numbers as the request's messages word a list: "[0.004, 0.008]".
std::string numbers_text(std::span<const double> values);

// The numeric defaults, named once: the schema's table, the C++ structs and the bindings all use these.
namespace defaults {
inline constexpr uint32_t kCustomNetworkHalo = 4;  // a custom network (a spec, not a registry entry)
inline constexpr uint32_t kDivisor = 1;
inline constexpr uint64_t kBytesPerVoxel = kReferenceBytesPerVoxel;
inline constexpr uint32_t kThreadsPerWorker = 1;
// Networks running at once for a fixed tile when the request names none: half the cores (each ONNX Runtime worker
// and the driver's loops share them), 1 to 4.
constexpr uint32_t workers_for(uint32_t hardware_threads) { return hardware_threads < 2 ? 1 : hardware_threads / 2 > 4 ? 4 : hardware_threads / 2; }
inline constexpr double kB0Tesla = 3.0;
inline constexpr uint32_t kErodeRadius = 3;  // the iQSM reference's
inline constexpr double kPhaseSign = -1.0;   // the iQSM reference negates the scanner's phase
// B0 off the third axis by more than this (degrees): b0Align auto resamples to a B0-aligned grid. Measured with the demo
// network on the 128×128×96 phantom (bench/b0-tilt.js, bench/RESULTS.md "B0 off the third axis"): against the truth χ,
// ignoring the tilt beats resampling at 10° and loses from 15° on (r and NRMSE cross at 12–13°).
inline constexpr double kB0AlignThresholdDegrees = 12.0;
// ... and by more than this: a warning. Ignoring the tilt costs 0.020 NRMSE per degree against the untilted χ (0.101 at
// 5°, 0.201 at 10°): more than 0.05 above 2.5°.
inline constexpr double kB0WarnDegrees = 2.5;
}  // namespace defaults

}  // namespace tessera
