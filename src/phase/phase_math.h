// The phase arithmetic of the phase layer: 2π and wrapping into [−π, π].
#pragma once

#include <cmath>
#include <numbers>

namespace tessera {

inline constexpr double kTwoPi = 2.0 * std::numbers::pi;

// x − 2π·round(x/2π): in [−π, π].
inline double wrap_phase(double x) { return x - kTwoPi * std::nearbyint(x / kTwoPi); }

}  // namespace tessera
