#include "tessera/common/geometry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tessera/common/error.h"

namespace tessera {

std::string dims_text(const Dims3& d) {
  return std::to_string(d[0]) + "×" + std::to_string(d[1]) + "×" + std::to_string(d[2]);
}
std::string dims_text(const std::array<uint64_t, 3>& d) {
  return std::to_string(d[0]) + "×" + std::to_string(d[1]) + "×" + std::to_string(d[2]);
}

void validate_geometry(const Geometry& g) {
  for (int a = 0; a < 3; ++a) {
    if (g.dims[a] <= 0) {
      throw Error(ErrorCode::InvalidArgument,
                  "volume dims " + dims_text(g.dims) + " are invalid: every dimension must be at least 1");
    }
  }
  // 2^40 voxels is far beyond a browser; the bound keeps every product in 64 bits.
  constexpr int64_t kMaxDim = int64_t{1} << 20;
  for (int a = 0; a < 3; ++a) {
    if (g.dims[a] > kMaxDim) {
      throw Error(ErrorCode::InvalidArgument, "volume dims " + dims_text(g.dims) + " are too large (at most " +
                                                  std::to_string(kMaxDim) + " per axis)");
    }
  }
  if (g.voxel_count() > (uint64_t{1} << 40)) {
    throw Error(ErrorCode::InvalidArgument, "volume " + dims_text(g.dims) + " holds too many voxels");
  }
  if (g.voxel_count() > std::numeric_limits<size_t>::max() / sizeof(float)) {
    throw Error(ErrorCode::InvalidArgument, "volume " + dims_text(g.dims) + " cannot be addressed on this platform");
  }
  for (int a = 0; a < 3; ++a) {
    if (!(std::isfinite(g.voxel_mm[a]) && g.voxel_mm[a] > 0.0)) {
      throw Error(ErrorCode::InvalidArgument, "voxel size must be positive and finite on every axis (axis " +
                                                  std::to_string(a) + " is " + std::to_string(g.voxel_mm[a]) + " mm)");
    }
  }
  double n2 = 0.0;
  for (int a = 0; a < 3; ++a) {
    if (!std::isfinite(g.b0_dir[a])) {
      throw Error(ErrorCode::InvalidArgument, "B0 direction must be finite");
    }
    n2 += g.b0_dir[a] * g.b0_dir[a];
  }
  if (n2 == 0.0) {
    throw Error(ErrorCode::InvalidArgument, "B0 direction is the zero vector; give the field direction, e.g. (0, 0, 1)");
  }
}

void validate_volume_sizes(const Geometry& g, uint64_t field_size, uint64_t mask_size) {
  const uint64_t n = g.voxel_count();
  if (field_size != n) {
    throw Error(ErrorCode::InvalidArgument, "field holds " + std::to_string(field_size) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(n) + " voxels");
  }
  if (mask_size != n) {
    throw Error(ErrorCode::InvalidArgument, "mask holds " + std::to_string(mask_size) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(n) +
                                                " voxels: field and mask must have the same dims");
  }
}

void validate_mask_not_empty(const Geometry& g, std::span<const uint8_t> mask) {
  if (mask.empty() || std::any_of(mask.begin(), mask.end(), [](uint8_t v) { return v != 0; })) return;
  throw Error(ErrorCode::InvalidArgument,
              "the mask holds no voxel: all " + std::to_string(mask.size()) + " values of the " + dims_text(g.dims) +
                  " mask are 0, so there is nothing to invert; check the mask file (a brain mask, not an empty "
                  "volume), the threshold that made it, or that it belongs to this field");
}

void validate_finite(const Geometry& g, std::span<const float> field) {
  uint64_t bad = 0;
  uint64_t first = 0;
  for (uint64_t i = 0; i < field.size(); ++i) {
    if (!std::isfinite(field[i])) {
      if (bad == 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) return;
  const uint64_t nx = static_cast<uint64_t>(g.dims[0]), ny = static_cast<uint64_t>(g.dims[1]);
  const uint64_t x = first % nx, y = (first / nx) % ny, z = first / (nx * ny);
  throw Error(ErrorCode::NonFiniteInput,
              "field has " + std::to_string(bad) + " non-finite voxel" + (bad == 1 ? "" : "s") +
                  " (NaN or Inf), the first at (" + std::to_string(x) + ", " + std::to_string(y) + ", " +
                  std::to_string(z) + "); replace them with 0 (and exclude them from the mask) before inverting");
}

}  // namespace tessera
