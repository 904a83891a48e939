#include "tessera/quality/fidelity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/common/morphology.h"
#include "common/parallel.h"

namespace tessera {

namespace {

void check_sizes(const Geometry& g, size_t a, size_t b, size_t mask) {
  validate_geometry(g);
  if (a != g.voxel_count() || b != g.voxel_count() || mask != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the maps and the mask must each hold " + std::to_string(g.voxel_count()) +
                                                " values (" + dims_text(g.dims) + ")");
  }
}

// Laplacian of a Gaussian (σ = 1.5 voxels, truncated at 3σ, separable), then the 6-neighbour Laplacian.
std::vector<double> log_filter(const Geometry& g, std::span<const float> v) {
  constexpr double sigma = 1.5;
  constexpr int r = 5;  // ceil(3σ)
  double k[2 * r + 1], sum = 0;
  for (int i = -r; i <= r; ++i) sum += (k[i + r] = std::exp(-0.5 * i * i / (sigma * sigma)));
  for (double& x : k) x /= sum;
  std::vector<double> a(v.begin(), v.end()), b(a.size());
  const int64_t n[3] = {g.dims[0], g.dims[1], g.dims[2]};
  const int64_t stride[3] = {1, n[0], n[0] * n[1]};
  for (int axis = 0; axis < 3; ++axis) {
    for (int64_t z = 0; z < n[2]; ++z)
      for (int64_t y = 0; y < n[1]; ++y)
        for (int64_t x = 0; x < n[0]; ++x) {
          const int64_t p[3] = {x, y, z};
          const int64_t i = x + n[0] * (y + n[1] * z);
          double s = 0;
          for (int d = -r; d <= r; ++d) {
            const int64_t q = p[axis] + d;
            if (q >= 0 && q < n[axis]) s += k[d + r] * a[static_cast<size_t>(i + d * stride[axis])];
          }
          b[static_cast<size_t>(i)] = s;
        }
    std::swap(a, b);
  }
  for (int64_t z = 0; z < n[2]; ++z)
    for (int64_t y = 0; y < n[1]; ++y)
      for (int64_t x = 0; x < n[0]; ++x) {
        const int64_t p[3] = {x, y, z};
        const int64_t i = x + n[0] * (y + n[1] * z);
        double s = -6.0 * a[static_cast<size_t>(i)];
        for (int axis = 0; axis < 3; ++axis) {
          if (p[axis] > 0) s += a[static_cast<size_t>(i - stride[axis])];
          if (p[axis] + 1 < n[axis]) s += a[static_cast<size_t>(i + stride[axis])];
        }
        b[static_cast<size_t>(i)] = s;
      }
  return b;
}

}  // namespace

Agreement compare_maps(const Geometry& g, std::span<const float> test, std::span<const float> ref,
                       std::span<const uint8_t> mask, const Dims3& lo_in, const Dims3& hi_in, bool with_hfen) {
  check_sizes(g, test.size(), ref.size(), mask.size());
  const bool whole = lo_in == hi_in;
  Dims3 lo = whole ? Dims3{0, 0, 0} : lo_in, hi = whole ? g.dims : hi_in;
  for (int a = 0; a < 3; ++a) {
    lo[a] = std::clamp<int64_t>(lo[a], 0, g.dims[a]);
    hi[a] = std::clamp<int64_t>(hi[a], lo[a], g.dims[a]);
  }
  Agreement out;
  double st = 0, sr = 0, stt = 0, srr = 0, str = 0, see = 0;
  for (int64_t z = lo[2]; z < hi[2]; ++z)
    for (int64_t y = lo[1]; y < hi[1]; ++y)
      for (int64_t x = lo[0]; x < hi[0]; ++x) {
        const uint64_t i = g.index(x, y, z);
        if (!mask[i]) continue;
        const double t = test[i], r = ref[i], e = t - r;
        ++out.voxels;
        st += t, sr += r, stt += t * t, srr += r * r, str += t * r, see += e * e;
        out.max_abs = std::max(out.max_abs, std::abs(e));
      }
  if (out.voxels == 0) throw Error(ErrorCode::InvalidArgument, "no mask voxel to compare in the region");
  const double n = static_cast<double>(out.voxels);
  const double cov = str / n - (st / n) * (sr / n);
  const double vt = stt / n - (st / n) * (st / n), vr = srr / n - (sr / n) * (sr / n);
  out.r = vt > 0 && vr > 0 ? cov / std::sqrt(vt * vr) : (see == 0 ? 1.0 : 0.0);
  out.nrmse = srr > 0 ? std::sqrt(see / srr) : (see == 0 ? 0.0 : INFINITY);
  if (with_hfen) {
    const std::vector<double> lt = log_filter(g, test), lr = log_filter(g, ref);
    double num = 0, den = 0;
    for (int64_t z = lo[2]; z < hi[2]; ++z)
      for (int64_t y = lo[1]; y < hi[1]; ++y)
        for (int64_t x = lo[0]; x < hi[0]; ++x) {
          const uint64_t i = g.index(x, y, z);
          if (!mask[i]) continue;
          num += (lt[i] - lr[i]) * (lt[i] - lr[i]);
          den += lr[i] * lr[i];
        }
    out.hfen = den > 0 ? std::sqrt(num / den) : (num == 0 ? 0.0 : INFINITY);
  }
  return out;
}

double data_consistency_residual(const Geometry& g, std::span<const float> chi, std::span<const float> field,
                                 std::span<const uint8_t> mask, unsigned threads) {
  check_sizes(g, chi.size(), field.size(), mask.size());
  // Outside the box holding the mask and χ's nonzero voxels there are no sources and nothing is summed: the forward
  // model runs over that box, zero-padded 2× (the whole volume's padding would only add zeros), at a fraction of the
  // memory.
  const MaskBox support = box_where(g, [&](uint64_t i) { return mask[i] || chi[i] != 0.0f; });
  const Dims3 lo = support.lo, hi = support.hi;
  if (support.empty()) throw Error(ErrorCode::InvalidArgument, "the mask is empty: no field to explain");
  Geometry b = g;
  for (int a = 0; a < 3; ++a) b.dims[a] = hi[a] - lo[a];
  std::vector<float> box_chi(b.voxel_count());
  for (int64_t z = 0; z < b.dims[2]; ++z)
    for (int64_t y = 0; y < b.dims[1]; ++y)
      for (int64_t x = 0; x < b.dims[0]; ++x) box_chi[b.index(x, y, z)] = chi[g.index(lo[0] + x, lo[1] + y, lo[2] + z)];
  const std::vector<float> model = forward_field(b, box_chi, 2, threads);
  auto at = [&](int64_t x, int64_t y, int64_t z) { return g.index(lo[0] + x, lo[1] + y, lo[2] + z); };
  double n = 0, mf = 0, mm = 0;
  for (int64_t z = 0; z < b.dims[2]; ++z)
    for (int64_t y = 0; y < b.dims[1]; ++y)
      for (int64_t x = 0; x < b.dims[0]; ++x) {
        const uint64_t i = at(x, y, z);
        if (!mask[i]) continue;
        ++n, mf += field[i], mm += model[b.index(x, y, z)];
      }
  if (n == 0) throw Error(ErrorCode::InvalidArgument, "the mask is empty: no field to explain");
  mf /= n, mm /= n;
  double num = 0, den = 0;
  for (int64_t z = 0; z < b.dims[2]; ++z)
    for (int64_t y = 0; y < b.dims[1]; ++y)
      for (int64_t x = 0; x < b.dims[0]; ++x) {
        const uint64_t i = at(x, y, z);
        if (!mask[i]) continue;
        const double f = field[i] - mf, e = (model[b.index(x, y, z)] - mm) - f;
        num += e * e, den += f * f;
      }
  return den > 0 ? std::sqrt(num / den) : (num == 0 ? 0.0 : INFINITY);
}

namespace {

// scipy.ndimage's 'reflect' edge, the one QSM-CI's LoG filters with: index q mirrored into [0, n) about the
// half-voxel edges (… c b a | a b c … x y z | z y x …).
int64_t qsmci_mirror(int64_t q, int64_t n) {
  const int64_t period = 2 * n;
  int64_t m = q % period;
  if (m < 0) m += period;
  return m < n ? m : period - 1 - m;
}

// out = in correlated along one axis with the 2·radius + 1 weights k, mirrored edges: line by line, each line copied
// into a buffer extended by its mirror images, every output voxel on its own (the same bits for any thread count).
void qsmci_filter_axis(const Geometry& g, const std::vector<double>& in, std::vector<double>& out, int axis,
                       const std::vector<double>& k, unsigned threads) {
  const int64_t n[3] = {g.dims[0], g.dims[1], g.dims[2]};
  const int64_t stride[3] = {1, n[0], n[0] * n[1]};
  const int64_t radius = static_cast<int64_t>(k.size() / 2), len = n[axis], step = stride[axis];
  // A line is named by its voxel at coordinate 0 along the axis: the others' coordinates (u, w), u the faster.
  const int other0 = axis == 0 ? 1 : 0, other1 = axis == 2 ? 1 : 2;
  const uint64_t lines = static_cast<uint64_t>(n[other0] * n[other1]);
  std::vector<int64_t> source(static_cast<size_t>(len + 2 * radius));
  for (int64_t j = 0; j < len + 2 * radius; ++j) source[static_cast<size_t>(j)] = qsmci_mirror(j - radius, len);
  parallel_for(lines, threads, [&](uint64_t begin, uint64_t end) {
    std::vector<double> line(static_cast<size_t>(len + 2 * radius));
    for (uint64_t l = begin; l < end; ++l) {
      const int64_t u = static_cast<int64_t>(l) % n[other0], w = static_cast<int64_t>(l) / n[other0];
      const int64_t first = u * stride[other0] + w * stride[other1];
      for (size_t j = 0; j < line.size(); ++j) line[j] = in[static_cast<size_t>(first + source[j] * step)];
      for (int64_t c = 0; c < len; ++c) {
        double s = 0.0;
        for (int64_t d = 0; d <= 2 * radius; ++d) s += k[static_cast<size_t>(d)] * line[static_cast<size_t>(c + d)];
        out[static_cast<size_t>(first + c * step)] = s;
      }
    }
  });
}

// Σ over the mask of LoG(v)²: LoG = Σ over the axes of the Gaussian's second derivative along that axis and the
// Gaussian along the others (scipy.ndimage.gaussian_laplace: σ = 1.5 voxels, truncate 5, so a radius of
// int(5σ + 0.5) = 8 voxels; the Gaussian's weights normalised to sum 1, the second derivative's
// (x² / σ⁴ − 1 / σ²) times them).
double qsmci_log_energy(const Geometry& g, const std::vector<double>& v, std::span<const uint8_t> mask, unsigned threads) {
  constexpr double sigma = 1.5;
  constexpr int radius = static_cast<int>(5.0 * sigma + 0.5);
  std::vector<double> k0(2 * radius + 1), k2(2 * radius + 1);
  double sum = 0.0;
  for (int x = -radius; x <= radius; ++x) sum += (k0[x + radius] = std::exp(-0.5 / (sigma * sigma) * x * x));
  for (int x = -radius; x <= radius; ++x) {
    k0[x + radius] /= sum;
    k2[x + radius] = k0[x + radius] * (x * x / (sigma * sigma * sigma * sigma) - 1.0 / (sigma * sigma));
  }
  std::vector<double> log(v.size(), 0.0), a(v.size()), b(v.size());
  for (int second = 0; second < 3; ++second) {
    qsmci_filter_axis(g, v, a, 0, second == 0 ? k2 : k0, threads);
    qsmci_filter_axis(g, a, b, 1, second == 1 ? k2 : k0, threads);
    qsmci_filter_axis(g, b, a, 2, second == 2 ? k2 : k0, threads);
    for (size_t i = 0; i < v.size(); ++i) log[i] += a[i];
  }
  double energy = 0.0;
  for (size_t i = 0; i < v.size(); ++i)
    if (mask[i]) energy += log[i] * log[i];
  return energy;
}

// XSIM (Milovic et al. 2024, as QSM-CI's scorer computes it): at each voxel of the mask, SSIM of r and t over the
// 5×5×5 window about it (only its voxels inside the volume, means and variances divided by their count),
// C1 = (0.01 · 1 ppm)², C2 = (0.001 · 1 ppm)²; the mean over the mask voxels where its denominator is > 0.
// The windows' sums are built slice by slice: each slice's 5×5 in-plane sums, then the 5 slices about z.
double qsmci_xsim(const Geometry& g, std::span<const float> r, std::span<const float> t, std::span<const uint8_t> mask,
                  unsigned threads) {
  constexpr double c1 = 1e-4, c2 = 1e-6;
  constexpr int64_t half = 2;
  const int64_t nx = g.dims[0], ny = g.dims[1], nz = g.dims[2];
  const uint64_t plane = static_cast<uint64_t>(nx * ny);
  constexpr int kinds = 5;  // r, t, r², t², r·t
  // planes[z % 5][kind]: the in-plane window sums of slice z.
  std::vector<std::vector<double>> planes(5 * kinds, std::vector<double>(plane));
  std::vector<double> row(plane * kinds);
  auto in_plane = [&](int64_t z) {
    const uint64_t base = static_cast<uint64_t>(z) * plane;
    auto value = [&](int kind, uint64_t i) {
      const double a = r[base + i], b = t[base + i];
      switch (kind) {
        case 0: return a;
        case 1: return b;
        case 2: return a * a;
        case 3: return b * b;
        default: return a * b;
      }
    };
    parallel_for(plane, threads, [&](uint64_t begin, uint64_t end) {
      for (uint64_t i = begin; i < end; ++i) {
        const int64_t x = static_cast<int64_t>(i) % nx;
        for (int kind = 0; kind < kinds; ++kind) {
          double s = 0.0;
          for (int64_t q = std::max<int64_t>(0, x - half); q <= std::min(nx - 1, x + half); ++q)
            s += value(kind, i - static_cast<uint64_t>(x) + static_cast<uint64_t>(q));
          row[i * kinds + kind] = s;
        }
      }
    });
    std::vector<double>* out = &planes[static_cast<size_t>(z % 5) * kinds];
    parallel_for(plane, threads, [&](uint64_t begin, uint64_t end) {
      for (uint64_t i = begin; i < end; ++i) {
        const int64_t x = static_cast<int64_t>(i) % nx, y = static_cast<int64_t>(i) / nx;
        for (int kind = 0; kind < kinds; ++kind) {
          double s = 0.0;
          for (int64_t q = std::max<int64_t>(0, y - half); q <= std::min(ny - 1, y + half); ++q)
            s += row[static_cast<size_t>(x + q * nx) * kinds + kind];
          out[kind][i] = s;
        }
      }
    });
  };
  auto span_count = [](int64_t c, int64_t n) { return std::min(n - 1, c + half) - std::max<int64_t>(0, c - half) + 1; };
  double total = 0.0;
  uint64_t counted = 0;
  for (int64_t z = 0; z < std::min(nz, half); ++z) in_plane(z);
  for (int64_t z = 0; z < nz; ++z) {
    if (z + half < nz) in_plane(z + half);
    const int64_t z0 = std::max<int64_t>(0, z - half), z1 = std::min(nz - 1, z + half);
    for (int64_t y = 0; y < ny; ++y)
      for (int64_t x = 0; x < nx; ++x) {
        const uint64_t i = static_cast<uint64_t>(x + nx * y);
        if (!mask[static_cast<uint64_t>(z) * plane + i]) continue;
        double s[kinds] = {0, 0, 0, 0, 0};
        for (int64_t q = z0; q <= z1; ++q)
          for (int kind = 0; kind < kinds; ++kind) s[kind] += planes[static_cast<size_t>(q % 5) * kinds + kind][i];
        const double count = static_cast<double>(span_count(x, nx) * span_count(y, ny) * (z1 - z0 + 1));
        const double mr = s[0] / count, mt = s[1] / count;
        const double vr = s[2] / count - mr * mr, vt = s[3] / count - mt * mt, cov = s[4] / count - mr * mt;
        const double num = (2.0 * mr * mt + c1) * (2.0 * cov + c2);
        const double den = (mr * mr + mt * mt + c1) * (vr + vt + c2);
        if (!(den > 0.0)) continue;
        total += num / den;
        ++counted;
      }
  }
  return counted ? total / static_cast<double>(counted) : 0.0;
}

}  // namespace

ChallengeScores challenge_scores(const Geometry& g, std::span<const float> recon, std::span<const float> reference,
                                 std::span<const uint8_t> mask, unsigned threads) {
  check_sizes(g, recon.size(), reference.size(), mask.size());
  uint64_t bad_r = 0, bad_t = 0;
  for (size_t i = 0; i < recon.size(); ++i) bad_r += !std::isfinite(recon[i]), bad_t += !std::isfinite(reference[i]);
  if (bad_r || bad_t) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(bad_r ? "the reconstruction" : "the reference") + " holds " + std::to_string(bad_r ? bad_r : bad_t) +
                    " NaN or infinite values: the scores filter the whole volumes, so every value must be finite (set the voxels "
                    "outside the object to 0)");
  }
  ChallengeScores out;
  double sr = 0.0, st = 0.0;
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) ++out.voxels, sr += recon[i], st += reference[i];
  if (out.voxels == 0) throw Error(ErrorCode::InvalidArgument, "the evaluation mask is empty: no voxel to score");
  const double n = static_cast<double>(out.voxels), mr = sr / n, mt = st / n;
  // Demeaned sums: x = t − mean t, y = r − mean r.
  double sx = 0.0, sy = 0.0, sxx = 0.0, syy = 0.0, sxy = 0.0, see = 0.0;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) continue;
    const double x = reference[i] - mt, y = recon[i] - mr;
    sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y, see += (y - x) * (y - x);
  }
  if (!(sxx > 0.0)) throw Error(ErrorCode::InvalidArgument, "the reference is constant inside the evaluation mask: the scores normalise by its variation");
  out.nrmse = 100.0 * std::sqrt(see / sxx);
  // y = s·x + i by least squares (QSM-CI's linear_fit), then y → (y − i) / s; a flat fit keeps the demeaned NRMSE.
  const double fit_den = n * sxx - sx * sx;
  const double slope = std::abs(fit_den) < 1e-30 ? 0.0 : (n * sxy - sx * sy) / fit_den;
  const double intercept = std::abs(fit_den) < 1e-30 ? 0.0 : (sy - slope * sx) / n;
  if (std::abs(slope) < 1e-30) {
    out.nrmse_detrended = out.nrmse;
  } else {
    double sdd = 0.0;
    for (size_t i = 0; i < mask.size(); ++i) {
      if (!mask[i]) continue;
      const double x = reference[i] - mt, y = recon[i] - mr, d = (y - intercept) / slope - x;
      sdd += d * d;
    }
    out.nrmse_detrended = 100.0 * std::sqrt(sdd / sxx);
  }
  const double cc_den = std::sqrt(sxx * syy);
  out.cc = cc_den > 0.0 ? sxy / cc_den : 0.0;
  // HFEN: LoG is linear, so LoG(r) − LoG(t) = LoG(r − t), with r − t exact in double.
  std::vector<double> v(recon.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(recon[i]) - static_cast<double>(reference[i]);
  const double err = qsmci_log_energy(g, v, mask, threads);
  for (size_t i = 0; i < v.size(); ++i) v[i] = reference[i];
  const double ref = qsmci_log_energy(g, v, mask, threads);
  out.hfen = ref > 0.0 ? 100.0 * std::sqrt(err / ref) : NAN;
  out.xsim = qsmci_xsim(g, recon, reference, mask, threads);
  return out;
}

}  // namespace tessera
