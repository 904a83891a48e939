// A deterministic numerical head phantom for QSM: susceptibility truth (ppm), local field (ppm) by the
// forward model, brain mask. Shapes are defined in millimetres, so any dims and voxel size render the
// same anatomy (uniformly shrunk when the field of view is too small for a real head).
// Everything random comes from a splitmix64 generator and IEEE basic operations only, so chi and mask
// are bit-identical natively and in wasm for a given seed; the field goes through an FFT (libm
// twiddles) and is not guaranteed to (measured identical natively and under Emscripten 3.1.6 here).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/geometry.h"

namespace tessera {

// Compartment susceptibilities in ppm (every masked voxel holds exactly one of these, veins one of vein_values).
namespace phantom_chi {
constexpr float white_matter = -0.03f;
constexpr float grey_matter = 0.02f;  // cortical ribbon
constexpr float csf = 0.0f;           // lateral ventricles
constexpr float caudate = 0.06f;
constexpr float putamen = 0.05f;
constexpr float globus_pallidus = 0.15f;
constexpr float red_nucleus = 0.12f;
constexpr float substantia_nigra = 0.14f;
constexpr float calcification = -0.1f;
constexpr float vein_values[4] = {0.30f, 0.35f, 0.40f, 0.45f};  // each vein draws one
}  // namespace phantom_chi

struct PhantomOptions {
  uint64_t seed = 1;          // same seed, same phantom (positions, sizes, veins, noise)
  double noise_sigma = 0.0;   // Gaussian noise (ppm) added to the field inside the mask; 0 = none
  int pad_factor = 2;         // zero padding of the forward model (see forward_field)
  unsigned threads = 1;       // FFT threads (0 = hardware concurrency)
};

struct Phantom {
  std::vector<float> chi;     // susceptibility truth, ppm, zero outside the brain mask
  std::vector<float> field;   // local field, ppm, forward model of chi, multiplied by the mask (+ noise inside)
  std::vector<uint8_t> mask;  // brain mask, 0 or 1
};

// Builds the phantom for geometry (B0 direction from geometry.b0_dir), x-fastest volumes.
// geometry valid (validate_geometry; else Error InvalidArgument).
// options.noise_sigma finite and >= 0; options.pad_factor in [1, 4] (else Error InvalidArgument).
Phantom make_phantom(const Geometry& geometry, const PhantomOptions& options = {});

// Susceptibility truth and mask only (no forward model, no FFT): the first half of make_phantom.
// geometry valid (else Error InvalidArgument).
Phantom make_phantom_chi(const Geometry& geometry, uint64_t seed = 1);

// Every value a masked voxel of make_phantom_chi can hold (the compartments above and the vein values).
std::vector<float> phantom_values();

}  // namespace tessera
