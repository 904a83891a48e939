// A number as the methods' and the phantom's error messages print it.
#pragma once

#include <cstdio>
#include <string>

namespace tessera {

// v in "%.6g": up to 6 significant digits, no trailing zeros (std::to_string prints 1e-9 as 0.000000).
inline std::string message_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace tessera
