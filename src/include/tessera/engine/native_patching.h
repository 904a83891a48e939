// Networks that only run on their own fixed patch size (as published, they cannot follow the user's
// tile settings): AutoQSM (64^3 in -> central 32^3 out, stride 24, 8-voxel linear blend) and QSMGAN
// (64^3 in -> central 48^3 out, stride 48, no overlap). Input patches read the volume with
// edge-replicate padding (coordinates clamped to the volume); every voxel is covered by the outputs.
// Patches are visited one after another, x-fastest (the patch index along x changes fastest).
// Volumes are host layout (x-fastest); each patch goes to the runner as [1, 1, 64, 64, 64], z fastest.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/common/geometry.h"
#include "tessera/engine/runner.h"

namespace tessera {

namespace autoqsm_constants {
constexpr int64_t input = 64;
constexpr int64_t output = 32;  // the central 32^3 of the input patch
constexpr int64_t stride = 24;  // consecutive outputs overlap by output - stride = 8 voxels
}  // namespace autoqsm_constants

namespace qsmgan_constants {
constexpr int64_t input = 64;
constexpr int64_t output = 48;  // the central 48^3 of the input patch
constexpr int64_t stride = 48;
constexpr double input_scale = -100.0;  // the network sees -100 * field (ppm)
constexpr double clip = 0.999999;       // chi = atanh(clip(out, +-clip)) / 10
constexpr double output_divisor = 10.0;
}  // namespace qsmgan_constants

// Patches per axis for a native patch grid: 1 if n <= output, else ceil((n - output)/stride) + 1.
// every dims[a] >= 1; 1 <= stride <= output <= input (else Error InvalidArgument).
std::array<int64_t, 3> native_patch_grid(const Dims3& dims, int64_t input, int64_t output, int64_t stride);

// Number of runner calls autoqsm_invert makes for dims. every dims[a] >= 1 (else Error InvalidArgument).
uint64_t autoqsm_patch_count(const Dims3& dims);

// Number of runner calls qsmgan_invert makes for dims. every dims[a] >= 1 (else Error InvalidArgument).
uint64_t qsmgan_patch_count(const Dims3& dims);

// AutoQSM on the total field (ppm, unmasked): output patch k covers voxels [24k, 24k + 32) on each axis; in the 8 voxels
// shared by two neighbours their outputs are blended linearly (weights (j + 0.5)/8 and 1 - that, separable over axes,
// summing to exactly 1 everywhere). Returns chi (ppm) times the mask.
// geometry valid; field.size() == mask.size() == voxel_count (else Error InvalidArgument); field finite (else NonFiniteInput).
// net returns 32^3 values per call (else Error RunnerFailed); a runner exception becomes Error RunnerFailed.
std::vector<float> autoqsm_invert(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                                  PatchRunner& net);

// QSMGAN: the network sees -100 * field (ppm, unmasked); output patch k covers voxels [48k, 48k + 48) on each axis
// (no overlap); chi = atanh(clip(out, +-0.999999)) / 10, times the mask.
// geometry valid; field.size() == mask.size() == voxel_count (else Error InvalidArgument); field finite (else NonFiniteInput).
// net returns 48^3 values per call (else Error RunnerFailed); a runner exception becomes Error RunnerFailed.
std::vector<float> qsmgan_invert(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                                 PatchRunner& net);

}  // namespace tessera
