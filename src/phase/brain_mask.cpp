#include "tessera/phase/brain_mask.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "common/message_number.h"
#include "common/parallel.h"
#include "tessera/common/error.h"
#include "tessera/common/morphology.h"
#include "tessera/phase/options.h"

namespace tessera {

namespace {

void check_radius(const char* name, double value) {
  if (!(std::isfinite(value) && value >= 0.0 && value <= 100.0)) {
    throw Error(ErrorCode::InvalidArgument, std::string("brain_mask: ") + name + " must be in [0, 100] mm, got " +
                                                short_message_number(value));
  }
}

// "No feature on this line yet": large and finite, so the parabola arithmetic stays finite.
constexpr double kFar = 1e30;

// Squared Euclidean distance (mm²) of every voxel to the nearest voxel where feature[i] == want (none beyond the
// volume's faces), exact, by distance_transform_line along x, then y, then z.
std::vector<double> squared_distance(const Geometry& g, std::span<const uint8_t> feature, bool want,
                                     unsigned threads) {
  const uint64_t n = g.voxel_count();
  std::vector<double> d(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) d[i] = ((feature[i] != 0) == want) ? 0.0 : kFar;
  const int64_t stride[3] = {1, g.dims[0], g.dims[0] * g.dims[1]};
  for (int a = 0; a < 3; ++a) {
    const int64_t len = g.dims[a];
    if (len == 1) continue;
    const double h = g.voxel_mm[a];
    const uint64_t lines = n / static_cast<uint64_t>(len);
    // line l: its first voxel, with the axis a coordinate 0
    auto line_start = [&](uint64_t l) -> uint64_t {
      const uint64_t s = static_cast<uint64_t>(stride[a]);
      return (l % s) + (l / s) * s * static_cast<uint64_t>(len);
    };
    parallel_for(lines, threads, [&](uint64_t begin, uint64_t end) {
      std::vector<double> f(static_cast<size_t>(len)), out(static_cast<size_t>(len)),
          boundary(static_cast<size_t>(len) + 1);
      std::vector<int64_t> apex(static_cast<size_t>(len));
      for (uint64_t l = begin; l < end; ++l) {
        const uint64_t first = line_start(l);
        for (int64_t q = 0; q < len; ++q) f[q] = d[first + static_cast<uint64_t>(q * stride[a])];
        distance_transform_line(f.data(), len, h, apex, boundary, out, kFar);
        for (int64_t q = 0; q < len; ++q) d[first + static_cast<uint64_t>(q * stride[a])] = f[q];
      }
    });
  }
  return d;
}

// Voxels within radius_mm of the mask (a dilation with a sphere).
std::vector<uint8_t> dilate(const Geometry& g, const std::vector<uint8_t>& mask, double radius_mm, unsigned threads) {
  if (radius_mm <= 0.0) return mask;
  const std::vector<double> d = squared_distance(g, mask, true, threads);
  const double r2 = radius_mm * radius_mm * (1.0 + 1e-9);
  std::vector<uint8_t> out(mask.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = d[i] <= r2 ? 1 : 0;
  return out;
}

// Mask voxels with no outside voxel within radius_mm (an erosion with a sphere).
std::vector<uint8_t> erode(const Geometry& g, const std::vector<uint8_t>& mask, double radius_mm, unsigned threads) {
  if (radius_mm <= 0.0) return mask;
  const std::vector<double> d = squared_distance(g, mask, false, threads);
  const double r2 = radius_mm * radius_mm * (1.0 + 1e-9);
  std::vector<uint8_t> out(mask.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = (mask[i] && d[i] > r2) ? 1 : 0;
  return out;
}

// Value at quantile p of the finite values (sorted copy, nearest rank).
double quantile(std::vector<float> sorted, double p) {
  const size_t k = std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5));
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end());
  return sorted[k];
}

// Otsu's threshold on a histogram of [lo, hi] (values outside clamped to the end bins): the bin edge that
// maximises the between-class variance.
double otsu(std::span<const float> values, double lo, double hi, int bins) {
  if (!(hi > lo)) return lo;
  std::vector<uint64_t> histogram(static_cast<size_t>(bins), 0);
  const double scale = static_cast<double>(bins) / (hi - lo);
  for (const float v : values) {
    const double b = std::floor((static_cast<double>(v) - lo) * scale);
    ++histogram[static_cast<size_t>(std::clamp(b, 0.0, static_cast<double>(bins - 1)))];
  }
  double total = 0.0, total_moment = 0.0;
  for (int b = 0; b < bins; ++b) {
    total += static_cast<double>(histogram[b]);
    total_moment += static_cast<double>(histogram[b]) * (b + 0.5);
  }
  double weight = 0.0, moment = 0.0, best = -1.0;
  int best_bin = 0;
  for (int b = 0; b + 1 < bins; ++b) {
    weight += static_cast<double>(histogram[b]);
    moment += static_cast<double>(histogram[b]) * (b + 0.5);
    const double rest = total - weight;
    if (weight == 0.0 || rest == 0.0) continue;
    const double m0 = moment / weight, m1 = (total_moment - moment) / rest;
    const double between = weight * rest * (m0 - m1) * (m0 - m1);
    if (between > best) best = between, best_bin = b;
  }
  return lo + static_cast<double>(best_bin + 1) / scale;
}

}  // namespace

namespace {

// Step 1's threshold t and the robust range [t2, t98] it was chosen in.
struct MagnitudeThreshold {
  double t, t2, t98;
};
MagnitudeThreshold brain_threshold(std::span<const float> magnitude, const BrainMaskParams& p) {
  double t2, t98;
  {
    std::vector<float> copy(magnitude.begin(), magnitude.end());
    t2 = quantile(copy, 0.02);
    t98 = quantile(std::move(copy), 0.98);
  }
  const double t = p.threshold == MaskThreshold::Otsu ? otsu(magnitude, t2, t98, p.histogram_bins) : t2 + p.robust_fraction * (t98 - t2);
  return {t, t2, t98};
}

}  // namespace

double magnitude_threshold(std::span<const float> magnitude, const BrainMaskParams& p) { return brain_threshold(magnitude, p).t; }

void validate(const BrainMaskParams& p) {
  if (p.threshold != MaskThreshold::Otsu && p.threshold != MaskThreshold::RobustRange) {
    throw Error(ErrorCode::InvalidArgument, "brain_mask: threshold must be Otsu or RobustRange, got value " +
                                                std::to_string(static_cast<int>(p.threshold)));
  }
  if (p.histogram_bins < 16 || p.histogram_bins > 65536) {
    throw Error(ErrorCode::InvalidArgument, "brain_mask: histogram_bins must be in [16, 65536] (256 is usual), got " +
                                                std::to_string(p.histogram_bins));
  }
  if (!(p.robust_fraction > 0.0 && p.robust_fraction < 1.0)) {
    throw Error(ErrorCode::InvalidArgument,
                "brain_mask: robust_fraction must be in (0, 1) (a fraction of the 2nd-98th percentile range; BET "
                "uses 0.1), got " + short_message_number(p.robust_fraction));
  }
  check_radius("opening_radius_mm", p.opening_radius_mm);
  check_radius("closing_radius_mm", p.closing_radius_mm);
  checked_option(phase_options(), "brainMask.erosion", p.erosion_mm);
}

std::vector<uint32_t> label_components(const Geometry& g, std::span<const uint8_t> mask, std::vector<uint64_t>* sizes) {
  validate_geometry(g);
  const uint64_t n = g.voxel_count();
  if (n >= (uint64_t{1} << 32)) {
    throw Error(ErrorCode::InvalidArgument, "label_components: volume " + dims_text(g.dims) +
                                                " has 2^32 voxels or more; label it in parts");
  }
  if (mask.size() != n) {
    throw Error(ErrorCode::InvalidArgument, "label_components: mask holds " + std::to_string(mask.size()) +
                                                " values but the volume " + dims_text(g.dims) + " has " +
                                                std::to_string(n) + " voxels");
  }
  const int64_t nx = g.dims[0], ny = g.dims[1], nz = g.dims[2];
  std::vector<uint32_t> labels(static_cast<size_t>(n), 0);
  if (sizes) sizes->assign(1, 0);
  std::vector<uint32_t> queue;
  uint32_t count = 0;
  for (uint64_t s = 0; s < n; ++s) {
    if (!mask[s] || labels[s]) continue;
    ++count;
    labels[s] = count;
    queue.assign(1, static_cast<uint32_t>(s));
    for (size_t head = 0; head < queue.size(); ++head) {
      const uint64_t i = queue[head];
      const int64_t x = static_cast<int64_t>(i % static_cast<uint64_t>(nx));
      const int64_t y = static_cast<int64_t>((i / static_cast<uint64_t>(nx)) % static_cast<uint64_t>(ny));
      const int64_t z = static_cast<int64_t>(i / (static_cast<uint64_t>(nx) * static_cast<uint64_t>(ny)));
      const uint64_t sx = 1, sy = static_cast<uint64_t>(nx), sz = static_cast<uint64_t>(nx * ny);
      auto visit = [&](bool ok, uint64_t j) {
        if (ok && mask[j] && !labels[j]) {
          labels[j] = count;
          queue.push_back(static_cast<uint32_t>(j));
        }
      };
      visit(x > 0, i - sx);
      visit(x + 1 < nx, i + sx);
      visit(y > 0, i - sy);
      visit(y + 1 < ny, i + sy);
      visit(z > 0, i - sz);
      visit(z + 1 < nz, i + sz);
    }
    if (sizes) sizes->push_back(queue.size());
  }
  return labels;
}

std::vector<uint8_t> brain_mask(const Geometry& g, std::span<const float> magnitude, const BrainMaskParams& p,
                                unsigned threads) {
  validate_geometry(g);
  validate(p);
  const uint64_t n = g.voxel_count();
  if (magnitude.size() != n) {
    throw Error(ErrorCode::InvalidArgument, "brain_mask: magnitude holds " + std::to_string(magnitude.size()) +
                                                " values but the volume " + dims_text(g.dims) + " has " +
                                                std::to_string(n) + " voxels");
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (!std::isfinite(magnitude[i])) {
      throw Error(ErrorCode::InvalidArgument, "brain_mask: magnitude has a NaN or Inf at index " + std::to_string(i) +
                                                  "; replace non-finite voxels (e.g. by 0) first");
    }
  }
  // 1. threshold over BET's robust range
  const auto [t, t2, t98] = brain_threshold(magnitude, p);
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) mask[i] = static_cast<double>(magnitude[i]) > t ? 1 : 0;
  // 2. opening
  mask = dilate(g, erode(g, mask, p.opening_radius_mm, threads), p.opening_radius_mm, threads);
  // 3. largest component
  std::vector<uint64_t> sizes;
  {
    const std::vector<uint32_t> labels = label_components(g, mask, &sizes);
    if (sizes.size() <= 1) {
      throw Error(ErrorCode::InvalidArgument,
                  "brain_mask: no voxel is left above the threshold " + short_message_number(t) +
                      " (magnitude 2nd-98th percentiles " + short_message_number(t2) + " to " +
                      short_message_number(t98) + ") after an opening of " + short_message_number(p.opening_radius_mm) +
                      " mm; check the magnitude image or lower opening_radius_mm");
    }
    const uint32_t largest = static_cast<uint32_t>(std::max_element(sizes.begin() + 1, sizes.end()) - sizes.begin());
    for (uint64_t i = 0; i < n; ++i) mask[i] = labels[i] == largest ? 1 : 0;
  }
  // 4. closing
  mask = erode(g, dilate(g, mask, p.closing_radius_mm, threads), p.closing_radius_mm, threads);
  // 5. holes: background not connected to a face of the array
  if (p.fill_holes) {
    std::vector<uint8_t> background(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i) background[i] = mask[i] ? 0 : 1;
    std::vector<uint64_t> background_sizes;
    const std::vector<uint32_t> labels = label_components(g, background, &background_sizes);
    std::vector<uint8_t> touches_face(background_sizes.size(), 0);
    for (int64_t z = 0; z < g.dims[2]; ++z)
      for (int64_t y = 0; y < g.dims[1]; ++y)
        for (int64_t x = 0; x < g.dims[0]; ++x) {
          const bool face = x == 0 || y == 0 || z == 0 || x + 1 == g.dims[0] || y + 1 == g.dims[1] ||
                            z + 1 == g.dims[2];
          if (face) touches_face[labels[g.index(x, y, z)]] = 1;
        }
    for (uint64_t i = 0; i < n; ++i) {
      if (labels[i] && !touches_face[labels[i]]) mask[i] = 1;
    }
  }
  // 6. erosion
  return erode(g, mask, p.erosion_mm, threads);
}

uint64_t brain_mask_workspace_bytes(const Geometry& g, const BrainMaskParams& p, unsigned threads) {
  validate_geometry(g);
  validate(p);
  const uint64_t n = g.voxel_count();
  const int64_t longest = std::max({g.dims[0], g.dims[1], g.dims[2]});
  const uint64_t workers = threads == 0 ? 64 : threads;
  const uint64_t line_buffers = workers * static_cast<uint64_t>(longest + 1) * (3 * sizeof(double) + sizeof(int64_t));
  // percentile copy 4, masks 3, distances 8, labels 4, queue 4 (uint32), a second label volume for the holes 4,
  // result 1
  return 28 * n + line_buffers + static_cast<uint64_t>(p.histogram_bins) * sizeof(uint64_t);
}

}  // namespace tessera
