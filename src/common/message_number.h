// A number as the core's messages and the request's texts print it.
#pragma once

#include <cstdio>
#include <string>

namespace tessera {

// v in "%.<digits>g": up to `digits` significant digits, no trailing zeros (std::to_string prints 1e-9 as 0.000000).
// digits in [1, 17].
inline std::string message_number(double v, int digits = 6) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// v to 4 significant digits: thresholds and phase spans in the brain mask's and the unwrapping's messages, where more
// digits are noise.
inline std::string short_message_number(double v) { return message_number(v, 4); }

}  // namespace tessera
