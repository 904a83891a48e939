// Physical constants, each defined once for the C++ core and, through the bindings, for JS.
#pragma once

namespace tessera {

// The proton gyromagnetic ratio over 2π, γ̄ = γ_p/2π, in MHz/T: 42.577 478 518(18) (CODATA 2018: Tiesinga, Mohr,
// Newell & Taylor 2021, Rev. Mod. Phys. 93:025010). 1 ppm of field at B0 tesla is γ̄·B0 Hz.
inline constexpr double kGammaBarMHzPerT = 42.577478518;

}  // namespace tessera
