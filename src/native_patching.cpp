#include "tessera/native_patching.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <string>

#include "tessera/error.h"

namespace tessera {

namespace {

// 1D blend weight of output index j of patch k (of K) with `overlap` voxels shared with each neighbour.
double blend_weight(int64_t j, int64_t k, int64_t patches, int64_t output, int64_t overlap) {
  if (overlap <= 0) return 1.0;
  if (k > 0 && j < overlap) return (static_cast<double>(j) + 0.5) / static_cast<double>(overlap);
  if (k < patches - 1 && j >= output - overlap) {
    return (static_cast<double>(output - j) - 0.5) / static_cast<double>(overlap);
  }
  return 1.0;
}

// Runs net over the native patch grid of `input` (host layout, already transformed for the network) and returns the
// blended outputs (host layout, transformed by `post` before blending).
std::vector<float> run_native_patches(const Geometry& g, const std::vector<float>& input, PatchRunner& net,
                                      int64_t in, int64_t out, int64_t stride, const char* model,
                                      const std::function<double(float)>& post) {
  const auto grid = native_patch_grid(g.dims, in, out, stride);
  const int64_t offset = (in - out) / 2;  // the output is the centre of the input patch
  const int64_t overlap = out - stride;
  const int64_t nx = g.dims[0], ny = g.dims[1], nz = g.dims[2];
  std::vector<double> acc(static_cast<size_t>(g.voxel_count()), 0.0);
  TensorShape shape;
  shape.channels = 1;
  shape.dims = {static_cast<uint64_t>(in), static_cast<uint64_t>(in), static_cast<uint64_t>(in)};
  std::vector<float> patch(static_cast<size_t>(shape.size()));
  std::vector<int64_t> cx(in), cy(in), cz(in);
  std::vector<double> wx(out), wy(out), wz(out);
  uint64_t call = 0;
  const uint64_t total = static_cast<uint64_t>(grid[0] * grid[1] * grid[2]);
  for (int64_t kz = 0; kz < grid[2]; ++kz)
    for (int64_t ky = 0; ky < grid[1]; ++ky)
      for (int64_t kx = 0; kx < grid[0]; ++kx) {
        ++call;
        // Input: clamped coordinates (edge-replicate padding), network layout (z fastest).
        for (int64_t j = 0; j < in; ++j) {
          cx[j] = std::clamp<int64_t>(kx * stride - offset + j, 0, nx - 1);
          cy[j] = std::clamp<int64_t>(ky * stride - offset + j, 0, ny - 1);
          cz[j] = std::clamp<int64_t>(kz * stride - offset + j, 0, nz - 1);
        }
        size_t p = 0;
        for (int64_t i = 0; i < in; ++i)
          for (int64_t j = 0; j < in; ++j)
            for (int64_t k = 0; k < in; ++k) patch[p++] = input[g.index(cx[i], cy[j], cz[k])];
        const std::string what = std::string(model) + ": network (patch " + std::to_string(call) + " of " +
                                 std::to_string(total) + ")";
        const std::vector<float> result = run_checked(
            net, patch, shape,
            TensorShape{1, {static_cast<uint64_t>(out), static_cast<uint64_t>(out), static_cast<uint64_t>(out)}}, what);
        for (int64_t j = 0; j < out; ++j) {
          wx[j] = blend_weight(j, kx, grid[0], out, overlap);
          wy[j] = blend_weight(j, ky, grid[1], out, overlap);
          wz[j] = blend_weight(j, kz, grid[2], out, overlap);
        }
        // Output voxel (i, j, k) of the patch is volume voxel (kx*stride + i, ...); outside the volume it is dropped.
        for (int64_t i = 0; i < out; ++i) {
          const int64_t x = kx * stride + i;
          if (x >= nx) break;
          for (int64_t j = 0; j < out; ++j) {
            const int64_t y = ky * stride + j;
            if (y >= ny) break;
            const double wxy = wx[i] * wy[j];
            const float* src = result.data() + (i * out + j) * out;
            for (int64_t k = 0; k < out; ++k) {
              const int64_t z = kz * stride + k;
              if (z >= nz) break;
              acc[g.index(x, y, z)] += wxy * wz[k] * post(src[k]);
            }
          }
        }
      }
  std::vector<float> chi(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) chi[i] = static_cast<float>(acc[i]);
  return chi;
}

void validate_inputs(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask) {
  validate_geometry(g);
  validate_volume_sizes(g, field.size(), mask.size());
  validate_finite(g, field);
}

}  // namespace

std::array<int64_t, 3> native_patch_grid(const Dims3& dims, int64_t input, int64_t output, int64_t stride) {
  if (!(stride >= 1 && stride <= output && output <= input)) {
    throw Error(ErrorCode::InvalidArgument, "native_patch_grid: need 1 <= stride <= output <= input, got stride " +
                                                std::to_string(stride) + ", output " + std::to_string(output) +
                                                ", input " + std::to_string(input));
  }
  std::array<int64_t, 3> grid{};
  for (int a = 0; a < 3; ++a) {
    if (dims[a] <= 0) {
      throw Error(ErrorCode::InvalidArgument,
                  "native_patch_grid: dims " + dims_text(dims) + " are invalid: every dimension must be at least 1");
    }
    grid[a] = dims[a] <= output ? 1 : (dims[a] - output + stride - 1) / stride + 1;
  }
  return grid;
}

uint64_t autoqsm_patch_count(const Dims3& dims) {
  using namespace autoqsm_constants;
  const auto g = native_patch_grid(dims, input, output, stride);
  return static_cast<uint64_t>(g[0]) * static_cast<uint64_t>(g[1]) * static_cast<uint64_t>(g[2]);
}

uint64_t qsmgan_patch_count(const Dims3& dims) {
  using namespace qsmgan_constants;
  const auto g = native_patch_grid(dims, input, output, stride);
  return static_cast<uint64_t>(g[0]) * static_cast<uint64_t>(g[1]) * static_cast<uint64_t>(g[2]);
}

std::vector<float> autoqsm_invert(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                  PatchRunner& net) {
  using namespace autoqsm_constants;
  validate_inputs(g, field, mask);
  const std::vector<float> in(field.begin(), field.end());
  std::vector<float> chi =
      run_native_patches(g, in, net, input, output, stride, "autoqsm", [](float v) { return static_cast<double>(v); });
  for (size_t i = 0; i < chi.size(); ++i) {
    if (!mask[i]) chi[i] = 0.0f;
  }
  return chi;
}

std::vector<float> qsmgan_invert(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                 PatchRunner& net) {
  using namespace qsmgan_constants;
  validate_inputs(g, field, mask);
  std::vector<float> in(field.size());
  const float scale = static_cast<float>(input_scale);
  for (size_t i = 0; i < in.size(); ++i) in[i] = scale * field[i];
  std::vector<float> chi = run_native_patches(g, in, net, input, output, stride, "qsmgan", [](float v) {
    const double c = std::clamp(static_cast<double>(v), -clip, clip);
    return std::atanh(c) / output_divisor;
  });
  for (size_t i = 0; i < chi.size(); ++i) {
    if (!mask[i]) chi[i] = 0.0f;
  }
  return chi;
}

}  // namespace tessera
