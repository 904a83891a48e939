#include "background/support.h"

#include "tessera/background/local_field.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "common/parallel.h"
#include "common/message_number.h"
#include "tessera/common/error.h"

namespace tessera::background_internal {

void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

void check_inputs(const char* what, const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask) {
  validate_geometry(g);
  validate_volume_sizes(g, field.size(), mask.size());
  uint64_t inside = 0, bad = 0, first_bad = 0;
  for (uint64_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) continue;
    ++inside;
    if (!std::isfinite(field[i]) && bad++ == 0) first_bad = i;
  }
  if (inside == 0) {
    invalid(std::string(what) + ": the mask holds no voxel (every value is 0): give the brain mask the field is "
                                "defined on");
  }
  if (bad) {
    const uint64_t nx = static_cast<uint64_t>(g.dims[0]), ny = static_cast<uint64_t>(g.dims[1]);
    throw Error(ErrorCode::NonFiniteInput,
                std::string(what) + ": the field holds " + std::to_string(bad) + " NaN/Inf voxels inside the mask, the "
                    "first at (" + std::to_string(first_bad % nx) + ", " + std::to_string(first_bad / nx % ny) + ", " +
                    std::to_string(first_bad / (nx * ny)) + "): remove them from the mask or fix the field");
  }
}

int64_t fast_size(int64_t n) {
  for (int64_t m = std::max<int64_t>(n, 1);; ++m) {
    int64_t r = m;
    for (int64_t p : {2, 3, 5})
      while (r % p == 0) r /= p;
    if (r == 1) return m;
  }
}

Box mask_box(const Geometry& g, std::span<const uint8_t> mask) {
  Dims3 lo{g.dims[0], g.dims[1], g.dims[2]}, hi{-1, -1, -1};
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      const uint8_t* row = mask.data() + g.index(0, y, z);
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        if (!row[x]) continue;
        const int64_t p[3] = {x, y, z};
        for (int a = 0; a < 3; ++a) {
          lo[a] = std::min(lo[a], p[a]);
          hi[a] = std::max(hi[a], p[a]);
        }
      }
    }
  Box b;
  for (int a = 0; a < 3; ++a) {
    b.lo[a] = lo[a];
    b.ext[a] = hi[a] - lo[a] + 1;
  }
  return b;
}

uint64_t count(const Dims3& d) {
  return static_cast<uint64_t>(d[0]) * static_cast<uint64_t>(d[1]) * static_cast<uint64_t>(d[2]);
}

namespace {

// In-place 1D squared distance transform of one line (Felzenszwalb & Huttenlocher 2012, Theory of Computing):
// d[i] = min_j (h (i − j))² + d[j]. v, z: scratch of n and n + 1 values.
void edt_line(double* d, int64_t n, double h, std::vector<int64_t>& v, std::vector<double>& zb,
              std::vector<double>& out) {
  int64_t k = 0;
  v[0] = 0;
  zb[0] = -std::numeric_limits<double>::infinity();
  zb[1] = std::numeric_limits<double>::infinity();
  auto pos = [h](int64_t q) { return h * static_cast<double>(q); };
  for (int64_t q = 1; q < n; ++q) {
    // where the parabola of q overtakes the rightmost kept one; zb[0] = −∞ ends the loop (every d is finite)
    auto meet = [&](int64_t p) {
      return ((d[q] + pos(q) * pos(q)) - (d[p] + pos(p) * pos(p))) / (2.0 * (pos(q) - pos(p)));
    };
    double s = meet(v[k]);
    while (s <= zb[k]) s = meet(v[--k]);
    ++k;
    v[k] = q;
    zb[k] = s;
    zb[k + 1] = std::numeric_limits<double>::infinity();
  }
  k = 0;
  for (int64_t q = 0; q < n; ++q) {
    while (zb[k + 1] < pos(q)) ++k;
    const double t = pos(q) - pos(v[k]);
    out[q] = t * t + d[v[k]];
  }
  std::memcpy(d, out.data(), static_cast<size_t>(n) * sizeof(double));
}

}  // namespace

std::vector<double> outside_distance2(const Geometry& g, std::span<const uint8_t> mask, const Box& box,
                                      unsigned threads) {
  const Dims3 e{box.ext[0] + 2, box.ext[1] + 2, box.ext[2] + 2};
  std::vector<double> d(static_cast<size_t>(count(e)));
  auto at = [&](int64_t x, int64_t y, int64_t z) -> double& {
    return d[static_cast<size_t>(x + e[0] * (y + e[1] * z))];
  };
  // x pass: distance to the nearest outside voxel along the line (two scans).
  const uint64_t lines_x = static_cast<uint64_t>(e[1] * e[2]);
  parallel_for(lines_x, threads, [&](uint64_t begin, uint64_t end) {
    for (uint64_t l = begin; l < end; ++l) {
      const int64_t y = static_cast<int64_t>(l) % e[1], z = static_cast<int64_t>(l) / e[1];
      auto inside = [&](int64_t x) {
        const int64_t vx = box.lo[0] + x - 1, vy = box.lo[1] + y - 1, vz = box.lo[2] + z - 1;
        if (x == 0 || y == 0 || z == 0 || x == e[0] - 1 || y == e[1] - 1 || z == e[2] - 1) return false;
        return mask[g.index(vx, vy, vz)] != 0;
      };
      int64_t last = -1;
      for (int64_t x = 0; x < e[0]; ++x) {
        if (!inside(x)) last = x;
        at(x, y, z) = static_cast<double>(x - last);  // last >= 0: x = 0 is outside
      }
      last = e[0] - 1;
      for (int64_t x = e[0] - 1; x >= 0; --x) {
        if (!inside(x)) last = x;
        const double s = std::min(at(x, y, z), static_cast<double>(last - x)) * g.voxel_mm[0];
        at(x, y, z) = s * s;
      }
    }
  });
  // y and z passes: lower envelopes of parabolas.
  for (int axis = 1; axis < 3; ++axis) {
    const int64_t n = e[axis];
    const int64_t other = axis == 1 ? e[2] : e[1];
    const uint64_t lines = static_cast<uint64_t>(e[0] * other);
    const double h = g.voxel_mm[axis];
    parallel_for(lines, threads, [&](uint64_t begin, uint64_t end) {
      std::vector<int64_t> v(static_cast<size_t>(n));
      std::vector<double> zb(static_cast<size_t>(n + 1)), out(static_cast<size_t>(n)), line(static_cast<size_t>(n));
      for (uint64_t l = begin; l < end; ++l) {
        const int64_t x = static_cast<int64_t>(l) % e[0], o = static_cast<int64_t>(l) / e[0];
        for (int64_t i = 0; i < n; ++i) line[i] = axis == 1 ? at(x, i, o) : at(x, o, i);
        edt_line(line.data(), n, h, v, zb, out);
        for (int64_t i = 0; i < n; ++i) (axis == 1 ? at(x, i, o) : at(x, o, i)) = line[i];
      }
    });
  }
  return d;
}

double min_edge(const Vec3& v) { return std::min({v[0], v[1], v[2]}); }
double max_edge(const Vec3& v) { return std::max({v[0], v[1], v[2]}); }

void load_real(std::vector<Complex>& c, const std::vector<float>& v, unsigned threads) {
  parallel_for(c.size(), threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) c[i] = Complex(v[i], 0.0f);
  });
}

Dims3 smv_padded(const Dims3& ext, const Vec3& voxel_mm, double r_mm) {
  Dims3 p;
  for (int a = 0; a < 3; ++a) {
    const int64_t pad = static_cast<int64_t>(std::ceil(r_mm / voxel_mm[a]));
    p[a] = fast_size(ext[a] + 2 * pad);
  }
  return p;
}

std::vector<uint8_t> eroded_or_refuse(const std::string& parameter, const Geometry& g, std::span<const uint8_t> mask,
                                      const Box& box, const Dims3& padded, double radius_mm, unsigned threads) {
  const std::vector<double> d = outside_distance2(g, mask, box, threads);
  const Dims3 e{box.ext[0] + 2, box.ext[1] + 2, box.ext[2] + 2};
  const double r2 = radius_mm * radius_mm;
  std::vector<uint8_t> out(static_cast<size_t>(count(padded)), 0);
  double deepest = 0.0;
  uint64_t kept = 0;
  for (int64_t z = 0; z < box.ext[2]; ++z)
    for (int64_t y = 0; y < box.ext[1]; ++y)
      for (int64_t x = 0; x < box.ext[0]; ++x) {
        const double dd = d[static_cast<size_t>((x + 1) + e[0] * ((y + 1) + e[1] * (z + 1)))];
        deepest = std::max(deepest, dd);
        const uint8_t in = dd > r2 ? 1 : 0;
        out[static_cast<size_t>(x + padded[0] * (y + padded[1] * z))] = in;
        kept += in;
      }
  if (kept == 0) {
    invalid(parameter + " " + message_number(radius_mm) + " mm erodes the mask to nothing: its deepest voxel lies " +
            message_number(std::sqrt(deepest)) + " mm inside; give a smaller radius or a larger mask");
  }
  return out;
}

uint64_t erosion_workspace_bytes(const Dims3& dims, unsigned threads) {
  const uint64_t grown = count({dims[0] + 2, dims[1] + 2, dims[2] + 2});
  // EDT line scratch per thread: v, z, out, line of the longest axis
  const int64_t longest = std::max({dims[0], dims[1], dims[2]}) + 3;
  const uint64_t scratch = static_cast<uint64_t>(std::max(1u, threads == 0 ? 64u : threads)) *
                           static_cast<uint64_t>(longest) * 4 * sizeof(double);
  return grown * sizeof(double) + scratch;
}

void check_radius_mm(const std::string& parameter, double radius_mm) {
  if (!(radius_mm >= 0.5 && radius_mm <= 50.0)) {
    invalid(parameter + " must be in [0.5, 50] mm, got " + message_number(radius_mm));
  }
}

std::vector<float> smv_kernel_hat(const Geometry& g, const Dims3& padded, double r_mm, std::vector<Complex>& work,
                                  unsigned threads) {
  const uint64_t n = count(padded);
  const double r2 = r_mm * r_mm;
  int64_t reach[3];
  for (int a = 0; a < 3; ++a) reach[a] = static_cast<int64_t>(std::floor(r_mm / g.voxel_mm[a]));
  work.assign(static_cast<size_t>(n), Complex(0.0f, 0.0f));
  uint64_t voxels = 0;
  for (int64_t dz = -reach[2]; dz <= reach[2]; ++dz)
    for (int64_t dy = -reach[1]; dy <= reach[1]; ++dy)
      for (int64_t dx = -reach[0]; dx <= reach[0]; ++dx) {
        const double px = static_cast<double>(dx) * g.voxel_mm[0], py = static_cast<double>(dy) * g.voxel_mm[1],
                     pz = static_cast<double>(dz) * g.voxel_mm[2];
        if (px * px + py * py + pz * pz > r2) continue;
        const int64_t ix = (dx + padded[0]) % padded[0], iy = (dy + padded[1]) % padded[1],
                      iz = (dz + padded[2]) % padded[2];
        work[static_cast<size_t>(ix + padded[0] * (iy + padded[1] * iz))] = Complex(1.0f, 0.0f);
        ++voxels;
      }
  fft3d_forward(work, padded, threads);
  const float scale = 1.0f / static_cast<float>(voxels);
  std::vector<float> s(static_cast<size_t>(n));
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) s[i] = work[i].real() * scale;
  });
  return s;
}

}  // namespace tessera::background_internal

namespace tessera {

std::vector<uint8_t> erode_mask(const Geometry& g, std::span<const uint8_t> mask, double radius_mm, unsigned threads) {
  validate_geometry(g);
  if (mask.size() != g.voxel_count()) {
    background_internal::invalid("erode_mask: mask holds " + std::to_string(mask.size()) + " values but the volume " + dims_text(g.dims) +
            " has " + std::to_string(g.voxel_count()) + " voxels");
  }
  if (!(radius_mm >= 0.0 && std::isfinite(radius_mm))) {
    background_internal::invalid("erode_mask: radius must be finite and >= 0 mm, got " + message_number(radius_mm));
  }
  std::vector<uint8_t> out(mask.size(), 0);
  if (std::none_of(mask.begin(), mask.end(), [](uint8_t m) { return m != 0; })) return out;
  const background_internal::Box box = background_internal::mask_box(g, mask);
  const std::vector<double> d = background_internal::outside_distance2(g, mask, box, threads);
  const Dims3 e{box.ext[0] + 2, box.ext[1] + 2, box.ext[2] + 2};
  const double r2 = radius_mm * radius_mm;
  for (int64_t z = 0; z < box.ext[2]; ++z)
    for (int64_t y = 0; y < box.ext[1]; ++y)
      for (int64_t x = 0; x < box.ext[0]; ++x) {
        const double dd = d[static_cast<size_t>((x + 1) + e[0] * ((y + 1) + e[1] * (z + 1)))];
        out[g.index(box.lo[0] + x, box.lo[1] + y, box.lo[2] + z)] = dd > r2 ? 1 : 0;
      }
  return out;
}

}  // namespace tessera
