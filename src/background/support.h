// Background removal's shared helpers: input checks, padding, the refusing erosion on the padded box, the SMV kernel
// (the mask's box and its erosion: tessera/common/morphology.h). Internal to the background layer (include as
// "background/support.h").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/fft.h"
#include "tessera/common/geometry.h"
#include "tessera/common/morphology.h"

namespace tessera::background_internal {

[[noreturn]] void invalid(const std::string& message);

// Sizes, a mask with a voxel, a field finite wherever the mask holds (outside it the methods never read it).
// Throws Error(InvalidArgument) or Error(NonFiniteInput) naming `what`.
void check_inputs(const char* what, const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask);

uint64_t count(const Dims3& d);

// Calls f(volume index, padded index) for every voxel of the box (the box sits at the padded volume's low corner).
template <typename F>
inline void for_each_box_voxel(const Geometry& g, const MaskBox& box, const Dims3& padded, F&& f) {
  const Dims3 ext = box.ext();
  for (int64_t z = 0; z < ext[2]; ++z)
    for (int64_t y = 0; y < ext[1]; ++y) {
      const uint64_t vi = g.index(box.lo[0], box.lo[1] + y, box.lo[2] + z);
      const uint64_t pi = static_cast<uint64_t>(padded[0]) * (static_cast<uint64_t>(y) + static_cast<uint64_t>(padded[1]) * static_cast<uint64_t>(z));
      for (int64_t x = 0; x < ext[0]; ++x) f(vi + static_cast<uint64_t>(x), pi + static_cast<uint64_t>(x));
    }
}

double min_edge(const Vec3& v);
double max_edge(const Vec3& v);

// Real part of a complex buffer into / from floats, elementwise (deterministic for any thread count).
void load_real(std::vector<Complex>& c, const std::vector<float>& v, unsigned threads);

// The padded dims of a box for a spherical kernel: the box grown by the radius on each side, rounded up to a fast size.
Dims3 smv_padded(const Dims3& ext, const Vec3& voxel_mm, double r_mm);

// The box's voxels (padded layout, the box at the low corner) whose sphere of radius_mm lies inside the mask: the exact
// erosion of erode_mask_mm. A radius that leaves no voxel is refused: Error(InvalidArgument) naming `parameter` (e.g.
// "sharp: radius_mm"), the radius and how deep the mask's deepest voxel lies. geometry valid; the mask holds a voxel.
std::vector<uint8_t> eroded_or_refuse(const std::string& parameter, const Geometry& g, std::span<const uint8_t> mask,
                                      const MaskBox& box, const Dims3& padded, double radius_mm, unsigned threads);

// The grid of a one-radius SMV method (SHARP, RESHARP, iSMV): the mask's box, the box padded for the kernel, the
// box's voxels whose sphere lies inside the mask (padded layout), and the radius used.
struct SmvGrid {
  MaskBox box;
  Dims3 padded{0, 0, 0};
  std::vector<uint8_t> eroded;
  double radius_mm = 0.0;
};

// How a radius shrinks to the mask's depth: from the asked radius down by step_mm while its erosion keeps less than
// min_share of the mask's voxels, to floor_mm at the least. min_share 0: the asked radius always.
struct SmvAdapt {
  double min_share = 0.0;
  double floor_mm = 0.0;
  double step_mm = 0.0;
};

// The SmvGrid of mask for a kernel of radius_mm (or, with adapt, the largest radius of adapt's rule): smv_padded, the
// padded grid checked, the erosion (refused naming `parameter`, the radius and the mask's depth when the radius leaves
// no voxel). geometry valid; the mask holds a voxel; adapt.step_mm > 0 when adapt.min_share > 0.
SmvGrid smv_grid(const std::string& parameter, const Geometry& g, std::span<const uint8_t> mask, double radius_mm,
                 unsigned threads, const SmvAdapt& adapt = {});

// The spherical mean value kernel S of radius r_mm (voxels with |d|² <= r², normalised to sum 1) in k-space on the
// padded grid (real: the sphere is symmetric). Uses `work` as scratch (resized to the padded count).
std::vector<float> smv_kernel_hat(const Geometry& g, const Dims3& padded, double r_mm, std::vector<Complex>& work,
                                  unsigned threads);

}  // namespace tessera::background_internal
