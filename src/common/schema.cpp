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

double checked_value(const OptionSpec& o, double value) {
  const bool low_ok = o.min_exclusive ? value > o.min : value >= o.min;
  const bool whole = !o.integer || value == std::floor(value);
  const bool sign_ok = o.name != "phaseSign" || value == 1.0 || value == -1.0;
  if (std::isfinite(value) && low_ok && value <= o.max && whole && sign_ok) return value;
  std::string range;
  if (o.name == "phaseSign") {
    range = "+1 or -1";
  } else if (o.max >= kUnboundedOption && o.min <= -kUnboundedOption) {
    range = "a finite number";
  } else {
    range = std::string(o.integer ? "a whole number in " : "in ") + (o.min_exclusive ? "(" : "[") + number_text(o.min) +
            ", " + (o.max >= kUnboundedOption ? std::string("∞)") : number_text(o.max) + "]");
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
