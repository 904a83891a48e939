// Closed-form dipole inversions in k-space: TSVD (truncated inverse) and Tikhonov (L2, identity or gradient
// regulariser), and the k-space pieces the iterative inversions (TV-ADMM, RTS) share with them: zero padding to a fast
// FFT size and the dipole and finite-difference kernels evaluated per frequency.
// Volumes are x-fastest; the field is the local field in ppm; χ comes out in ppm, zero outside the mask. The mean of
// χ (k = 0, where D = 0) is not recovered: it comes out 0 over the padded volume.
//
// Zero padding: each axis is padded (the volume at the low corner) to the smallest 2,3,5-smooth length at least
// pad_ratio times its own. Measured on make_phantom 64×64×48 at 3 mm, noise 0, correlation r and NRMSE with the truth
// inside the mask (both with their mask mean removed: the mean is not recovered), one thread:
//   pad_ratio 1   (64×64×48):   TSVD r 0.900 / 0.441, Tikhonov r 0.946 / 0.354, TV r 0.987 / 0.165 (2.2 s)
//   pad_ratio 1.5 (96×96×72):   TSVD r 0.899 / 0.444, Tikhonov r 0.947 / 0.353, TV r 0.988 / 0.163 (13 s)
//   pad_ratio 2   (128×128×96): TSVD r 0.900 / 0.441, Tikhonov r 0.947 / 0.354, TV r 0.988 / 0.165 (44 s)
// The field is zero outside the mask and the brain sits away from the box's faces, so wrap-around changes r by under
// 0.002 while 1.5× costs 3.4× the memory and 6× the time: the default is 1 (pad only to a fast FFT size). Raise it when
// the mask touches the volume's faces.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/common/geometry.h"

namespace tessera {

namespace padding_defaults {
// See the measurement above: 1 is as accurate as 1.5 or 2 on a head phantom and 3-9× cheaper.
inline constexpr double kPadRatio = 1.0;
// Padding beyond 3× only costs memory (the wrap-around is gone well before).
inline constexpr double kMaxPadRatio = 3.0;
}  // namespace padding_defaults

// The padded dims of an inversion: per axis the smallest 2,3,5-smooth length >= ceil(pad_ratio * n).
// every dims[a] >= 1; pad_ratio in [1, 3] (else Error InvalidArgument, naming `what`'s pad_ratio).
Dims3 inversion_padded_dims(const Dims3& dims, double pad_ratio, const char* what = "inversion");

// ---- TSVD ----

namespace tsvd_defaults {
// |D| below which the inverse is 0: QSM.jl tsvd thr = 0.15 (kamesy/QSM.jl src/inversion/direct.jl), after the
// threshold-based k-space division of Wharton, Schäfer, Bowtell 2010 MRM 63:1292.
inline constexpr double kThreshold = 0.15;
}  // namespace tsvd_defaults

struct TsvdParams {
  double threshold = tsvd_defaults::kThreshold;  // |D| (unitless), in (0, 2/3)
  double pad_ratio = padding_defaults::kPadRatio;
};

// Checks each parameter against its schema option (method_options(): the one range, unit and wholeness).
// Throws Error(InvalidArgument) naming the option ("tv.lambda"), its range and unit.
void validate(const TsvdParams& params);

// TSVD: χ = F⁻¹[F(f) / D] where |D| > threshold, 0 elsewhere (zero padded as described above), masked.
// geometry valid; field.size() == mask.size() == voxel_count; field finite; the mask holds a voxel; params valid
// (else Error InvalidArgument / NonFiniteInput).
// threads: FFT and loop threads (0 = hardware); the result is bit-identical for any count.
std::vector<float> tsvd(const Geometry& geometry, std::span<const float> local_field_ppm, std::span<const uint8_t> mask,
                        const TsvdParams& params = {}, unsigned threads = 1);

// Heap bytes tsvd allocates at its peak beyond its inputs: the padded complex volume, FFT scratch, χ.
// geometry and params valid.
uint64_t tsvd_workspace_bytes(const Geometry& geometry, const TsvdParams& params, unsigned threads = 1);

// ---- Tikhonov ----

enum class TikhonovRegulariser {
  Identity,  // R = 1: λ‖χ‖²
  Gradient,  // R = Σ_axes (2 − 2cos(2πk_i/N_i)) / h_i²: λ‖∇χ‖² with periodic forward differences (h in mm)
};

namespace tikhonov_defaults {
// QSM.jl tikh lambda = 1e-2, reg = :identity (kamesy/QSM.jl src/inversion/direct.jl); QSM.rs TikhonovParams default
// lambda 0.01, Regularization::Identity (src/inversion/tikhonov.rs). Bilgic et al. 2014 JMRI 40:181.
inline constexpr double kLambda = 1e-2;
inline constexpr TikhonovRegulariser kRegulariser = TikhonovRegulariser::Identity;
}  // namespace tikhonov_defaults

struct TikhonovParams {
  double lambda = tikhonov_defaults::kLambda;  // unitless (identity) or mm² (gradient), in (0, 1e3]
  TikhonovRegulariser regulariser = tikhonov_defaults::kRegulariser;
  double pad_ratio = padding_defaults::kPadRatio;
};

// Checks lambda against its schema option (method_options()) and the regulariser.
// Throws Error(InvalidArgument) naming the option ("tikhonov.lambda"), its range and unit.
void validate(const TikhonovParams& params);

// Closed-form Tikhonov (Bilgic et al. 2014): χ = F⁻¹[D F(f) / (D² + λR)] (0 where D² + λR = 0), masked.
// geometry valid; field.size() == mask.size() == voxel_count; field finite; the mask holds a voxel; params valid.
// threads: FFT and loop threads (0 = hardware); the result is bit-identical for any count.
std::vector<float> tikhonov(const Geometry& geometry, std::span<const float> local_field_ppm,
                            std::span<const uint8_t> mask, const TikhonovParams& params = {}, unsigned threads = 1);

// Heap bytes tikhonov allocates at its peak beyond its inputs: the padded complex volume, FFT scratch, χ.
// geometry and params valid.
uint64_t tikhonov_workspace_bytes(const Geometry& geometry, const TikhonovParams& params, unsigned threads = 1);

// ---- k-space pieces shared by the inversions ----

// Calls f(i, x, y, z) for every linear index i in [begin, end) of a volume of `dims` (x-fastest).
template <typename F>
void for_voxel_range(const Dims3& dims, uint64_t begin, uint64_t end, F&& f) {
  const uint64_t nx = static_cast<uint64_t>(dims[0]), ny = static_cast<uint64_t>(dims[1]);
  int64_t x = static_cast<int64_t>(begin % nx), y = static_cast<int64_t>((begin / nx) % ny),
          z = static_cast<int64_t>(begin / (nx * ny));
  for (uint64_t i = begin; i < end; ++i) {
    f(i, x, y, z);
    if (++x == dims[0]) {
      x = 0;
      if (++y == dims[1]) {
        y = 0;
        ++z;
      }
    }
  }
}

// The frequencies of a (padded) grid: the dipole kernel D = 1/3 − (k·b)²/|k|² (D(0) = 0, b the unit B0 direction,
// k = fftfreq(n, voxel), as dipole_kernel's Standard convention) and the negative discrete Laplacian
// L = Σ_axes (2 − 2cos(2πk_i/N_i)) / h_i² (the k-space form of ∇ᵀ∇ for periodic forward differences), per frequency.
class KSpaceGrid {
 public:
  // geometry valid, and voxel_count() complex values addressable (else Error InvalidArgument).
  explicit KSpaceGrid(const Geometry& geometry);
  const Geometry& geometry() const { return g_; }
  // D at frequency (x, y, z), rounded to float as dipole_kernel rounds it.
  float dipole(int64_t x, int64_t y, int64_t z) const {
    const double k2 = kx_[x] * kx_[x] + ky_[y] * ky_[y] + kz_[z] * kz_[z];
    const double kb = kx_[x] * b_[0] + ky_[y] * b_[1] + kz_[z] * b_[2];
    return static_cast<float>(k2 == 0.0 ? 0.0 : 1.0 / 3.0 - kb * kb / k2);
  }
  float neg_laplacian(int64_t x, int64_t y, int64_t z) const {
    return static_cast<float>(lx_[x] + ly_[y] + lz_[z]);
  }
  // Calls f(i, x, y, z) for every linear index i in [begin, end) (x-fastest).
  template <typename F>
  void for_range(uint64_t begin, uint64_t end, F&& f) const {
    for_voxel_range(g_.dims, begin, end, f);
  }

 private:
  Geometry g_;
  Vec3 b_;
  std::vector<double> kx_, ky_, kz_, lx_, ly_, lz_;
};

// The complex padded copy of a real volume (at the low corner, zeros elsewhere).
// volume.size() == geometry.voxel_count(); padded dims >= geometry's; threads: 0 = hardware.
void pad_into(const Geometry& geometry, const Dims3& padded, std::span<const float> volume, std::span<std::complex<float>> out,
              unsigned threads = 1);

// The real parts of the low corner of a padded complex volume, times the mask (0 outside it).
// out.size() == mask.size() == geometry.voxel_count(); padded dims >= geometry's; threads: 0 = hardware.
void crop_masked(const Geometry& geometry, const Dims3& padded, std::span<const std::complex<float>> in,
                 std::span<const uint8_t> mask, std::span<float> out, unsigned threads = 1);

// Checks an inversion's inputs (geometry, sizes, finite field, non-empty mask), each failure one clear line.
void validate_inversion_inputs(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask);

}  // namespace tessera
