// Volume geometry: dims, voxel size and B0 direction. Volumes are stored x-fastest like
// NIfTI (index x + nx*(y + ny*z)); the caller owns every buffer.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace tessera {

using Dims3 = std::array<int64_t, 3>;
using Vec3 = std::array<double, 3>;

struct Geometry {
  Dims3 dims{0, 0, 0};
  Vec3 voxel_mm{1.0, 1.0, 1.0};
  Vec3 b0_dir{0.0, 0.0, 1.0};  // need not be unit length; consumers normalise where the model says so

  // Number of voxels, in 64 bits (never overflows size_t on wasm32 silently: see validate).
  uint64_t voxel_count() const {
    return static_cast<uint64_t>(dims[0]) * static_cast<uint64_t>(dims[1]) * static_cast<uint64_t>(dims[2]);
  }
  // Linear x-fastest index of (x, y, z).
  uint64_t index(int64_t x, int64_t y, int64_t z) const {
    return static_cast<uint64_t>(x) +
           static_cast<uint64_t>(dims[0]) * (static_cast<uint64_t>(y) + static_cast<uint64_t>(dims[1]) * static_cast<uint64_t>(z));
  }
};

// "X×Y×Z", for messages.
std::string dims_text(const Dims3& dims);
std::string dims_text(const std::array<uint64_t, 3>& dims);

// Throws Error(InvalidArgument) naming the problem: a zero or negative dim, a volume too large
// to address, a non-positive or non-finite voxel size, a zero or non-finite B0 direction.
void validate_geometry(const Geometry& geometry);

// Throws Error(InvalidArgument) when field or mask does not hold exactly voxel_count() values.
void validate_volume_sizes(const Geometry& geometry, uint64_t field_size, uint64_t mask_size);

// Throws Error(InvalidArgument) when a mask is given (non-empty) but holds no voxel inside (every value 0): a run
// on it would write an all-zero χ. An empty span means "no mask" and passes.
void validate_mask_not_empty(const Geometry& geometry, std::span<const uint8_t> mask);

// Throws Error(NonFiniteInput) with the count and the first position of NaN/Inf voxels.
// Tessera rejects non-finite fields rather than zeroing them silently.
void validate_finite(const Geometry& geometry, std::span<const float> field);

}  // namespace tessera
