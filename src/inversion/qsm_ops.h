// Volume operations the iterative dipole inversions share (iLSQR, NDI, MEDI, TFI): k-space kernel application without
// padding, forward-difference gradient and its exact adjoint, parallel dot products, percentiles, input checks.
// Every loop runs on parallel_for / parallel_sum, so results are bit-identical for any thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/conjugate_gradient.h"
#include "common/parallel.h"
#include "tessera/common/error.h"
#include "tessera/common/fft.h"
#include "tessera/common/geometry.h"

namespace tessera::qsm_ops {

// out = real(ifft(kernel . fft(in))): circular convolution with a real k-space kernel (DC at index 0).
// in, out, kernel and buf hold the same count, dims[0]*dims[1]*dims[2]; in and out may alias.
inline void convolve(const Dims3& dims, std::span<const float> kernel, std::span<const float> in, std::span<float> out,
                     std::span<Complex> buf, unsigned threads) {
  const uint64_t n = buf.size();
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) buf[i] = Complex(in[i], 0.0f);
  });
  fft3d_forward(buf, dims, threads);
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) buf[i] *= kernel[i];
  });
  fft3d_inverse(buf, dims, threads);
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) out[i] = buf[i].real();
  });
}

inline double norm(std::span<const float> a, unsigned threads) { return std::sqrt(dot(a, a, threads)); }

// Forward differences per mm along x, y, z; zero at the last index of each axis (Neumann boundary).
// x, gx, gy, gz hold geometry.voxel_count() values.
inline void gradient(const Geometry& g, std::span<const float> x, std::span<float> gx, std::span<float> gy,
                     std::span<float> gz, unsigned threads) {
  const int64_t nx = g.dims[0], ny = g.dims[1], nz = g.dims[2];
  const uint64_t sy = static_cast<uint64_t>(nx), sz = static_cast<uint64_t>(nx) * static_cast<uint64_t>(ny);
  const float hx = static_cast<float>(1.0 / g.voxel_mm[0]), hy = static_cast<float>(1.0 / g.voxel_mm[1]),
              hz = static_cast<float>(1.0 / g.voxel_mm[2]);
  parallel_for(g.voxel_count(), threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const int64_t ix = static_cast<int64_t>(i % sy), iy = static_cast<int64_t>((i / sy) % static_cast<uint64_t>(ny)),
                    iz = static_cast<int64_t>(i / sz);
      gx[i] = ix + 1 < nx ? (x[i + 1] - x[i]) * hx : 0.0f;
      gy[i] = iy + 1 < ny ? (x[i + sy] - x[i]) * hy : 0.0f;
      gz[i] = iz + 1 < nz ? (x[i + sz] - x[i]) * hz : 0.0f;
    }
  });
}

// out = Gᵀ(gx, gy, gz), the exact adjoint of gradient() (minus a divergence).
// gx, gy, gz, out hold geometry.voxel_count() values; out aliases none of them.
inline void gradient_adjoint(const Geometry& g, std::span<const float> gx, std::span<const float> gy,
                             std::span<const float> gz, std::span<float> out, unsigned threads) {
  const int64_t nx = g.dims[0], ny = g.dims[1], nz = g.dims[2];
  const uint64_t sy = static_cast<uint64_t>(nx), sz = static_cast<uint64_t>(nx) * static_cast<uint64_t>(ny);
  const float hx = static_cast<float>(1.0 / g.voxel_mm[0]), hy = static_cast<float>(1.0 / g.voxel_mm[1]),
              hz = static_cast<float>(1.0 / g.voxel_mm[2]);
  parallel_for(g.voxel_count(), threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const int64_t ix = static_cast<int64_t>(i % sy), iy = static_cast<int64_t>((i / sy) % static_cast<uint64_t>(ny)),
                    iz = static_cast<int64_t>(i / sz);
      float sx = (ix > 0 ? gx[i - 1] : 0.0f) - (ix + 1 < nx ? gx[i] : 0.0f);
      float s2 = (iy > 0 ? gy[i - sy] : 0.0f) - (iy + 1 < ny ? gy[i] : 0.0f);
      float s3 = (iz > 0 ? gz[i - sz] : 0.0f) - (iz + 1 < nz ? gz[i] : 0.0f);
      out[i] = sx * hx + s2 * hy + s3 * hz;
    }
  });
}

// The p-th percentile (p in [0, 100]) of values with linear interpolation between order statistics (numpy's default:
// rank p/100·(n−1)). values is reordered. values is not empty.
inline double percentile(std::vector<float>& values, double p) {
  const uint64_t n = values.size();
  if (n == 1) return values[0];
  const double h = p / 100.0 * static_cast<double>(n - 1);
  const uint64_t lo = std::min<uint64_t>(static_cast<uint64_t>(std::floor(h)), n - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(lo), values.end());
  const double vlo = values[lo];
  if (lo + 1 >= n) return vlo;
  const double vhi = *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(lo) + 1, values.end());
  return vlo + (h - static_cast<double>(lo)) * (vhi - vlo);
}

// The MEDI edge mask M_G: 3 volumes (x, y, z gradient components), 1 where the gradient prior applies, 0 at an edge,
// an edge being a component of |∇(magnitude · mask)| above the (1 − edge_fraction) quantile of the mask's components
// (the MEDI toolbox's gradient_mask). scratch holds voxel_count values (overwritten).
// magnitude and mask hold geometry.voxel_count() values; the mask holds a voxel; edge_fraction in [0, 1).
inline std::vector<float> edge_mask(const Geometry& g, std::span<const float> magnitude, std::span<const uint8_t> mask,
                                    double edge_fraction, std::span<float> scratch, unsigned threads) {
  const uint64_t n = g.voxel_count();
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) scratch[i] = mask[i] ? magnitude[i] : 0.0f;
  });
  std::vector<float> edges(3 * n);
  const std::span<float> ex(edges.data(), n), ey(edges.data() + n, n), ez(edges.data() + 2 * n, n);
  gradient(g, scratch, ex, ey, ez, threads);
  double threshold;
  {
    std::vector<float> inside;
    inside.reserve(3 * n);
    for (uint64_t a = 0; a < 3; ++a)
      for (uint64_t i = 0; i < n; ++i)
        if (mask[i]) inside.push_back(std::fabs(edges[a * n + i]));
    threshold = percentile(inside, 100.0 * (1.0 - edge_fraction));
  }
  parallel_for(3 * n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) edges[i] = std::fabs(edges[i]) <= threshold ? 1.0f : 0.0f;
  });
  return edges;
}

// m² with m = magnitude / mean(magnitude in the mask) inside the mask, 0 outside (the MEDI toolbox's SNR weighting).
// magnitude and mask hold out.size() values; the magnitude's sum over the mask is > 0.
inline void squared_magnitude_weights(std::span<const float> magnitude, std::span<const uint8_t> mask, std::span<float> out,
                                      unsigned threads) {
  const uint64_t n = out.size();
  const double total = parallel_sum(n, threads, [&](uint64_t i) { return mask[i] ? static_cast<double>(magnitude[i]) : 0.0; });
  const double count = parallel_sum(n, threads, [&](uint64_t i) { return mask[i] ? 1.0 : 0.0; });
  const float inv_mean = static_cast<float>(count / total);
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const float m = mask[i] ? magnitude[i] * inv_mean : 0.0f;
      out[i] = m * m;
    }
  });
}

// Refuses a method's parameter or input: Error(InvalidArgument) "method: what".
[[noreturn]] inline void refuse(const char* method, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, std::string(method) + ": " + what);
}

// Checks a method's field and mask (sizes, finite field, a voxel inside), naming the method.
inline void check_field_and_mask(const char* method, const Geometry& g, std::span<const float> field,
                                 std::span<const uint8_t> mask) {
  validate_geometry(g);
  validate_volume_sizes(g, field.size(), mask.size());
  validate_finite(g, field);
  bool any = false;
  for (uint8_t m : mask) any = any || m != 0;
  if (!any) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(method) + ": the mask holds no voxel inside (all zero): give the brain mask of the field");
  }
}

// Checks a magnitude volume (given = non-empty): one value per voxel, finite, >= 0, not all zero inside the mask.
inline void check_magnitude(const char* method, const Geometry& g, std::span<const float> magnitude,
                            std::span<const uint8_t> mask) {
  if (magnitude.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, std::string(method) + ": the magnitude holds " +
                                                std::to_string(magnitude.size()) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(g.voxel_count()) +
                                                ": give one magnitude volume of the field's dims");
  }
  double inside = 0.0;
  for (uint64_t i = 0; i < magnitude.size(); ++i) {
    const float m = magnitude[i];
    if (!std::isfinite(m) || m < 0.0f) {
      throw Error(ErrorCode::InvalidArgument, std::string(method) + ": the magnitude must be finite and >= 0, got " +
                                                  std::to_string(m) + " at voxel " + std::to_string(i));
    }
    if (mask[i]) inside += m;
  }
  if (!(inside > 0.0)) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(method) + ": the magnitude is zero everywhere inside the mask: give the magnitude image");
  }
}

}  // namespace tessera::qsm_ops
