// Plausibility rules for a run's inputs, each a refusal in words or a warning that says what was assumed: voxel sizes,
// a volume too thin for a 3D dipole inversion, a local field that cannot be in ppm, a stage that leaves out much of
// the mask. The pipeline, the classical methods and the bindings apply these; none is restated elsewhere.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tessera/common/geometry.h"

namespace tessera {

// Voxel edges outside [kMinVoxelMm, kMaxVoxelMm] warn: MRI voxels for QSM lie within 0.1–10 mm (7 T reaches 0.2 mm,
// clinical 2D slices 5 mm); outside, the header's units (µm, m, a NIfTI xyzt_units slip) are the likelier cause.
inline constexpr double kMinVoxelMm = 0.1;
inline constexpr double kMaxVoxelMm = 10.0;

// The warning for a voxel size outside [kMinVoxelMm, kMaxVoxelMm], naming the edges and what was assumed; empty when
// every edge is within. geometry valid.
std::string voxel_size_warning(const Geometry& geometry);

// Fewest voxels along any axis for a 3D dipole inversion. With 1 or 2 samples along an axis its spatial frequencies
// are only 0 (and Nyquist), so the dipole kernel is never sampled off the k-space plane of that axis and the magic-angle
// cone that separates χ from the field is missing; a slab of 3 voxels is the least that samples it at all (and V-SHARP's
// smallest default sphere already needs 5).
inline constexpr int64_t kMinDipoleAxisVoxels = 3;

// Throws Error(InvalidArgument) when an axis holds fewer than kMinDipoleAxisVoxels voxels, naming the axis and the fix.
// geometry valid.
void validate_dipole_extent(const Geometry& geometry);

// A local field in ppm inside the brain lies within about ±0.3 ppm at its 1st and 99th percentiles (veins and bleeds
// reach 0.5–1 ppm in a few voxels, Haacke 2015; the phantom's spans ±0.03); a robust bound beyond ±1 ppm is not ppm: a
// field in Hz (1 ppm = 128 Hz at 3 T; the phantom's in Hz spans ±3.5), rad/s, or a total field with the background left in.
inline constexpr double kMaxLocalFieldPpm = 1.0;

// A total field (background left in) in ppm inside the head reaches 1–3 ppm only in the few voxels next to the sinuses
// and ear canals (air–tissue Δχ ≈ 9 ppm), and a scanner's frequency offset adds well under 1 ppm: real vendor B0 maps
// at 3 T span at most ±1.4 ppm at their 1st/99th percentiles inside the head (GE, Philips, a Siemens phase difference),
// the generated heads less. A robust bound beyond ±3 ppm is not ppm: a field in Hz (1 ppm = 128 Hz at 3 T) or rad/s
// given as ppm, or rad/s given as Hz (2π too large: those maps would reach 3.2–8.5 ppm).
inline constexpr double kMaxTotalFieldPpm = 3.0;

// The 1st and 99th percentiles of field inside mask (nearest rank over the finite values); {0, 0} for no finite value.
// field.size() == mask.size().
struct RobustRange {
  double p1 = 0.0;
  double p99 = 0.0;
};
RobustRange robust_range(std::span<const float> field, std::span<const uint8_t> mask);

// The refusal of a local field whose robust range inside mask reaches beyond ±kMaxLocalFieldPpm, naming the range and
// the fix (give its units, or remove the background); empty when plausible. field.size() == mask.size().
std::string implausible_ppm_text(std::span<const float> field, std::span<const uint8_t> mask);

// The refusal of a total field (background left in) whose robust range inside mask reaches beyond ±kMaxTotalFieldPpm,
// naming the range and the fix; empty when plausible. field.size() == mask.size().
std::string implausible_total_ppm_text(std::span<const float> field, std::span<const uint8_t> mask);

// A stage that leaves out more than this share of the voxels it was given says how many it left out and why: the echo
// fit (which leaves out under 1 % of a head it unwraps consistently).
inline constexpr double kLeftOutWarnShare = 0.2;

// The same for a background removal, whose erosion of the mask's border leaves out 23–43 % of whole generated heads at
// RESHARP's 6 mm (V-SHARP 8–24 %, LBV and iSMV up to 37 %): more than half is a mask too thin or small for the removal
// (a real 24 mm wide slab: 58 %), the share below which RESHARP's radius shrinks.
inline constexpr double kBackgroundLeftOutWarnShare = 0.5;

// "<stage> left out L of N mask voxels (P %): <why>" when (given − kept) / given > bound, else empty.
std::string left_out_warning(std::string_view stage, uint64_t kept, uint64_t given, std::string_view why,
                             double bound = kLeftOutWarnShare);

}  // namespace tessera
