// The schema machinery: an option's unit, default and range (OptionSpec), the one check of a value against it, and
// the options of an acquisition (echo times, field strength). Each layer keeps the table of its own options beside the
// code that reads them; the session joins them into the request's schema (tessera/session/request.h), which
// JavaScript asks for instead of keeping copies.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/budget.h"
#include "tessera/common/error.h"

namespace tessera {

struct OptionSpec {
  std::string_view name;      // as JavaScript spells it: "b0", "spec.bytesPerVoxel", "tile.halo"
  std::string_view unit;      // "s", "T", "voxels", "bytes", "ppm", "" (a plain number)
  double default_value = 0;   // the default when default_text is empty
  std::string_view default_text;  // a default that is not a number ("auto", "the network's default halo")
  double min = 0;             // inclusive unless min_exclusive
  double max = 0;             // inclusive unless max_exclusive
  bool min_exclusive = false;
  bool integer = false;
  std::string_view help;      // one line
  std::string_view choices;   // a worded option's values, '|'-separated ("faithful|balanced|fast"); empty: a number
  bool max_exclusive = false;
};

// A bound that stands for "no bound" in a table (printed as ∞ or "a finite number").
inline constexpr double kUnboundedOption = 1e15;

// The option of table with this name.
// name is one of table's names (else Error Internal).
const OptionSpec& find_option(std::span<const OptionSpec> table, std::string_view name);

// The option's range in words, as checked_value checks it: "in (0, 2/3)", "a whole number in [1, 64]", "≥ 0",
// "+1 or -1", "a finite number"; a bound that is a whole number of thirds prints as the fraction. Empty for a worded option.
std::string range_text(const OptionSpec& option);

// The refusal of a word given for an option: a worded option's choices, or a numeric option's "must be a number in
// (range) unit, got 'NaN'".
Error word_refusal(const OptionSpec& option, std::string_view word);

// Checks value against the option's range (and wholeness); returns it.
// Throws Error(InvalidArgument) naming the option, its unit and range, e.g. "b0 must be in (0, 30] T, got 300".
double checked_value(const OptionSpec& option, double value);

// checked_value of table's option name.
// name is one of table's names (else Error Internal).
double checked_option(std::span<const OptionSpec> table, std::string_view name, double value);

// A worded option's choices in order ("faithful|balanced|fast" -> faithful, balanced, fast; empty: none).
std::vector<std::string_view> option_choices(const OptionSpec& option);

// A number as the request's messages word it (%.10g: 0.004, 3, 1e-05).
std::string number_text(double v);

// Numbers as the request's messages word a list: "[0.004, 0.008]".
std::string numbers_text(std::span<const double> values);

// The numeric defaults, named once: the schema's tables, the C++ structs and the bindings all use these.
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
// network on the 128×128×96 phantom (bench/b0-tilt.js): against the truth χ, ignoring the tilt beats resampling at 10°
// and loses from 15° on (r and NRMSE cross at 12–13°).
inline constexpr double kB0AlignThresholdDegrees = 12.0;
// ... and by more than this: a warning. Ignoring the tilt costs 0.020 NRMSE per degree against the untilted χ (0.101 at
// 5°, 0.201 at 10°): more than 0.05 above 2.5°.
inline constexpr double kB0WarnDegrees = 2.5;
}  // namespace defaults

// The acquisition's options: "te" (s) and "b0" (T).
std::span<const OptionSpec> acquisition_options();

}  // namespace tessera
