#include "tessera/common/schema.h"

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "common/message_number.h"
#include "tessera/common/error.h"

namespace tessera {

namespace {

const std::array<OptionSpec, 2> kAcquisitionOptions{{
    {"te", "s", 0, "required for the phase networks", 0, 1, true, false,
     "echo time of every echo, in seconds (20 ms = 0.02)"},
    {"b0", "T", defaults::kB0Tesla, "", 0, 30, true, false, "field strength in tesla"},
}};

}  // namespace

std::span<const OptionSpec> acquisition_options() { return kAcquisitionOptions; }

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

const OptionSpec& find_option(std::span<const OptionSpec> table, std::string_view name) {
  for (const OptionSpec& o : table) {
    if (o.name == name) return o;
  }
  throw Error(ErrorCode::Internal, "no option '" + std::string(name) + "'");
}

double checked_option(std::span<const OptionSpec> table, std::string_view name, double value) {
  return checked_value(find_option(table, name), value);
}

namespace {

// A bound as range_text prints it: a whole number of thirds that is not whole as the fraction (2/3), else number_text.
std::string bound_text(double v) {
  const double thirds = v * 3.0;
  if (v != std::floor(v) && std::abs(thirds - std::round(thirds)) < 1e-12 && std::round(thirds) / 3.0 == v) {
    return message_number(std::round(thirds), 10) + "/3";
  }
  return number_text(v);
}

}  // namespace

std::string range_text(const OptionSpec& o) {
  if (!o.choices.empty()) return {};
  if (o.name == "phaseSign") return "+1 or -1";
  if (o.max >= kUnboundedOption && o.min <= -kUnboundedOption) return "a finite number";
  const std::string kind = o.integer ? "a whole number " : "";
  if (o.max >= kUnboundedOption) return kind + (o.min_exclusive ? "> " : "≥ ") + bound_text(o.min);
  return kind + "in " + (o.min_exclusive ? "(" : "[") + bound_text(o.min) + ", " + bound_text(o.max) + (o.max_exclusive ? ")" : "]");
}

Error word_refusal(const OptionSpec& o, std::string_view word) {
  const std::string unit = o.unit.empty() ? "" : " " + std::string(o.unit);
  if (o.choices.empty()) {
    const std::string range = range_text(o);
    const std::string what = range.rfind("a ", 0) == 0 ? range : "a number " + range;
    return Error(ErrorCode::InvalidArgument, std::string(o.name) + " must be " + what + unit + ", got '" + std::string(word) +
                                                 "' (" + std::string(o.help) + ")");
  }
  return Error(ErrorCode::InvalidArgument, std::string(o.name) + " must be one of " + std::string(o.choices) + ", got '" +
                                               std::string(word) + "'");
}

double checked_value(const OptionSpec& o, double value) {
  const bool low_ok = o.min_exclusive ? value > o.min : value >= o.min;
  const bool high_ok = o.max_exclusive ? value < o.max : value <= o.max;
  const bool whole = !o.integer || value == std::floor(value);
  const bool sign_ok = o.name != "phaseSign" || value == 1.0 || value == -1.0;
  if (std::isfinite(value) && low_ok && high_ok && whole && sign_ok) return value;
  // An unbounded range reads "in [1, ∞)" in a refusal (range_text's "≥ 1" is the schema's shorter form).
  std::string range = range_text(o);
  if (o.max >= kUnboundedOption && o.min > -kUnboundedOption) {
    range = std::string(o.integer ? "a whole number in " : "in ") + (o.min_exclusive ? "(" : "[") + bound_text(o.min) + ", ∞)";
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
