// A number as the methods' and the phantom's error messages print it.
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

}  // namespace tessera
