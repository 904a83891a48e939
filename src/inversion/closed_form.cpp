#include "tessera/inversion/closed_form.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>

#include "common/message_number.h"
#include "common/parallel.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/common/fft.h"
#include "tessera/inversion/methods.h"

namespace tessera {

namespace {

// χ = F⁻¹[F(f) · inverse(D, L)] on the padded grid, cropped and masked.
template <typename Inverse>
std::vector<float> kspace_divide(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                 double pad_ratio, const char* what, unsigned threads, Inverse&& inverse) {
  Geometry p = g;
  p.dims = inversion_padded_dims(g.dims, pad_ratio, what);
  const KSpaceGrid grid(p);
  std::vector<Complex> c(static_cast<size_t>(p.voxel_count()));
  pad_into(g, p.dims, field, c, threads);
  fft3d_forward(c, p.dims, threads);
  parallel_for(p.voxel_count(), threads, [&](uint64_t begin, uint64_t end) {
    grid.for_range(begin, end, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      c[i] *= inverse(grid.dipole(x, y, z), grid.neg_laplacian(x, y, z));
    });
  });
  fft3d_inverse(c, p.dims, threads);
  std::vector<float> chi(static_cast<size_t>(g.voxel_count()));
  crop_masked(g, p.dims, c, mask, chi, threads);
  return chi;
}

uint64_t kspace_divide_bytes(const Geometry& g, double pad_ratio, const char* what, unsigned threads) {
  validate_geometry(g);
  const Dims3 pd = inversion_padded_dims(g.dims, pad_ratio, what);
  const uint64_t n = static_cast<uint64_t>(pd[0]) * static_cast<uint64_t>(pd[1]) * static_cast<uint64_t>(pd[2]);
  // the padded complex volume, FFT scratch, χ; the kernels are evaluated per frequency, never stored
  return n * sizeof(Complex) + fft3d_workspace_bytes(pd, threads) + g.voxel_count() * sizeof(float) +
         static_cast<uint64_t>(pd[0] + pd[1] + pd[2]) * 2 * sizeof(double);
}

}  // namespace

Dims3 inversion_padded_dims(const Dims3& dims, double pad_ratio, const char* what) {
  if (!(pad_ratio >= 1.0 && pad_ratio <= padding_defaults::kMaxPadRatio)) {
    throw Error(ErrorCode::InvalidArgument, std::string(what) + ": pad_ratio must be in [1, " + message_number(padding_defaults::kMaxPadRatio) +
                                                "] (times the volume's size " +
                                                "per axis; 1 = pad only to a fast FFT size), got " +
                                                message_number(pad_ratio));
  }
  Dims3 out{};
  for (int a = 0; a < 3; ++a) {
    if (dims[a] < 1) {
      throw Error(ErrorCode::InvalidArgument,
                  std::string(what) + ": dims " + dims_text(dims) + " are invalid: every dimension must be at least 1");
    }
    int64_t n = static_cast<int64_t>(std::ceil(pad_ratio * static_cast<double>(dims[a]) - 1e-9));
    out[a] = fast_fft_size(std::max(n, dims[a]));
  }
  return out;
}

KSpaceGrid::KSpaceGrid(const Geometry& g) : g_(g), b_(g.b0_dir) {
  validate_geometry(g);
  if (g.voxel_count() > std::numeric_limits<size_t>::max() / sizeof(Complex)) {
    throw Error(ErrorCode::InvalidArgument, "the padded volume " + dims_text(g.dims) +
                                                " is too large for a complex buffer on this platform: lower pad_ratio or "
                                                "crop the volume to the mask");
  }
  const double norm = std::sqrt(b_[0] * b_[0] + b_[1] * b_[1] + b_[2] * b_[2]);
  for (auto& c : b_) c /= norm;
  std::vector<double>* k[3] = {&kx_, &ky_, &kz_};
  std::vector<double>* l[3] = {&lx_, &ly_, &lz_};
  constexpr double kTwoPi = 6.283185307179586476925;
  for (int a = 0; a < 3; ++a) {
    const int64_t n = g.dims[a];
    const double h = g.voxel_mm[a];
    k[a]->resize(static_cast<size_t>(n));
    l[a]->resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      (*k[a])[static_cast<size_t>(i)] = fft_frequency(i, n, h);
      (*l[a])[static_cast<size_t>(i)] =
          (2.0 - 2.0 * std::cos(kTwoPi * static_cast<double>(i) / static_cast<double>(n))) / (h * h);
    }
  }
}

void pad_into(const Geometry& g, const Dims3& pd, std::span<const float> v, std::span<Complex> out, unsigned threads) {
  const uint64_t n = static_cast<uint64_t>(pd[0]) * static_cast<uint64_t>(pd[1]) * static_cast<uint64_t>(pd[2]);
  parallel_for(n, threads, [&](uint64_t begin, uint64_t end) {
    for_voxel_range(pd, begin, end, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      const bool inside = x < g.dims[0] && y < g.dims[1] && z < g.dims[2];
      out[i] = Complex(inside ? v[g.index(x, y, z)] : 0.0f, 0.0f);
    });
  });
}

void crop_masked(const Geometry& g, const Dims3& pd, std::span<const Complex> in, std::span<const uint8_t> mask,
                 std::span<float> out, unsigned threads) {
  const uint64_t px = static_cast<uint64_t>(pd[0]), py = static_cast<uint64_t>(pd[1]);
  parallel_for(g.voxel_count(), threads, [&](uint64_t begin, uint64_t end) {
    for_voxel_range(g.dims, begin, end, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      const uint64_t p = static_cast<uint64_t>(x) + px * (static_cast<uint64_t>(y) + py * static_cast<uint64_t>(z));
      out[i] = mask[i] ? in[p].real() : 0.0f;
    });
  });
}

void validate_inversion_inputs(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask) {
  validate_geometry(g);
  validate_volume_sizes(g, field.size(), mask.size());
  validate_finite(g, field);
  validate_mask_not_empty(g, mask);
}

void validate(const TsvdParams& p) {
  checked_option(method_options(), "tsvd.threshold", p.threshold);
  checked_option(method_options(), "tsvd.padRatio", p.pad_ratio);
}

std::vector<float> tsvd(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                        const TsvdParams& params, unsigned threads) {
  validate_inversion_inputs(g, field, mask);
  validate(params);
  const float threshold = static_cast<float>(params.threshold);
  return kspace_divide(g, field, mask, params.pad_ratio, "tsvd", threads,
                       [threshold](float d, float) { return std::fabs(d) > threshold ? 1.0f / d : 0.0f; });
}

uint64_t tsvd_workspace_bytes(const Geometry& g, const TsvdParams& params, unsigned threads) {
  validate(params);
  return kspace_divide_bytes(g, params.pad_ratio, "tsvd", threads);
}

void validate(const TikhonovParams& p) {
  checked_option(method_options(), "tikhonov.lambda", p.lambda);
  if (p.regulariser != TikhonovRegulariser::Identity && p.regulariser != TikhonovRegulariser::Gradient) {
    throw Error(ErrorCode::InvalidArgument, "tikhonov: regulariser must be identity or gradient, got " +
                                                std::to_string(static_cast<int>(p.regulariser)));
  }
  checked_option(method_options(), "tikhonov.padRatio", p.pad_ratio);
}

std::vector<float> tikhonov(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                            const TikhonovParams& params, unsigned threads) {
  validate_inversion_inputs(g, field, mask);
  validate(params);
  const float lambda = static_cast<float>(params.lambda);
  const bool gradient = params.regulariser == TikhonovRegulariser::Gradient;
  return kspace_divide(g, field, mask, params.pad_ratio, "tikhonov", threads, [=](float d, float l) {
    const float a = d * d + lambda * (gradient ? l : 1.0f);
    return a == 0.0f ? 0.0f : d / a;
  });
}

uint64_t tikhonov_workspace_bytes(const Geometry& g, const TikhonovParams& params, unsigned threads) {
  validate(params);
  return kspace_divide_bytes(g, params.pad_ratio, "tikhonov", threads);
}

}  // namespace tessera
