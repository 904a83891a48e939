#include "tessera/quality/fidelity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/common/dipole.h"
#include "tessera/common/error.h"

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
  Dims3 lo = g.dims, hi{0, 0, 0};
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const uint64_t i = g.index(x, y, z);
        if (!mask[i] && chi[i] == 0.0f) continue;
        const int64_t p[3] = {x, y, z};
        for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], p[a]), hi[a] = std::max(hi[a], p[a] + 1);
      }
  if (hi[0] == 0) throw Error(ErrorCode::InvalidArgument, "the mask is empty: no field to explain");
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

}  // namespace tessera
