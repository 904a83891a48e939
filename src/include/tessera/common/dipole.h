// The dipole model of QSM: k-space dipole kernels in the two conventions of the registry's networks
// (DipoleConvention below), kernel application D(v) = real(ifft(fft(v) . D)), the forward model chi -> field
// with zero padding, and TKD (truncated k-space division) as a classical reference inversion.
// Volumes are x-fastest (index x + nx*(y + ny*z)), fields and susceptibilities in ppm.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tessera/common/geometry.h"

namespace tessera {

// TKD's customary truncation of |D| (Wharton et al. 2010 MRM). A double, as every schema default is (0.19f widened
// would read 0.1899999976158142); tkd() takes it as the float 0.19f.
inline constexpr double kTkdThreshold = 0.19;

// The largest |D| of the dipole kernel (D = 1/3 − kz²/k² lies in [−2/3, 1/3]): the upper bound of every threshold on
// |D| (TKD's, TSVD's, RTS's delta, iLSQR's cone), above which it would truncate every frequency.
inline constexpr double kDipoleMaxAbs = 2.0 / 3.0;

enum class DipoleConvention {
  // LPCNN / MoDL-QSM / forward model: k from fftfreq(n, voxel) (DC at index 0), b = unit B0 direction,
  // D = 1/3 - (k.b)^2/|k|^2, D(0) = 0.
  Standard,
  // NeXtQSM: frequency (i - n/2)/(n*voxel) (integer n/2) stored fft-shifted at (i + n/2) % n,
  // D = 1/3 - (k.b)^2/(|k|^2 + FLT_EPSILON), b NOT normalised, D(0) = 1/3.
  // For odd n the literal rule puts the zero frequency at index n-1 rather than 0 (NeXtQSM pads to 64: always even).
  NextQsm,
};

// numpy.fft.fftfreq(n, spacing)[i]: the frequency of DFT index i of n samples spacing apart (DC at 0, negative from
// (n + 1) / 2).
// 0 <= i < n; spacing > 0.
double fft_frequency(int64_t i, int64_t n, double spacing);

// The k-space dipole kernel of geometry (dims, voxel size, B0 direction), x-fastest, one real value per voxel.
// geometry valid (validate_geometry; else Error InvalidArgument).
std::vector<float> dipole_kernel(const Geometry& geometry, DipoleConvention convention = DipoleConvention::Standard);

// Applies a k-space kernel: real(ifft(fft(volume) . kernel)); no padding (circular convolution).
// kernel.size() == volume.size() == dims[0]*dims[1]*dims[2] (else Error InvalidArgument).
// every dims[a] >= 1 (else Error InvalidArgument).
// threads: FFT threads (see fft3d_forward); 0 = hardware concurrency.
std::vector<float> apply_kernel(const Dims3& dims, std::span<const float> kernel, std::span<const float> volume,
                                unsigned threads = 1);

// D(v) with the kernel of geometry in the given convention, no padding.
// geometry valid; volume.size() == geometry.voxel_count() (else Error InvalidArgument).
// threads: FFT threads; 0 = hardware concurrency.
std::vector<float> dipole_convolve(const Geometry& geometry, std::span<const float> volume,
                                   DipoleConvention convention = DipoleConvention::Standard, unsigned threads = 1);

// Forward model: local field (ppm) of the susceptibility chi (ppm), Standard convention (D(0) = 0, so a uniformly
// magnetised sphere has zero field inside: Lorentz-corrected). Each axis is zero padded to pad_factor*n (chi at the
// low corner) to keep wrap-around away, then cropped back; pad_factor 1 = circular.
// geometry valid; chi.size() == geometry.voxel_count() (else Error InvalidArgument).
// pad_factor in [1, 4] (else Error InvalidArgument).
// threads: FFT threads; 0 = hardware concurrency.
std::vector<float> forward_field(const Geometry& geometry, std::span<const float> chi, int pad_factor = 2,
                                 unsigned threads = 1);

// forward_field for sources with edges far sharper and stronger than tissue's (a head in air: 9.4 ppm at the skin)
// under a B0 oblique to the grid. There the cross terms 2·b_a·b_c·k_a·k_c of (k·b)² are odd in k_a, so at an axis's
// Nyquist frequency (one DFT sample for ±k) they are ambiguous and the kernel's periodic extension jumps; the jump
// rings through the whole volume as a voxel-to-voxel checkerboard (±0.1 ppm inside a brain 30° off B0) where the
// field of sources outside the brain is harmonic and smooth. Here the cross terms are tapered by a raised cosine to
// their two-sided mean, 0, over the outer half of each axis's band (a scan's k-space apodization); below it, and for
// a B0 along an axis (no cross terms), the kernel is forward_field's, bit for bit.
// Preconditions as forward_field's.
std::vector<float> forward_field_band_limited(const Geometry& geometry, std::span<const float> chi, int pad_factor = 2,
                                              unsigned threads = 1);

// Bytes forward_field / forward_field_band_limited / tkd allocate at their peak for a volume of geometry (padded complex volume, result, FFT scratch;
// the kernel is computed on the fly, never stored).
// geometry valid; pad_factor in [1, 4] (else Error InvalidArgument).
uint64_t dipole_workspace_bytes(const Geometry& geometry, int pad_factor, unsigned threads = 1);

// TKD: chi = real(ifft(fft(field) / D_t)) . mask with D_t = D where |D| >= threshold, sign(D)*threshold elsewhere
// (Standard kernel); at D = 0 (the zero frequency, and the magic-angle cone) the inverse is 0: the mean is not recovered.
// geometry valid; field.size() == mask.size() == geometry.voxel_count() (else Error InvalidArgument).
// threshold in (0, 2/3] (else Error InvalidArgument); kTkdThreshold is customary.
// pad_factor in [1, 4]: zero padding of the field as in forward_field (else Error InvalidArgument).
// threads: FFT threads; 0 = hardware concurrency.
std::vector<float> tkd(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                       float threshold = static_cast<float>(kTkdThreshold), int pad_factor = 1, unsigned threads = 1);

}  // namespace tessera
