#include "tessera/networks/training_grid.h"

#include <algorithm>
#include <cmath>

#include "tessera/common/budget.h"
#include "tessera/common/error.h"
#include "tessera/common/fft.h"
#include "tessera/common/schema.h"

namespace tessera {

namespace {

// The lowest and highest frequency of a centred spectrum of n samples: -floor(n/2) .. ceil(n/2) - 1.
int64_t lowest_frequency(int64_t n) { return -(n / 2); }
int64_t highest_frequency(int64_t n) { return (n + 1) / 2 - 1; }

// One axis's frequencies both grids hold, as (source index, destination index) pairs.
std::vector<std::pair<int64_t, int64_t>> shared_frequencies(int64_t from, int64_t to) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t lo = std::max(lowest_frequency(from), lowest_frequency(to));
  const int64_t hi = std::min(highest_frequency(from), highest_frequency(to));
  for (int64_t f = lo; f <= hi; ++f) out.emplace_back((f + from) % from, (f + to) % to);
  return out;
}

std::string mm_text(const Vec3& v) { return number_text(v[0]) + "×" + number_text(v[1]) + "×" + number_text(v[2]); }

// A voxel edge rounded to 4 decimals, for messages.
Vec3 rounded(const Vec3& v) {
  Vec3 r;
  for (int a = 0; a < 3; ++a) r[a] = std::round(v[a] * 1e4) / 1e4;
  return r;
}

}  // namespace

Geometry training_grid(const Geometry& g, const Vec3& t) {
  validate_geometry(g);
  Geometry out = g;
  for (int a = 0; a < 3; ++a) {
    if (!(t[a] > 0.0)) throw Error(ErrorCode::InvalidArgument, "training_grid: the training voxel must be > 0 mm on every axis");
    const double fov = static_cast<double>(g.dims[a]) * g.voxel_mm[a];
    out.dims[a] = std::max<int64_t>(1, static_cast<int64_t>(std::llround(fov / t[a])));
    out.voxel_mm[a] = fov / static_cast<double>(out.dims[a]);
  }
  return out;
}

bool needs_training_grid(const ModelSpec& m, const Geometry& g) {
  const Vec3& t = m.training_voxel_mm;
  if (!(t[0] > 0.0 && t[1] > 0.0 && t[2] > 0.0)) return false;
  return training_grid(g, t).dims != g.dims;
}

std::vector<float> kspace_resample(const Geometry& from, std::span<const float> values, const Dims3& to, unsigned threads) {
  validate_volume_sizes(from, values.size(), values.size());
  for (int a = 0; a < 3; ++a) {
    if (to[a] < 1) throw Error(ErrorCode::InvalidArgument, "kspace_resample: dims " + dims_text(to) + " must be at least 1 on every axis");
  }
  Geometry dst = from;
  dst.dims = to;
  std::vector<Complex> spectrum(values.begin(), values.end());
  fft3d_forward(spectrum, from.dims, threads);
  std::vector<Complex> out(static_cast<size_t>(dst.voxel_count()), Complex(0.0f, 0.0f));
  const float scale = static_cast<float>(static_cast<double>(dst.voxel_count()) / static_cast<double>(from.voxel_count()));
  const auto fx = shared_frequencies(from.dims[0], to[0]);
  const auto fy = shared_frequencies(from.dims[1], to[1]);
  const auto fz = shared_frequencies(from.dims[2], to[2]);
  for (const auto& [sz, dz] : fz)
    for (const auto& [sy, dy] : fy) {
      const Complex* src = spectrum.data() + from.index(0, sy, sz);
      Complex* d = out.data() + dst.index(0, dy, dz);
      for (const auto& [sx, dx] : fx) d[dx] = src[sx] * scale;
    }
  spectrum = {};
  fft3d_inverse(out, to, threads);
  std::vector<float> result(out.size());
  for (size_t i = 0; i < out.size(); ++i) result[i] = out[i].real();
  return result;
}

std::vector<uint8_t> kspace_resample_mask(const Geometry& from, std::span<const uint8_t> mask, const Dims3& to, unsigned threads) {
  validate_volume_sizes(from, mask.size(), mask.size());
  std::vector<float> m(mask.size());
  for (size_t i = 0; i < mask.size(); ++i) m[i] = mask[i] ? 1.0f : 0.0f;
  const std::vector<float> r = kspace_resample(from, m, to, threads);
  std::vector<uint8_t> out(r.size());
  for (size_t i = 0; i < r.size(); ++i) out[i] = r[i] >= 0.5f ? 1 : 0;
  return out;
}

std::vector<float> from_training_grid(const Geometry& training, std::span<const float> chi, const Geometry& source,
                                      std::span<const uint8_t> mask, unsigned threads) {
  validate_volume_sizes(source, mask.size(), mask.size());
  std::vector<float> back = kspace_resample(training, chi, source.dims, threads);
  for (size_t i = 0; i < back.size(); ++i) back[i] = mask[i] ? back[i] : 0.0f;
  return back;
}

uint64_t training_grid_bytes(const Dims3& source, const Dims3& training) {
  Geometry s, t;
  s.dims = source;
  t.dims = training;
  const uint64_t ns = s.voxel_count(), nt = t.voxel_count();
  // Held through the run: field (f32), mask (u8) and χ (f32) on the training grid.
  const uint64_t held = saturating_mul(nt, 2 * sizeof(float) + sizeof(uint8_t));
  // One resampling at a time: both spectra, the result, the mask's 0/1 copy (or the source mask's) and FFT workspace.
  const uint64_t spectra = saturating_mul(saturating_add(ns, nt), sizeof(Complex) + 2 * sizeof(float));
  const uint64_t workspace = std::max(fft3d_workspace_bytes(source, 1), fft3d_workspace_bytes(training, 1));
  return saturating_add(held, saturating_add(spectra, workspace));
}

std::string training_grid_warning(const ModelSpec& m, const Geometry& s, const Geometry& t) {
  return std::string(m.name) + " was trained on " + mm_text(m.training_voxel_mm) + " mm voxels: the field (" + dims_text(s.dims) +
         " at " + mm_text(rounded(s.voxel_mm)) + " mm) was resampled in k-space to " + dims_text(t.dims) + " at " +
         mm_text(rounded(t.voxel_mm)) + " mm (its centred spectrum zero padded or cropped; the mask is the resampled mask " +
         ">= 0.5), inverted there, and χ resampled back the same way";
}

}  // namespace tessera
