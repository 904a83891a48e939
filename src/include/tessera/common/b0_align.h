// Resampling a volume to a grid whose third axis lies along B0, and back. The field → χ networks were trained with B0
// along the volume's third axis; for an oblique acquisition Tessera rotates the field onto such a grid (about the volume
// centre, by the smallest rotation that takes B0 to the third axis, same voxel size), runs the network there and
// resamples χ back onto the source grid (ignoring a tilt costs the demo network NRMSE 0.02 per degree).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/geometry.h"

namespace tessera {

// How values between grid points are read: trilinear; Keys' cubic convolution (a = −½: interpolating, reproduces
// quadratics, 4×4×4 taps); or cubic B-spline on prefiltered coefficients (interpolating, reproduces cubics, 4×4×4 taps,
// the flattest frequency response of the three, a coefficient copy of the volume).
enum class Interpolation { Linear, Cubic, Spline };

// When a field → χ run resamples to a B0-aligned grid: above the warning threshold (auto), at any tilt (on), never (off).
enum class B0AlignMode { Auto, On, Off };

// The mode of a request's b0Align text.
// name is "auto", "on" or "off" (else Error InvalidArgument naming the choices).
B0AlignMode b0_align_mode_from_name(std::string_view name);
// "auto", "on" or "off".
std::string_view b0_align_mode_name(B0AlignMode mode);

// "linear", "cubic" or "spline".
std::string_view interpolation_name(Interpolation interpolation);
// The interpolation of this name.
// name is "linear", "cubic" or "spline" (else Error InvalidArgument).
Interpolation interpolation_from_name(std::string_view name);

// The angle between B0 and the volume's third axis in degrees, in [0, 90] (B0's sign is immaterial to the dipole kernel).
// b0_dir is finite and not zero (validate_geometry; else Error InvalidArgument).
double b0_tilt_degrees(const Vec3& b0_dir);

// The smallest rotation R (row-major) taking the unit B0 direction b (its sign flipped so that b_z >= 0) to (0, 0, 1):
// Rodrigues' formula about b × z. As a voxel-axes → scanner rotation it puts B0 on the scanner's z axis.
// b0_dir finite and not zero (validate_geometry's rule; else Error InvalidArgument).
std::array<double, 9> b0_rotation(const Vec3& b0_dir);

// A source grid and the B0-aligned grid it is resampled to. Index maps (x, y, z voxel indices, fractional allowed):
// aligned = to_aligned · (source − source_centre) + aligned_centre, source = to_source · (aligned − aligned_centre) +
// source_centre, where the centres are (dims − 1)/2: a rotation in millimetres about the volume centre.
struct B0Alignment {
  Geometry source;
  Geometry aligned;                   // dims holding every source mask voxel's stencil; source voxel size; b0_dir (0, 0, 1)
  double tilt_degrees = 0.0;
  Interpolation interpolation = Interpolation::Spline;
  std::array<double, 9> rotation{};   // row-major R (millimetres): R · B0 = ±(0, 0, 1); the identity when B0 is along z
  std::array<double, 9> to_aligned{}; // row-major index map V⁻¹ R V (V = diag(voxel size))
  std::array<double, 9> to_source{};  // row-major index map V⁻¹ Rᵀ V
  Vec3 source_centre{};
  Vec3 aligned_centre{};
};

// The B0-aligned grid of this volume: rotated about its centre by the smallest rotation taking B0 to the third axis,
// the same voxel size, and per axis the smallest dims (of the source dims' parity, so that at 0° every voxel lands on a
// voxel) such that every source mask voxel's interpolation stencil lies inside.
// source is valid (validate_geometry; else Error InvalidArgument).
// mask holds source.voxel_count() values and at least one nonzero (else Error InvalidArgument).
// The runs use the cubic B-spline: its round trip loses least (bench/b0-tilt.js).
B0Alignment b0_alignment(const Geometry& source, std::span<const uint8_t> mask,
                         Interpolation interpolation = Interpolation::Spline);

// The position on the aligned grid of a source voxel position (fractional indices).
Vec3 aligned_position(const B0Alignment& alignment, const Vec3& source_index);
// The position on the source grid of an aligned voxel position (fractional indices).
Vec3 source_position(const B0Alignment& alignment, const Vec3& aligned_index);

// The aligned grid's mask: every grid point of the stencil that reads a source mask voxel back, so the network's χ is
// computed wherever from_aligned_grid reads it.
// mask holds alignment.source.voxel_count() values (else Error InvalidArgument).
std::vector<uint8_t> aligned_mask(const B0Alignment& alignment, std::span<const uint8_t> mask);

// Source values resampled onto the aligned grid (0 beyond the source volume). With a mask, values × mask are
// resampled (a field a network reads inside the mask only).
// values holds alignment.source.voxel_count() values; mask is empty or the same size (else Error InvalidArgument).
std::vector<float> to_aligned_grid(const B0Alignment& alignment, std::span<const float> values,
                                   std::span<const uint8_t> mask = {});

// Aligned values resampled back at the source mask voxels; 0 outside the mask.
// aligned_values holds alignment.aligned.voxel_count() values (else Error InvalidArgument).
// mask holds alignment.source.voxel_count() values and is the mask the alignment was made for (else wrong stencils).
std::vector<float> from_aligned_grid(const B0Alignment& alignment, std::span<const float> aligned_values,
                                     std::span<const uint8_t> mask);

// What a plan does about B0 (reported with the plan, the run's report, the CLI and the page).
struct B0Plan {
  double tilt_degrees = 0.0;
  B0AlignMode mode = B0AlignMode::Auto;
  bool assumes_z = false;        // the network assumes B0 along the volume's third axis
  bool resampled = false;        // the run goes through the aligned grid
  Dims3 aligned_dims{0, 0, 0};   // the aligned grid's dims (resampled only)
  uint64_t extra_module_bytes = 0;  // what resampling adds to the module heap beside the aligned run's own volumes
  double threshold_degrees = 0.0;   // auto resamples above this tilt
  double warn_degrees = 0.0;        // a warning above this tilt
  std::string summary;           // one sentence: the tilt and what the run does about it
  std::string warning;           // above warn_degrees: the angle and what Tessera did; else empty
};

// The B0 decision of a run: resample when the network assumes B0 along the third axis and the mode asks for it (auto:
// above threshold_degrees), and the warning above warn_degrees. aligned_dims, when given, name the aligned grid in the
// summary.
// geometry is valid; 0 <= warn_degrees <= threshold_degrees.
B0Plan b0_plan(const Geometry& geometry, bool network_assumes_z, B0AlignMode mode, double threshold_degrees,
               double warn_degrees, const Dims3& aligned_dims = {0, 0, 0});

}  // namespace tessera
