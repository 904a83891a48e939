#include "tessera/common/dipole.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <numbers>
#include <string>

#include "tessera/common/error.h"
#include "tessera/common/fft.h"

namespace tessera {

namespace {

void check_size(const char* what, const char* name, uint64_t got, const Dims3& dims, uint64_t want) {
  if (got != want) {
    throw Error(ErrorCode::InvalidArgument, std::string(what) + ": " + name + " holds " + std::to_string(got) +
                                                " values but the volume " + dims_text(dims) + " has " +
                                                std::to_string(want) + " voxels");
  }
}

void check_pad(const char* what, int pad_factor) {
  if (pad_factor < 1 || pad_factor > 4) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(what) + ": pad_factor must be 1 (no padding) to 4, got " + std::to_string(pad_factor));
  }
}

Geometry padded_geometry(const Geometry& g, int pad_factor) {
  Geometry p = g;
  for (int a = 0; a < 3; ++a) p.dims[a] = g.dims[a] * pad_factor;
  return p;
}

// Zero-padded complex copy of a real volume, placed at the low corner.
std::vector<Complex> pad_complex(const Geometry& g, const Geometry& p, std::span<const float> v) {
  std::vector<Complex> out(static_cast<size_t>(p.voxel_count()), Complex(0.0f, 0.0f));
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      const float* src = v.data() + g.index(0, y, z);
      Complex* dst = out.data() + p.index(0, y, z);
      for (int64_t x = 0; x < g.dims[0]; ++x) dst[x] = Complex(src[x], 0.0f);
    }
  return out;
}

std::vector<float> crop_real(const Geometry& g, const Geometry& p, const std::vector<Complex>& c) {
  std::vector<float> out(static_cast<size_t>(g.voxel_count()));
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      const Complex* src = c.data() + p.index(0, y, z);
      float* dst = out.data() + g.index(0, y, z);
      for (int64_t x = 0; x < g.dims[0]; ++x) dst[x] = src[x].real();
    }
  return out;
}

// The raised-cosine taper of one axis's band: 1 below (1 − kNyquistTaperBand) of the Nyquist frequency, falling to 0
// at it.
// The outer half of the band: the kernel stays exact for features of 4 voxels and more, and the taper's real-space
// kernel is short enough that the field of a head 30° off B0 is as harmonic inside the brain as upright's.
constexpr double kNyquistTaperBand = 0.5;

double nyquist_taper(double k, int64_t n, double spacing) {
  const double nyquist = 0.5 / spacing;
  const double start = (1.0 - kNyquistTaperBand) * nyquist;
  const double a = std::fabs(k);
  if (n < 2 || a <= start) return 1.0;
  const double s = std::min(1.0, (a - start) / (nyquist - start));
  return 0.5 * (1.0 + std::cos(std::numbers::pi * s));
}

// Calls f(index, D) for every voxel of the kernel of g (x-fastest order), D in double; nothing the size of the
// volume is allocated, so forward_field and tkd multiply by the kernel without materialising it.
// taper_cross_terms (Standard only): the cross terms 2·b_a·b_c·k_a·k_c of (k·b)² are multiplied by the Nyquist
// tapers of both axes (see forward_field_band_limited); they are 0 for a B0 along an axis, which keeps that kernel.
template <typename F>
void for_each_kernel_value(const Geometry& g, DipoleConvention convention, F&& f, bool taper_cross_terms = false) {
  const int64_t nx = g.dims[0], ny = g.dims[1], nz = g.dims[2];
  Vec3 b = g.b0_dir;
  std::vector<double> kx(static_cast<size_t>(nx)), ky(static_cast<size_t>(ny)), kz(static_cast<size_t>(nz));
  if (convention == DipoleConvention::Standard) {
    const double norm = std::sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]);
    for (auto& c : b) c /= norm;
    for (int64_t i = 0; i < nx; ++i) kx[i] = fft_frequency(i, nx, g.voxel_mm[0]);
    for (int64_t i = 0; i < ny; ++i) ky[i] = fft_frequency(i, ny, g.voxel_mm[1]);
    for (int64_t i = 0; i < nz; ++i) kz[i] = fft_frequency(i, nz, g.voxel_mm[2]);
  } else {
    auto fill = [](std::vector<double>& k, int64_t n, double v) {
      for (int64_t i = 0; i < n; ++i) {
        k[static_cast<size_t>((i + n / 2) % n)] = static_cast<double>(i - n / 2) / (static_cast<double>(n) * v);
      }
    };
    fill(kx, nx, g.voxel_mm[0]);
    fill(ky, ny, g.voxel_mm[1]);
    fill(kz, nz, g.voxel_mm[2]);
  }
  const double eps = static_cast<double>(FLT_EPSILON);
  // the taper per frequency of each axis (1 inside the band, where the kernel is the Standard one bit for bit)
  std::array<std::vector<double>, 3> taper;
  if (taper_cross_terms) {
    const std::vector<double>* k[3] = {&kx, &ky, &kz};
    for (int a = 0; a < 3; ++a) {
      taper[a].resize(k[a]->size());
      for (size_t i = 0; i < k[a]->size(); ++i) taper[a][i] = nyquist_taper((*k[a])[i], g.dims[a], g.voxel_mm[a]);
    }
  }
  size_t idx = 0;
  for (int64_t z = 0; z < nz; ++z)
    for (int64_t y = 0; y < ny; ++y)
      for (int64_t x = 0; x < nx; ++x, ++idx) {
        const double k2 = kx[x] * kx[x] + ky[y] * ky[y] + kz[z] * kz[z];
        const double kb = kx[x] * b[0] + ky[y] * b[1] + kz[z] * b[2];
        double kb2 = kb * kb;
        if (taper_cross_terms) {
          // 2·b_a·b_c·k_a·k_c·(1 − t_a·t_c) removed: the cross terms tapered to 0 at either axis's Nyquist frequency
          const double tx = taper[0][x], ty = taper[1][y], tz = taper[2][z];
          kb2 -= 2.0 * (b[0] * b[1] * kx[x] * ky[y] * (1.0 - tx * ty) + b[1] * b[2] * ky[y] * kz[z] * (1.0 - ty * tz) +
                        b[0] * b[2] * kx[x] * kz[z] * (1.0 - tx * tz));
        }
        double d;
        if (convention == DipoleConvention::Standard) {
          d = (k2 == 0.0) ? 0.0 : 1.0 / 3.0 - kb2 / k2;
        } else {
          d = 1.0 / 3.0 - kb * kb / (k2 + eps);
        }
        f(idx, d);
      }
}

}  // namespace

double fft_frequency(int64_t i, int64_t n, double spacing) {
  const int64_t f = (i < (n + 1) / 2) ? i : i - n;
  return static_cast<double>(f) / (static_cast<double>(n) * spacing);
}

std::vector<float> dipole_kernel(const Geometry& g, DipoleConvention convention) {
  validate_geometry(g);
  std::vector<float> kernel(static_cast<size_t>(g.voxel_count()));
  for_each_kernel_value(g, convention, [&](size_t i, double d) { kernel[i] = static_cast<float>(d); });
  return kernel;
}

std::vector<float> apply_kernel(const Dims3& dims, std::span<const float> kernel, std::span<const float> volume,
                                unsigned threads) {
  for (int a = 0; a < 3; ++a) {
    if (dims[a] <= 0) {
      throw Error(ErrorCode::InvalidArgument,
                  "apply_kernel: dims " + dims_text(dims) + " are invalid: every dimension must be at least 1");
    }
  }
  const uint64_t n = static_cast<uint64_t>(dims[0]) * static_cast<uint64_t>(dims[1]) * static_cast<uint64_t>(dims[2]);
  check_size("apply_kernel", "kernel", kernel.size(), dims, n);
  check_size("apply_kernel", "volume", volume.size(), dims, n);
  std::vector<Complex> c(volume.size());
  for (size_t i = 0; i < volume.size(); ++i) c[i] = Complex(volume[i], 0.0f);
  fft3d_forward(c, dims, threads);
  for (size_t i = 0; i < c.size(); ++i) c[i] *= kernel[i];
  fft3d_inverse(c, dims, threads);
  std::vector<float> out(volume.size());
  for (size_t i = 0; i < c.size(); ++i) out[i] = c[i].real();
  return out;
}

std::vector<float> dipole_convolve(const Geometry& g, std::span<const float> volume, DipoleConvention convention,
                                   unsigned threads) {
  validate_geometry(g);
  check_size("dipole_convolve", "volume", volume.size(), g.dims, g.voxel_count());
  const std::vector<float> kernel = dipole_kernel(g, convention);
  return apply_kernel(g.dims, kernel, volume, threads);
}

std::vector<float> forward_field(const Geometry& g, std::span<const float> chi, int pad_factor, unsigned threads) {
  validate_geometry(g);
  check_pad("forward_field", pad_factor);
  check_size("forward_field", "chi", chi.size(), g.dims, g.voxel_count());
  const Geometry p = padded_geometry(g, pad_factor);
  validate_geometry(p);
  std::vector<Complex> c = pad_complex(g, p, chi);
  fft3d_forward(c, p.dims, threads);
  for_each_kernel_value(p, DipoleConvention::Standard, [&](size_t i, double d) { c[i] *= static_cast<float>(d); });
  fft3d_inverse(c, p.dims, threads);
  return crop_real(g, p, c);
}

std::vector<float> forward_field_band_limited(const Geometry& g, std::span<const float> chi, int pad_factor,
                                              unsigned threads) {
  validate_geometry(g);
  check_pad("forward_field_band_limited", pad_factor);
  check_size("forward_field_band_limited", "chi", chi.size(), g.dims, g.voxel_count());
  const Geometry p = padded_geometry(g, pad_factor);
  validate_geometry(p);
  std::vector<Complex> c = pad_complex(g, p, chi);
  fft3d_forward(c, p.dims, threads);
  for_each_kernel_value(
      p, DipoleConvention::Standard, [&](size_t i, double d) { c[i] *= static_cast<float>(d); }, true);
  fft3d_inverse(c, p.dims, threads);
  return crop_real(g, p, c);
}

uint64_t dipole_workspace_bytes(const Geometry& g, int pad_factor, unsigned threads) {
  validate_geometry(g);
  check_pad("dipole_workspace_bytes", pad_factor);
  const Geometry p = padded_geometry(g, pad_factor);
  validate_geometry(p);
  const uint64_t n = p.voxel_count();
  // the padded complex volume, the cropped real result, FFT scratch (the kernel is computed on the fly)
  return n * sizeof(Complex) + g.voxel_count() * sizeof(float) + fft3d_workspace_bytes(p.dims, threads);
}

std::vector<float> tkd(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, float threshold,
                       int pad_factor, unsigned threads) {
  validate_geometry(g);
  check_pad("tkd", pad_factor);
  validate_volume_sizes(g, field.size(), mask.size());
  if (!(threshold > 0.0f && threshold <= static_cast<float>(kDipoleMaxAbs))) {
    throw Error(ErrorCode::InvalidArgument,
                "tkd: threshold must be in (0, 2/3] (" + std::to_string(kTkdThreshold) + " is customary), got " + std::to_string(threshold));
  }
  const Geometry p = padded_geometry(g, pad_factor);
  validate_geometry(p);
  std::vector<Complex> c = pad_complex(g, p, field);
  fft3d_forward(c, p.dims, threads);
  for_each_kernel_value(p, DipoleConvention::Standard, [&](size_t i, double dd) {
    const float d = static_cast<float>(dd);
    float inv;
    if (d == 0.0f) inv = 0.0f;
    else if (std::fabs(d) >= threshold) inv = 1.0f / d;
    else inv = (d > 0.0f ? 1.0f : -1.0f) / threshold;
    c[i] *= inv;
  });
  fft3d_inverse(c, p.dims, threads);
  std::vector<float> chi = crop_real(g, p, c);
  for (size_t i = 0; i < chi.size(); ++i) {
    if (!mask[i]) chi[i] = 0.0f;
  }
  return chi;
}

}  // namespace tessera
