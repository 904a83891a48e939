#include "tessera/common/geometry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "tessera/common/error.h"
#include "tessera/common/morphology.h"

#include "common/message_number.h"
#include "common/parallel.h"

namespace tessera {

std::string dims_text(const Dims3& d) {
  return std::to_string(d[0]) + "×" + std::to_string(d[1]) + "×" + std::to_string(d[2]);
}
std::string dims_text(const std::array<uint64_t, 3>& d) {
  return std::to_string(d[0]) + "×" + std::to_string(d[1]) + "×" + std::to_string(d[2]);
}

void validate_geometry(const Geometry& g) {
  for (int a = 0; a < 3; ++a) {
    if (g.dims[a] <= 0) {
      throw Error(ErrorCode::InvalidArgument,
                  "volume dims " + dims_text(g.dims) + " are invalid: every dimension must be at least 1");
    }
  }
  // 2^40 voxels is far beyond a browser; the bound keeps every product in 64 bits.
  constexpr int64_t kMaxDim = int64_t{1} << 20;
  for (int a = 0; a < 3; ++a) {
    if (g.dims[a] > kMaxDim) {
      throw Error(ErrorCode::InvalidArgument, "volume dims " + dims_text(g.dims) + " are too large (at most " +
                                                  std::to_string(kMaxDim) + " per axis)");
    }
  }
  if (g.voxel_count() > (uint64_t{1} << 40)) {
    throw Error(ErrorCode::InvalidArgument, "volume " + dims_text(g.dims) + " holds too many voxels");
  }
  if (g.voxel_count() > std::numeric_limits<size_t>::max() / sizeof(float)) {
    throw Error(ErrorCode::InvalidArgument, "volume " + dims_text(g.dims) + " cannot be addressed on this platform");
  }
  for (int a = 0; a < 3; ++a) {
    if (!(std::isfinite(g.voxel_mm[a]) && g.voxel_mm[a] > 0.0)) {
      throw Error(ErrorCode::InvalidArgument, "voxel size must be positive and finite on every axis (axis " +
                                                  std::to_string(a) + " is " + std::to_string(g.voxel_mm[a]) + " mm)");
    }
  }
  double n2 = 0.0;
  for (int a = 0; a < 3; ++a) {
    if (!std::isfinite(g.b0_dir[a])) {
      throw Error(ErrorCode::InvalidArgument, "B0 direction must be finite");
    }
    n2 += g.b0_dir[a] * g.b0_dir[a];
  }
  if (n2 == 0.0) {
    throw Error(ErrorCode::InvalidArgument, "B0 direction is the zero vector; give the field direction, e.g. (0, 0, 1)");
  }
}

void validate_volume_sizes(const Geometry& g, uint64_t field_size, uint64_t mask_size) {
  const uint64_t n = g.voxel_count();
  if (field_size != n) {
    throw Error(ErrorCode::InvalidArgument, "field holds " + std::to_string(field_size) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(n) + " voxels");
  }
  if (mask_size != n) {
    throw Error(ErrorCode::InvalidArgument, "mask holds " + std::to_string(mask_size) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(n) +
                                                " voxels: field and mask must have the same dims");
  }
}

void validate_mask_not_empty(const Geometry& g, std::span<const uint8_t> mask) {
  if (mask.empty() || std::any_of(mask.begin(), mask.end(), [](uint8_t v) { return v != 0; })) return;
  throw Error(ErrorCode::InvalidArgument,
              "the mask holds no voxel: all " + std::to_string(mask.size()) + " values of the " + dims_text(g.dims) +
                  " mask are 0, so there is nothing to invert; check the mask file (a brain mask, not an empty "
                  "volume), the threshold that made it, or that it belongs to this field");
}

void validate_finite(const Geometry& g, std::span<const float> field) {
  uint64_t bad = 0;
  uint64_t first = 0;
  for (uint64_t i = 0; i < field.size(); ++i) {
    if (!std::isfinite(field[i])) {
      if (bad == 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) return;
  const uint64_t nx = static_cast<uint64_t>(g.dims[0]), ny = static_cast<uint64_t>(g.dims[1]);
  const uint64_t x = first % nx, y = (first / nx) % ny, z = first / (nx * ny);
  throw Error(ErrorCode::NonFiniteInput,
              "field has " + std::to_string(bad) + " non-finite voxel" + (bad == 1 ? "" : "s") +
                  " (NaN or Inf), the first at (" + std::to_string(x) + ", " + std::to_string(y) + ", " +
                  std::to_string(z) + "); replace them with 0 (and exclude them from the mask) before inverting");
}

MaskBox mask_box(const Geometry& g, std::span<const uint8_t> mask) {
  return box_where(g, [&](uint64_t i) { return mask[i] != 0; });
}

void distance_transform_line(double* d, int64_t n, double h, std::vector<int64_t>& v, std::vector<double>& zb,
                             std::vector<double>& out, double cap) {
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
    out[q] = std::min(cap, t * t + d[v[k]]);
  }
  std::memcpy(d, out.data(), static_cast<size_t>(n) * sizeof(double));
}

std::vector<double> outside_distance2(const Geometry& g, std::span<const uint8_t> mask, const MaskBox& box,
                                      unsigned threads) {
  const Dims3 e{box.ext()[0] + 2, box.ext()[1] + 2, box.ext()[2] + 2};
  std::vector<double> d(static_cast<size_t>(e[0] * e[1] * e[2]));
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
        distance_transform_line(line.data(), n, h, v, zb, out);
        for (int64_t i = 0; i < n; ++i) (axis == 1 ? at(x, i, o) : at(x, o, i)) = line[i];
      }
    });
  }
  return d;
}

uint64_t erosion_workspace_bytes(const Dims3& dims, unsigned threads) {
  const uint64_t grown =
      static_cast<uint64_t>(dims[0] + 2) * static_cast<uint64_t>(dims[1] + 2) * static_cast<uint64_t>(dims[2] + 2);
  // EDT line scratch per thread: v, z, out, line of the longest axis
  const int64_t longest = std::max({dims[0], dims[1], dims[2]}) + 3;
  const uint64_t scratch = static_cast<uint64_t>(std::max(1u, threads == 0 ? 64u : threads)) *
                           static_cast<uint64_t>(longest) * 4 * sizeof(double);
  return grown * sizeof(double) + scratch;
}

std::vector<uint8_t> erode_mask_mm(const Geometry& g, std::span<const uint8_t> mask, double radius_mm,
                                   unsigned threads) {
  validate_geometry(g);
  if (mask.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "erode_mask_mm: mask holds " + std::to_string(mask.size()) +
                                                " values but the volume " + dims_text(g.dims) + " has " +
                                                std::to_string(g.voxel_count()) + " voxels");
  }
  if (!(radius_mm >= 0.0 && std::isfinite(radius_mm))) {
    throw Error(ErrorCode::InvalidArgument,
                "erode_mask_mm: radius must be finite and >= 0 mm, got " + message_number(radius_mm));
  }
  std::vector<uint8_t> out(mask.size(), 0);
  if (std::none_of(mask.begin(), mask.end(), [](uint8_t m) { return m != 0; })) return out;
  const MaskBox box = mask_box(g, mask);
  const Dims3 ext = box.ext();
  const std::vector<double> d = outside_distance2(g, mask, box, threads);
  const Dims3 e{ext[0] + 2, ext[1] + 2, ext[2] + 2};
  const double r2 = radius_mm * radius_mm;
  for (int64_t z = 0; z < ext[2]; ++z)
    for (int64_t y = 0; y < ext[1]; ++y)
      for (int64_t x = 0; x < ext[0]; ++x) {
        const double dd = d[static_cast<size_t>((x + 1) + e[0] * ((y + 1) + e[1] * (z + 1)))];
        out[g.index(box.lo[0] + x, box.lo[1] + y, box.lo[2] + z)] = dd > r2 ? 1 : 0;
      }
  return out;
}

std::vector<uint8_t> erode_mask_voxels(const Geometry& g, std::span<const uint8_t> mask, uint32_t radius_voxels,
                                       unsigned threads) {
  validate_geometry(g);
  if (radius_voxels > 255) {
    throw Error(ErrorCode::InvalidArgument,
                "erode radius must be at most 255 voxels, got " + std::to_string(radius_voxels));
  }
  Geometry unit = g;
  unit.voxel_mm = {1.0, 1.0, 1.0};
  return erode_mask_mm(unit, mask, static_cast<double>(radius_voxels), threads);
}

}  // namespace tessera
