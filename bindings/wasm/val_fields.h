// Readers of one field of a JavaScript object, refusing a wrong type by name: the building blocks of conversions.
#pragma once

#include <emscripten/val.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "tessera/common/error.h"

namespace tessera::js {

using emscripten::val;

// obj[key] as a finite number, or fallback when it is absent (undefined or null).
// Throws Error(InvalidArgument) naming key when it is not a finite number.
inline double number(const val& obj, const char* key, double fallback) {
  const val v = obj[key];
  if (v.isUndefined() || v.isNull()) return fallback;
  if (!v.isNumber()) throw Error(ErrorCode::InvalidArgument, std::string(key) + " must be a number");
  const double d = v.as<double>();
  if (!std::isfinite(d)) throw Error(ErrorCode::InvalidArgument, std::string(key) + " must be finite");
  return d;
}

// obj[key] as a whole number in [0, 2^32), or fallback when absent.
// Throws Error(InvalidArgument) naming key otherwise.
inline uint32_t count(const val& obj, const char* key, double fallback) {
  const double d = number(obj, key, fallback);
  if (d < 0 || d != std::floor(d) || d > 4294967295.0) {
    throw Error(ErrorCode::InvalidArgument, std::string(key) + " must be a whole number ≥ 0 (got " + std::to_string(d) + ")");
  }
  return static_cast<uint32_t>(d);
}

// obj[key] as an array of 3 numbers, or fallback when absent.
// Throws Error(InvalidArgument) naming key otherwise.
template <class T>
inline std::array<T, 3> triple(const val& obj, const char* key, std::array<T, 3> fallback) {
  const val v = obj[key];
  if (v.isUndefined() || v.isNull()) return fallback;
  if (v["length"].isUndefined() || v["length"].as<unsigned>() != 3) {
    throw Error(ErrorCode::InvalidArgument, std::string(key) + " must be an array of 3 numbers");
  }
  std::array<T, 3> out{};
  for (unsigned i = 0; i < 3; ++i) {
    const val e = v[i];
    if (!e.isNumber()) throw Error(ErrorCode::InvalidArgument, std::string(key) + " must be an array of 3 numbers");
    out[i] = static_cast<T>(e.as<double>());
  }
  return out;
}

}  // namespace tessera::js
