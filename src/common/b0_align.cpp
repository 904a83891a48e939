#include "tessera/common/b0_align.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tessera/common/error.h"

namespace tessera {

namespace {

constexpr double kPi = 3.14159265358979323846;

// The taps along one axis that interpolate at position u: indices base .. base + taps − 1 with their weights.
struct Taps {
  int64_t base = 0;
  int count = 0;
  double w[4] = {0, 0, 0, 0};
};

Taps taps_at(double u, Interpolation interpolation) {
  const double f = std::floor(u);
  const double t = u - f;
  Taps s;
  if (interpolation == Interpolation::Spline) {
    // Cubic B-spline basis on prefiltered coefficients (prefilter_spline).
    const double t2 = t * t, t3 = t2 * t, r = 1.0 - t;
    s.base = static_cast<int64_t>(f) - 1;
    s.count = 4;
    s.w[0] = r * r * r / 6.0;
    s.w[1] = (4.0 - 6.0 * t2 + 3.0 * t3) / 6.0;
    s.w[2] = (1.0 + 3.0 * t + 3.0 * t2 - 3.0 * t3) / 6.0;
    s.w[3] = t3 / 6.0;
    return s;
  }
  if (interpolation == Interpolation::Linear) {
    s.base = static_cast<int64_t>(f);
    s.count = 2;
    s.w[0] = 1.0 - t;
    s.w[1] = t;
    return s;
  }
  // Keys (1981) cubic convolution, a = −½; at t = 0 the weights are exactly (0, 1, 0, 0).
  const double t2 = t * t, t3 = t2 * t;
  s.base = static_cast<int64_t>(f) - 1;
  s.count = 4;
  s.w[0] = -0.5 * t3 + t2 - 0.5 * t;
  s.w[1] = 1.5 * t3 - 2.5 * t2 + 1.0;
  s.w[2] = -1.5 * t3 + 2.0 * t2 + 0.5 * t;
  s.w[3] = 0.5 * t3 - 0.5 * t2;
  return s;
}

// The cubic B-spline coefficients of a volume (Unser 1999: a causal and an anticausal recursive filter along each axis,
// pole √3 − 2, mirror boundaries): interpolating them with the B-spline basis passes through the samples.
std::vector<float> prefilter_spline(const Geometry& g, std::span<const float> values, std::span<const uint8_t> mask) {
  std::vector<float> c(values.size());
  for (size_t i = 0; i < c.size(); ++i) c[i] = mask.empty() || mask[i] ? values[i] : 0.0f;
  const double z = std::sqrt(3.0) - 2.0, lambda = (1.0 - z) * (1.0 - 1.0 / z);
  const int64_t horizon = static_cast<int64_t>(std::ceil(std::log(1e-9) / std::log(std::abs(z))));
  std::vector<double> line;
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t n = g.dims[axis];
    if (n < 2) continue;
    line.resize(static_cast<size_t>(n));
    const uint64_t stride = axis == 0 ? 1 : axis == 1 ? static_cast<uint64_t>(g.dims[0]) : static_cast<uint64_t>(g.dims[0] * g.dims[1]);
    const int a1 = axis == 0 ? 1 : 0, a2 = axis == 2 ? 1 : 2;
    for (int64_t j = 0; j < g.dims[a2]; ++j)
      for (int64_t i = 0; i < g.dims[a1]; ++i) {
        int64_t p[3] = {0, 0, 0};
        p[a1] = i;
        p[a2] = j;
        const uint64_t start = g.index(p[0], p[1], p[2]);
        for (int64_t k = 0; k < n; ++k) line[k] = lambda * c[start + k * stride];
        // Causal: c⁺[0] = Σ z^k c[k] (mirror boundary, truncated where z^k < 1e-9).
        double sum = line[0], zk = z;
        for (int64_t k = 1; k < std::min(n, horizon); ++k, zk *= z) sum += zk * line[k];
        line[0] = sum;
        for (int64_t k = 1; k < n; ++k) line[k] += z * line[k - 1];
        // Anticausal: c⁻[n−1] = z / (z² − 1) · (c⁺[n−1] + z c⁺[n−2]).
        line[n - 1] = z / (z * z - 1.0) * (line[n - 1] + z * line[n - 2]);
        for (int64_t k = n - 2; k >= 0; --k) line[k] = z * (line[k + 1] - line[k]);
        for (int64_t k = 0; k < n; ++k) c[start + k * stride] = static_cast<float>(line[k]);
      }
  }
  return c;
}

// Taps reach below and above floor(u): linear 0 and 1, cubic 1 and 2.
int reach_low(Interpolation i) { return i == Interpolation::Linear ? 0 : 1; }  // cubic and spline: 1 and 2
int reach_high(Interpolation i) { return i == Interpolation::Linear ? 1 : 2; }

// m · d, m row-major.
Vec3 mat_vec(const std::array<double, 9>& m, const Vec3& d) {
  return {m[0] * d[0] + m[1] * d[1] + m[2] * d[2], m[3] * d[0] + m[4] * d[1] + m[5] * d[2],
          m[6] * d[0] + m[7] * d[1] + m[8] * d[2]};
}

Vec3 centre_of(const Dims3& dims) {
  return {(static_cast<double>(dims[0]) - 1.0) / 2.0, (static_cast<double>(dims[1]) - 1.0) / 2.0,
          (static_cast<double>(dims[2]) - 1.0) / 2.0};
}

// The aligned offset (from the aligned centre) of a source index.
Vec3 aligned_offset(const B0Alignment& a, int64_t x, int64_t y, int64_t z) {
  return mat_vec(a.to_aligned, Vec3{static_cast<double>(x) - a.source_centre[0], static_cast<double>(y) - a.source_centre[1],
                                  static_cast<double>(z) - a.source_centre[2]});
}

// Calls f(x, y, z) for every nonzero voxel of mask.
template <class F>
void for_each_masked(const Geometry& g, std::span<const uint8_t> mask, F&& f) {
  uint64_t i = 0;
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x, ++i)
        if (mask[i]) f(x, y, z);
}

// The smallest n of n0's parity with every stencil of offsets in [lo, hi] inside [0, n − 1].
int64_t dim_holding(double lo, double hi, int64_t n0, Interpolation interpolation) {
  for (int64_t n = (n0 % 2 == 0) ? 2 : 1;; n += 2) {
    const double h = (static_cast<double>(n) - 1.0) / 2.0;
    if (std::floor(lo + h) - reach_low(interpolation) >= 0 &&
        std::floor(hi + h) + reach_high(interpolation) <= static_cast<double>(n - 1)) {
      return n;
    }
  }
}

std::string degrees_text(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", d);
  return buf;
}

}  // namespace

B0AlignMode b0_align_mode_from_name(std::string_view name) {
  if (name == "auto") return B0AlignMode::Auto;
  if (name == "on") return B0AlignMode::On;
  if (name == "off") return B0AlignMode::Off;
  throw Error(ErrorCode::InvalidArgument, "b0Align must be auto, on or off, got '" + std::string(name) + "'");
}

std::string_view b0_align_mode_name(B0AlignMode mode) {
  switch (mode) {
    case B0AlignMode::Auto: return "auto";
    case B0AlignMode::On: return "on";
    case B0AlignMode::Off: return "off";
  }
  return "auto";
}

std::string_view interpolation_name(Interpolation i) {
  return i == Interpolation::Linear ? "linear" : i == Interpolation::Cubic ? "cubic" : "spline";
}

Interpolation interpolation_from_name(std::string_view name) {
  if (name == "linear") return Interpolation::Linear;
  if (name == "cubic") return Interpolation::Cubic;
  if (name == "spline") return Interpolation::Spline;
  throw Error(ErrorCode::InvalidArgument, "interpolation must be linear, cubic or spline, got '" + std::string(name) + "'");
}

double b0_tilt_degrees(const Vec3& b) {
  if (!std::isfinite(b[0]) || !std::isfinite(b[1]) || !std::isfinite(b[2]) || (b[0] == 0 && b[1] == 0 && b[2] == 0)) {
    throw Error(ErrorCode::InvalidArgument, "the B0 direction must be three finite numbers, not all 0");
  }
  return std::atan2(std::hypot(b[0], b[1]), std::abs(b[2])) * 180.0 / kPi;
}

std::array<double, 9> b0_rotation(const Vec3& d) {
  const double norm = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  if (!(std::isfinite(norm) && norm > 0.0)) {
    throw Error(ErrorCode::InvalidArgument, "b0_rotation: the B0 direction must be finite and not zero");
  }
  // R = I + K + K²/(1 + c) takes the unit B0 b (sign flipped to b_z ≥ 0) to (0, 0, 1): Rodrigues' formula about b × z.
  const double sign = d[2] < 0 ? -1.0 : 1.0;
  const double bx = sign * d[0] / norm, by = sign * d[1] / norm, c = sign * d[2] / norm;
  const double k = 1.0 / (1.0 + c);
  return {1.0 - bx * bx * k, -bx * by * k, -bx,  //
          -bx * by * k, 1.0 - by * by * k, -by,  //
          bx, by, 1.0 - (bx * bx + by * by) * k};
}

B0Alignment b0_alignment(const Geometry& source, std::span<const uint8_t> mask, Interpolation interpolation) {
  validate_geometry(source);
  if (mask.size() != source.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the mask holds " + std::to_string(mask.size()) + " values, the volume " +
                                                dims_text(source.dims) + " has " + std::to_string(source.voxel_count()));
  }
  B0Alignment a;
  a.source = source;
  a.interpolation = interpolation;
  a.tilt_degrees = b0_tilt_degrees(source.b0_dir);
  a.rotation = b0_rotation(source.b0_dir);
  const Vec3& v = source.voxel_mm;
  for (int r = 0; r < 3; ++r)
    for (int col = 0; col < 3; ++col) {
      a.to_aligned[r * 3 + col] = a.rotation[r * 3 + col] * v[col] / v[r];
      a.to_source[r * 3 + col] = a.rotation[col * 3 + r] * v[col] / v[r];
    }
  a.source_centre = centre_of(source.dims);
  Vec3 lo{0, 0, 0}, hi{0, 0, 0};
  bool any = false;
  for_each_masked(source, mask, [&](int64_t x, int64_t y, int64_t z) {
    const Vec3 o = aligned_offset(a, x, y, z);
    for (int ax = 0; ax < 3; ++ax) {
      lo[ax] = any ? std::min(lo[ax], o[ax]) : o[ax];
      hi[ax] = any ? std::max(hi[ax], o[ax]) : o[ax];
    }
    any = true;
  });
  if (!any) throw Error(ErrorCode::InvalidArgument, "the mask holds no voxel: there is nothing to resample");
  a.aligned = source;
  a.aligned.b0_dir = {0.0, 0.0, 1.0};
  for (int ax = 0; ax < 3; ++ax) a.aligned.dims[ax] = dim_holding(lo[ax], hi[ax], source.dims[ax], interpolation);
  validate_geometry(a.aligned);
  a.aligned_centre = centre_of(a.aligned.dims);
  return a;
}

Vec3 aligned_position(const B0Alignment& a, const Vec3& s) {
  const Vec3 o = mat_vec(a.to_aligned, Vec3{s[0] - a.source_centre[0], s[1] - a.source_centre[1], s[2] - a.source_centre[2]});
  return {o[0] + a.aligned_centre[0], o[1] + a.aligned_centre[1], o[2] + a.aligned_centre[2]};
}

Vec3 source_position(const B0Alignment& a, const Vec3& u) {
  const Vec3 o = mat_vec(a.to_source, Vec3{u[0] - a.aligned_centre[0], u[1] - a.aligned_centre[1], u[2] - a.aligned_centre[2]});
  return {o[0] + a.source_centre[0], o[1] + a.source_centre[1], o[2] + a.source_centre[2]};
}

std::vector<uint8_t> aligned_mask(const B0Alignment& a, std::span<const uint8_t> mask) {
  if (mask.size() != a.source.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the mask does not hold the source volume's " + std::to_string(a.source.voxel_count()) + " values");
  }
  const Geometry& g = a.aligned;
  std::vector<uint8_t> out(g.voxel_count(), 0);
  for_each_masked(a.source, mask, [&](int64_t x, int64_t y, int64_t z) {
    const Vec3 u = aligned_position(a, Vec3{static_cast<double>(x), static_cast<double>(y), static_cast<double>(z)});
    const Taps tx = taps_at(u[0], a.interpolation), ty = taps_at(u[1], a.interpolation), tz = taps_at(u[2], a.interpolation);
    for (int k = 0; k < tz.count; ++k)
      for (int j = 0; j < ty.count; ++j)
        for (int i = 0; i < tx.count; ++i) {
          const int64_t X = tx.base + i, Y = ty.base + j, Z = tz.base + k;
          // The dims hold every stencil (b0_alignment); a miss is a bug, not bad input.
          if (X < 0 || Y < 0 || Z < 0 || X >= g.dims[0] || Y >= g.dims[1] || Z >= g.dims[2]) {
            throw Error(ErrorCode::Internal, "a stencil falls outside the B0-aligned grid " + dims_text(g.dims));
          }
          out[g.index(X, Y, Z)] = 1;
        }
  });
  return out;
}

std::vector<float> to_aligned_grid(const B0Alignment& a, std::span<const float> values, std::span<const uint8_t> mask) {
  const Geometry& s = a.source;
  if (values.size() != s.voxel_count() || (!mask.empty() && mask.size() != s.voxel_count())) {
    throw Error(ErrorCode::InvalidArgument, "values (and mask) must hold the source volume's " + std::to_string(s.voxel_count()) +
                                                " values (" + dims_text(s.dims) + ")");
  }
  const Geometry& g = a.aligned;
  std::vector<float> coefficients;
  if (a.interpolation == Interpolation::Spline) {
    coefficients = prefilter_spline(s, values, mask);
    values = coefficients;
    mask = {};
  }
  std::vector<float> out(g.voxel_count(), 0.0f);
  uint64_t o = 0;
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x, ++o) {
        const Vec3 p = source_position(a, Vec3{static_cast<double>(x), static_cast<double>(y), static_cast<double>(z)});
        const Taps tx = taps_at(p[0], a.interpolation), ty = taps_at(p[1], a.interpolation), tz = taps_at(p[2], a.interpolation);
        double sum = 0.0;
        for (int k = 0; k < tz.count; ++k) {
          const int64_t Z = tz.base + k;
          if (Z < 0 || Z >= s.dims[2] || tz.w[k] == 0.0) continue;
          for (int j = 0; j < ty.count; ++j) {
            const int64_t Y = ty.base + j;
            if (Y < 0 || Y >= s.dims[1] || ty.w[j] == 0.0) continue;
            const double wyz = ty.w[j] * tz.w[k];
            for (int i = 0; i < tx.count; ++i) {
              const int64_t X = tx.base + i;
              if (X < 0 || X >= s.dims[0] || tx.w[i] == 0.0) continue;
              const uint64_t at = s.index(X, Y, Z);
              if (!mask.empty() && !mask[at]) continue;
              sum += tx.w[i] * wyz * static_cast<double>(values[at]);
            }
          }
        }
        out[o] = static_cast<float>(sum);
      }
  return out;
}

std::vector<float> from_aligned_grid(const B0Alignment& a, std::span<const float> aligned_values, std::span<const uint8_t> mask) {
  const Geometry& g = a.aligned;
  if (aligned_values.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the aligned values hold " + std::to_string(aligned_values.size()) +
                                                " values, the B0-aligned grid " + dims_text(g.dims) + " has " +
                                                std::to_string(g.voxel_count()));
  }
  if (mask.size() != a.source.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the mask does not hold the source volume's " + std::to_string(a.source.voxel_count()) + " values");
  }
  std::vector<float> coefficients;
  if (a.interpolation == Interpolation::Spline) {
    coefficients = prefilter_spline(g, aligned_values, {});
    aligned_values = coefficients;
  }
  std::vector<float> out(a.source.voxel_count(), 0.0f);
  for_each_masked(a.source, mask, [&](int64_t x, int64_t y, int64_t z) {
    const Vec3 u = aligned_position(a, Vec3{static_cast<double>(x), static_cast<double>(y), static_cast<double>(z)});
    const Taps tx = taps_at(u[0], a.interpolation), ty = taps_at(u[1], a.interpolation), tz = taps_at(u[2], a.interpolation);
    double sum = 0.0;
    for (int k = 0; k < tz.count; ++k) {
      const int64_t Z = tz.base + k;
      if (tz.w[k] == 0.0) continue;
      for (int j = 0; j < ty.count; ++j) {
        const int64_t Y = ty.base + j;
        if (ty.w[j] == 0.0) continue;
        const double wyz = ty.w[j] * tz.w[k];
        for (int i = 0; i < tx.count; ++i) {
          if (tx.w[i] == 0.0) continue;
          const int64_t X = tx.base + i;
          if (X < 0 || Y < 0 || Z < 0 || X >= g.dims[0] || Y >= g.dims[1] || Z >= g.dims[2]) {
            throw Error(ErrorCode::Internal, "a stencil falls outside the B0-aligned grid " + dims_text(g.dims));
          }
          sum += tx.w[i] * wyz * static_cast<double>(aligned_values[g.index(X, Y, Z)]);
        }
      }
    }
    out[a.source.index(x, y, z)] = static_cast<float>(sum);
  });
  return out;
}

B0Plan b0_plan(const Geometry& geometry, bool network_assumes_z, B0AlignMode mode, double threshold_degrees,
               double warn_degrees, const Dims3& aligned_dims) {
  B0Plan p;
  p.tilt_degrees = b0_tilt_degrees(geometry.b0_dir);
  p.mode = mode;
  p.assumes_z = network_assumes_z;
  p.threshold_degrees = threshold_degrees;
  p.warn_degrees = warn_degrees;
  p.aligned_dims = aligned_dims;
  const std::string off = "B0 is " + degrees_text(p.tilt_degrees) + "° off the volume's third axis";
  if (!network_assumes_z) {
    p.summary = off + ": the network does not assume B0 along it (its model takes the direction)";
    return p;
  }
  p.resampled = p.tilt_degrees > 0.0 && (mode == B0AlignMode::On || (mode == B0AlignMode::Auto && p.tilt_degrees > threshold_degrees));
  const std::string grid = aligned_dims[0] > 0 ? " " + dims_text(aligned_dims) : std::string();
  const std::string mode_text = "b0Align " + std::string(b0_align_mode_name(mode));
  const std::string auto_text = "b0Align auto resamples above " + degrees_text(threshold_degrees) +
                                "°, where on the phantom that comes closer to the truth than ignoring the tilt";
  if (p.resampled) {
    p.summary = off + ": the field is resampled to a B0-aligned grid" + grid + " (cubic B-spline), the network runs there and χ is "
                "resampled back (" + mode_text + ")";
  } else if (p.tilt_degrees == 0.0) {
    p.summary = "B0 lies along the volume's third axis, as the network assumes";
  } else if (mode == B0AlignMode::Off) {
    p.summary = off + ": not resampled (" + mode_text + ")";
  } else {
    p.summary = off + ": run as it is (" + auto_text + ")";
  }
  if (p.tilt_degrees <= warn_degrees) return p;
  const std::string angle = off + ", along which the network assumes it";
  const std::string cost = "on the phantom, ignoring a tilt above " + degrees_text(warn_degrees) +
                           "° costs the demo network more than NRMSE 0.05 against its untilted χ (bench/b0-tilt.js)";
  if (p.resampled) {
    p.warning = angle + ": Tessera resampled the field to a B0-aligned grid, ran the network there and resampled χ back (" +
                mode_text + "; " + cost + "); the resampling itself smooths χ slightly";
  } else if (mode == B0AlignMode::Off) {
    p.warning = angle + ": not resampled because b0Align is off, so χ is approximate (" + cost + "); " + auto_text;
  } else {
    p.warning = angle + ": run as it is, so χ is approximate (" + cost + "); " + auto_text + " (b0Align on forces it)";
  }
  return p;
}

}  // namespace tessera
