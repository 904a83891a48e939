#include "tessera/background/background.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "common/message_number.h"
#include "common/parallel.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/common/fft.h"

namespace tessera {

namespace {

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

// Sizes, a mask with a voxel, a field finite wherever the mask holds (outside it the methods never read it).
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

// The smallest n' >= n whose prime factors are 2, 3 and 5 (fast for the FFT).
int64_t fast_size(int64_t n) {
  for (int64_t m = std::max<int64_t>(n, 1);; ++m) {
    int64_t r = m;
    for (int64_t p : {2, 3, 5})
      while (r % p == 0) r /= p;
    if (r == 1) return m;
  }
}

// The mask's bounding box [lo, lo + ext).
struct Box {
  Dims3 lo{0, 0, 0};
  Dims3 ext{0, 0, 0};
};

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

// Calls f(volume index, padded index) for every voxel of the box (the box sits at the padded volume's low corner).
template <typename F>
void for_each_box_voxel(const Geometry& g, const Box& box, const Dims3& padded, F&& f) {
  for (int64_t z = 0; z < box.ext[2]; ++z)
    for (int64_t y = 0; y < box.ext[1]; ++y) {
      const uint64_t vi = g.index(box.lo[0], box.lo[1] + y, box.lo[2] + z);
      const uint64_t pi = static_cast<uint64_t>(padded[0]) * (static_cast<uint64_t>(y) + static_cast<uint64_t>(padded[1]) * static_cast<uint64_t>(z));
      for (int64_t x = 0; x < box.ext[0]; ++x) f(vi + static_cast<uint64_t>(x), pi + static_cast<uint64_t>(x));
    }
}

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

// Squared distance (mm²) from every voxel of the box grown by one voxel on each side to the nearest voxel outside the
// mask (beyond the volume's faces counts as outside); the grown layer is outside, so every line holds an outside voxel.
// Layout: (ext + 2) per axis, x-fastest.
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

// Real part of a complex buffer into / from floats, elementwise (deterministic for any thread count).
void load_real(std::vector<Complex>& c, const std::vector<float>& v, unsigned threads) {
  parallel_for(c.size(), threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) c[i] = Complex(v[i], 0.0f);
  });
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// V-SHARP
// ---------------------------------------------------------------------------------------------------------------

void validate(const VSharpParams& p) {
  if (!(p.max_radius_voxels >= 1.0 && p.max_radius_voxels <= 64.0)) {
    invalid("vsharp: max_radius_voxels must be in [1, 64] voxels (18 is customary), got " +
            message_number(p.max_radius_voxels));
  }
  if (!(p.min_radius_voxels >= 1.0 && p.min_radius_voxels <= p.max_radius_voxels)) {
    invalid("vsharp: min_radius_voxels must be in [1, max_radius_voxels = " + message_number(p.max_radius_voxels) +
            "] voxels (a smaller sphere holds no neighbour), got " + message_number(p.min_radius_voxels));
  }
  if (!(p.step_voxels > 0.0 && p.step_voxels <= 64.0)) {
    invalid("vsharp: step_voxels must be in (0, 64] voxels (1 is customary), got " + message_number(p.step_voxels));
  }
  if (!(p.threshold > 0.0 && p.threshold < 1.0)) {
    invalid("vsharp: threshold must be in (0, 1) (0.05 is customary, Wu et al. 2012), got " +
            message_number(p.threshold));
  }
  const double radii = std::floor((p.max_radius_voxels - p.min_radius_voxels) / p.step_voxels) + 2.0;
  if (radii > static_cast<double>(kVSharpMaxRadii)) {
    invalid("vsharp: radii from " + message_number(p.max_radius_voxels) + " to " +
            message_number(p.min_radius_voxels) + " voxels by " + message_number(p.step_voxels) +
            " make more than " + std::to_string(kVSharpMaxRadii) + " kernels: raise step_voxels");
  }
}

std::vector<double> vsharp_radii_mm(const Vec3& voxel_mm, const VSharpParams& p) {
  validate(p);
  for (int a = 0; a < 3; ++a) {
    if (!(voxel_mm[a] > 0.0 && std::isfinite(voxel_mm[a]))) invalid("vsharp: voxel size must be positive and finite");
  }
  const double hi = p.max_radius_voxels * min_edge(voxel_mm);
  const double lo = p.min_radius_voxels * max_edge(voxel_mm);
  const double step = p.step_voxels * max_edge(voxel_mm);
  if (hi < lo) {
    invalid("vsharp: the largest radius " + message_number(hi) + " mm (max_radius_voxels " +
            message_number(p.max_radius_voxels) + " × the smallest voxel edge) is below the smallest " +
            message_number(lo) + " mm (min_radius_voxels " +
            message_number(p.min_radius_voxels) + " × the largest edge): raise max_radius_voxels");
  }
  std::vector<double> radii;
  for (double r = hi; r > lo + 1e-9 * lo; r -= step) radii.push_back(r);
  radii.push_back(lo);
  return radii;
}

std::vector<uint8_t> erode_mask(const Geometry& g, std::span<const uint8_t> mask, double radius_mm, unsigned threads) {
  validate_geometry(g);
  if (mask.size() != g.voxel_count()) {
    invalid("erode_mask: mask holds " + std::to_string(mask.size()) + " values but the volume " + dims_text(g.dims) +
            " has " + std::to_string(g.voxel_count()) + " voxels");
  }
  if (!(radius_mm >= 0.0 && std::isfinite(radius_mm))) {
    invalid("erode_mask: radius must be finite and >= 0 mm, got " + message_number(radius_mm));
  }
  std::vector<uint8_t> out(mask.size(), 0);
  if (std::none_of(mask.begin(), mask.end(), [](uint8_t m) { return m != 0; })) return out;
  const Box box = mask_box(g, mask);
  const std::vector<double> d = outside_distance2(g, mask, box, threads);
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

namespace {

constexpr uint8_t kUnassigned = 255;

// The padded dims of a box for V-SHARP: the box grown by the largest radius on each side, rounded up to a fast size.
Dims3 vsharp_padded(const Dims3& ext, const Vec3& voxel_mm, double r_max_mm) {
  Dims3 p;
  for (int a = 0; a < 3; ++a) {
    const int64_t pad = static_cast<int64_t>(std::ceil(r_max_mm / voxel_mm[a]));
    p[a] = fast_size(ext[a] + 2 * pad);
  }
  return p;
}

}  // namespace

struct VSharp::State {
  Geometry g;
  std::span<const float> field;
  std::span<const uint8_t> mask;
  VSharpParams params;
  unsigned threads = 1;
  std::vector<double> radii;
  Box box;
  Dims3 padded{0, 0, 0};
  std::vector<uint8_t> assign;     // per padded voxel: index of the radius that filters it, kUnassigned elsewhere
  std::vector<Complex> field_hat;  // FFT of the masked field in the padded box
  std::vector<Complex> work;
  std::vector<float> inverse;      // TSVD inverse of 1 − S of the largest kernel
  std::vector<float> assembled;    // the high-passed field, each voxel from its radius
  uint32_t done = 0;
  bool taken = false;
  LocalField result;
};

VSharp::VSharp(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
               const VSharpParams& params, unsigned threads)
    : state_(std::make_unique<State>()) {
  check_inputs("vsharp", g, field, mask);
  State& s = *state_;
  s.g = g;
  s.field = field;
  s.mask = mask;
  s.params = params;
  s.threads = threads;
  s.radii = vsharp_radii_mm(g.voxel_mm, params);
  s.box = mask_box(g, mask);
  const std::vector<double> d = outside_distance2(g, mask, s.box, threads);
  double deepest = 0.0;
  for (double v : d) deepest = std::max(deepest, v);
  // Radii whose sphere fits around no voxel would filter nothing: the largest used is the largest that fits somewhere
  // (so the default works on a small head at coarse voxels).
  const auto fits = std::find_if(s.radii.begin(), s.radii.end(), [&](double r) { return deepest > r * r; });
  if (fits == s.radii.end()) {
    invalid("vsharp: the smallest radius " + message_number(s.radii.back()) + " mm (min_radius_voxels " +
            message_number(params.min_radius_voxels) + ") erodes the mask to nothing: its deepest voxel lies " +
            message_number(std::sqrt(deepest)) + " mm inside; lower min_radius_voxels or give a larger mask");
  }
  s.radii.erase(s.radii.begin(), fits);
  s.padded = vsharp_padded(s.box.ext, g.voxel_mm, s.radii.front());
  {
    Geometry pg = g;
    pg.dims = s.padded;
    validate_geometry(pg);
  }
  const Dims3 e{s.box.ext[0] + 2, s.box.ext[1] + 2, s.box.ext[2] + 2};
  s.assign.assign(static_cast<size_t>(count(s.padded)), kUnassigned);
  for (int64_t z = 0; z < s.box.ext[2]; ++z)
    for (int64_t y = 0; y < s.box.ext[1]; ++y)
      for (int64_t x = 0; x < s.box.ext[0]; ++x) {
        const double dd = d[static_cast<size_t>((x + 1) + e[0] * ((y + 1) + e[1] * (z + 1)))];
        uint8_t k = kUnassigned;
        for (size_t i = 0; i < s.radii.size(); ++i) {
          if (dd > s.radii[i] * s.radii[i]) {
            k = static_cast<uint8_t>(i);
            break;
          }
        }
        s.assign[static_cast<size_t>(x + s.padded[0] * (y + s.padded[1] * z))] = k;
      }
}

VSharp::~VSharp() = default;

uint32_t VSharp::total_steps() const { return static_cast<uint32_t>(state_->radii.size()) + 1; }
uint32_t VSharp::steps_done() const { return state_->done; }
bool VSharp::finished() const { return state_->done == total_steps(); }
std::string VSharp::name() const { return state_->radii.size() == 1 ? "SHARP" : "V-SHARP"; }
const std::vector<double>& VSharp::radii_mm() const { return state_->radii; }

void VSharp::step() {
  if (finished()) throw Error(ErrorCode::Internal, name() + ": step() after the last step");
  State& s = *state_;
  const Geometry& g = s.g;
  const uint64_t n = count(s.padded);
  const unsigned t = s.threads;
  if (s.done == 0) {
    s.field_hat.assign(static_cast<size_t>(n), Complex(0.0f, 0.0f));
    for_each_box_voxel(g, s.box, s.padded, [&](uint64_t vi, uint64_t pi) {
      if (s.mask[vi]) s.field_hat[pi] = Complex(s.field[vi], 0.0f);
    });
    fft3d_forward(s.field_hat, s.padded, t);
    s.work.resize(static_cast<size_t>(n));
    s.assembled.assign(static_cast<size_t>(n), 0.0f);
  }
  if (s.done < s.radii.size()) {
    // One radius: its SMV kernel S in k-space, the high-passed field (1 − S)·F back in image space, kept where this
    // radius is the voxel's largest whose sphere fits in the mask.
    const uint32_t k = s.done;
    const double r = s.radii[k];
    const double r2 = r * r;
    int64_t reach[3];
    for (int a = 0; a < 3; ++a) reach[a] = static_cast<int64_t>(std::floor(r / g.voxel_mm[a]));
    std::fill(s.work.begin(), s.work.end(), Complex(0.0f, 0.0f));
    uint64_t voxels = 0;
    for (int64_t dz = -reach[2]; dz <= reach[2]; ++dz)
      for (int64_t dy = -reach[1]; dy <= reach[1]; ++dy)
        for (int64_t dx = -reach[0]; dx <= reach[0]; ++dx) {
          const double px = static_cast<double>(dx) * g.voxel_mm[0], py = static_cast<double>(dy) * g.voxel_mm[1],
                       pz = static_cast<double>(dz) * g.voxel_mm[2];
          if (px * px + py * py + pz * pz > r2) continue;
          const int64_t ix = (dx + s.padded[0]) % s.padded[0], iy = (dy + s.padded[1]) % s.padded[1],
                        iz = (dz + s.padded[2]) % s.padded[2];
          s.work[static_cast<size_t>(ix + s.padded[0] * (iy + s.padded[1] * iz))] = Complex(1.0f, 0.0f);
          ++voxels;
        }
    fft3d_forward(s.work, s.padded, t);
    const float scale = 1.0f / static_cast<float>(voxels);
    const float thr = static_cast<float>(s.params.threshold);
    if (k == 0) s.inverse.resize(static_cast<size_t>(n));
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        const float hp = 1.0f - s.work[i].real() * scale;  // 1 − S (S is real: the sphere is symmetric)
        if (k == 0) s.inverse[i] = std::fabs(hp) < thr ? 0.0f : 1.0f / hp;
        s.work[i] = s.field_hat[i] * hp;
      }
    });
    fft3d_inverse(s.work, s.padded, t);
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i)
        if (s.assign[i] == k) s.assembled[i] = s.work[i].real();
    });
    if (k + 1 == s.radii.size()) std::vector<Complex>().swap(s.field_hat);
  } else {
    // Deconvolution by the largest kernel (TSVD), kept on the mask eroded by the smallest radius.
    load_real(s.work, s.assembled, t);
    std::vector<float>().swap(s.assembled);
    fft3d_forward(s.work, s.padded, t);
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) s.work[i] *= s.inverse[i];
    });
    fft3d_inverse(s.work, s.padded, t);
    s.result.field.assign(static_cast<size_t>(g.voxel_count()), 0.0f);
    s.result.mask.assign(static_cast<size_t>(g.voxel_count()), 0);
    for_each_box_voxel(g, s.box, s.padded, [&](uint64_t vi, uint64_t pi) {
      if (s.assign[pi] != kUnassigned) {
        s.result.field[vi] = s.work[pi].real();
        s.result.mask[vi] = 1;
      }
    });
    std::vector<Complex>().swap(s.work);
    std::vector<float>().swap(s.inverse);
    std::vector<uint8_t>().swap(s.assign);
  }
  ++s.done;
}

LocalField VSharp::take_result() {
  if (!finished() || state_->taken) {
    throw Error(ErrorCode::Internal, name() + ": take_result() before the last step or twice");
  }
  state_->taken = true;
  return std::move(state_->result);
}

LocalField vsharp(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                  const VSharpParams& params, unsigned threads, const std::function<void(uint64_t, uint64_t)>& progress,
                  const std::atomic<bool>* cancel) {
  VSharp v(g, field, mask, params, threads);
  run_to_end(v, progress, cancel);
  return v.take_result();
}

uint64_t vsharp_workspace_bytes(const Geometry& g, const VSharpParams& params, unsigned threads) {
  validate_geometry(g);
  const std::vector<double> radii = vsharp_radii_mm(g.voxel_mm, params);
  const Dims3 padded = vsharp_padded(g.dims, g.voxel_mm, radii.front());
  const uint64_t n = count(padded), v = g.voxel_count();
  const uint64_t grown = count({g.dims[0] + 2, g.dims[1] + 2, g.dims[2] + 2});
  // distances (construction), assignment, two complex volumes, inverse kernel, assembled field, result, FFT scratch
  const uint64_t distances = grown * sizeof(double);
  const uint64_t steps = n * (1 + 2 * sizeof(Complex) + 2 * sizeof(float)) + v * (sizeof(float) + 1) +
                         fft3d_workspace_bytes(padded, threads);
  // EDT line scratch per thread: v, z, out, line of the longest axis
  const int64_t longest = std::max({g.dims[0], g.dims[1], g.dims[2]}) + 3;
  const uint64_t scratch = static_cast<uint64_t>(std::max(1u, threads == 0 ? 64u : threads)) *
                           static_cast<uint64_t>(longest) * 4 * sizeof(double);
  return distances + scratch + steps;
}

// ---------------------------------------------------------------------------------------------------------------
// PDF
// ---------------------------------------------------------------------------------------------------------------

void validate(const PdfParams& p) {
  if (p.max_iterations < 1 || p.max_iterations > 10000) {
    invalid("pdf: max_iterations must be in [1, 10000] (30 is customary, MEDI toolbox), got " +
            std::to_string(p.max_iterations));
  }
  if (!(p.tolerance > 0.0 && p.tolerance < 1.0)) {
    invalid("pdf: tolerance must be in (0, 1) (a relative residual; 1e-5 is customary), got " +
            message_number(p.tolerance));
  }
  if (p.pad_voxels > 1024) {
    invalid("pdf: pad_voxels must be in [0, 1024] voxels (40 is customary, MEDI toolbox), got " +
            std::to_string(p.pad_voxels));
  }
}

namespace {

Dims3 pdf_padded(const Dims3& ext, uint32_t pad) {
  Dims3 p;
  for (int a = 0; a < 3; ++a) p[a] = fast_size(ext[a] + static_cast<int64_t>(pad));
  return p;
}

}  // namespace

struct Pdf::State {
  Geometry g;
  Geometry pg;  // the padded box
  std::span<const float> field;
  std::span<const uint8_t> mask;
  std::span<const float> weights;
  PdfParams params;
  unsigned threads = 1;
  Box box;
  std::vector<float> kernel;    // dipole kernel of the padded box
  std::vector<float> w2;        // W² inside the mask, 0 elsewhere
  std::vector<uint8_t> source;  // 1 outside the mask (the padding included): where background sources may sit
  std::vector<float> x, r, p, q;
  std::vector<Complex> c;
  double rr = 0.0, b_norm = 0.0, relative = 1.0;
  uint32_t done = 0;
  bool finished = false, taken = false;
  LocalField result;

  // out = real(ifft(D · fft(in))) with in given elementwise by load(i).
  template <typename Load, typename Store>
  void convolve(Load&& load, Store&& store) {
    const uint64_t n = c.size();
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) c[i] = Complex(load(i), 0.0f);
    });
    fft3d_forward(c, pg.dims, threads);
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) c[i] *= kernel[i];
    });
    fft3d_inverse(c, pg.dims, threads);
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) store(i, c[i].real());
    });
  }

  // q = M̄ D W² D M̄ p
  void apply_normal() {
    convolve([&](uint64_t i) { return source[i] ? p[i] : 0.0f; }, [&](uint64_t i, float v) { q[i] = w2[i] * v; });
    convolve([&](uint64_t i) { return q[i]; }, [&](uint64_t i, float v) { q[i] = source[i] ? v : 0.0f; });
  }

  double dot(const std::vector<float>& a, const std::vector<float>& b) const {
    return parallel_sum(a.size(), threads, [&](uint64_t i) { return static_cast<double>(a[i]) * static_cast<double>(b[i]); });
  }

  void finish() {
    // background = D M̄ x; local = f − background inside the mask.
    convolve([&](uint64_t i) { return source[i] ? x[i] : 0.0f; }, [&](uint64_t i, float v) { q[i] = v; });
    result.field.assign(static_cast<size_t>(g.voxel_count()), 0.0f);
    result.mask.assign(static_cast<size_t>(g.voxel_count()), 0);
    for_each_box_voxel(g, box, pg.dims, [&](uint64_t vi, uint64_t pi) {
      if (mask[vi]) {
        result.field[vi] = field[vi] - q[pi];
        result.mask[vi] = 1;
      }
    });
    for (auto* v : {&x, &r, &p, &q, &w2, &kernel}) std::vector<float>().swap(*v);
    std::vector<Complex>().swap(c);
    std::vector<uint8_t>().swap(source);
    finished = true;
  }
};

Pdf::Pdf(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, std::span<const float> weights,
         const PdfParams& params, unsigned threads)
    : state_(std::make_unique<State>()) {
  check_inputs("pdf", g, field, mask);
  validate(params);
  if (!weights.empty()) {
    if (weights.size() != g.voxel_count()) {
      invalid("pdf: weights hold " + std::to_string(weights.size()) + " values but the volume " + dims_text(g.dims) +
              " has " + std::to_string(g.voxel_count()) + " voxels (or give none: 1 inside the mask)");
    }
    bool any = false;
    for (uint64_t i = 0; i < weights.size(); ++i) {
      if (!mask[i]) continue;
      if (!(weights[i] >= 0.0f && std::isfinite(weights[i]))) {
        invalid("pdf: weights must be finite and >= 0 inside the mask, got " + message_number(weights[i]) +
                " at index " + std::to_string(i));
      }
      any = any || weights[i] > 0.0f;
    }
    if (!any) invalid("pdf: every weight inside the mask is 0: no voxel constrains the fit; give positive weights");
  }
  State& s = *state_;
  s.g = g;
  s.field = field;
  s.mask = mask;
  s.weights = weights;
  s.params = params;
  s.threads = threads;
  s.box = mask_box(g, mask);
  s.pg = g;
  s.pg.dims = pdf_padded(s.box.ext, params.pad_voxels);
  validate_geometry(s.pg);
}

Pdf::~Pdf() = default;

uint32_t Pdf::total_steps() const { return state_->params.max_iterations; }
uint32_t Pdf::steps_done() const { return state_->done; }
bool Pdf::finished() const { return state_->finished; }
std::string Pdf::name() const { return "PDF"; }
double Pdf::relative_residual() const { return state_->relative; }

void Pdf::step() {
  if (finished()) throw Error(ErrorCode::Internal, "PDF: step() after the last step");
  State& s = *state_;
  const uint64_t n = s.pg.voxel_count();
  const unsigned t = s.threads;
  if (s.done == 0) {
    s.kernel = dipole_kernel(s.pg);
    s.w2.assign(static_cast<size_t>(n), 0.0f);
    s.source.assign(static_cast<size_t>(n), 1);
    for_each_box_voxel(s.g, s.box, s.pg.dims, [&](uint64_t vi, uint64_t pi) {
      if (!s.mask[vi]) return;
      const float w = s.weights.empty() ? 1.0f : s.weights[vi];
      s.w2[pi] = w * w;
      s.source[pi] = 0;
    });
    s.x.assign(static_cast<size_t>(n), 0.0f);
    s.r.assign(static_cast<size_t>(n), 0.0f);
    s.q.assign(static_cast<size_t>(n), 0.0f);
    s.c.resize(static_cast<size_t>(n));
    // b = M̄ D W² f, the residual of x = 0.
    for_each_box_voxel(s.g, s.box, s.pg.dims, [&](uint64_t vi, uint64_t pi) {
      if (s.mask[vi]) s.q[pi] = s.w2[pi] * s.field[vi];
    });
    s.convolve([&](uint64_t i) { return s.q[i]; }, [&](uint64_t i, float v) { s.r[i] = s.source[i] ? v : 0.0f; });
    s.p = s.r;
    s.rr = s.dot(s.r, s.r);
    s.b_norm = std::sqrt(s.rr);
    if (s.b_norm == 0.0) {  // no field a source outside could explain: the background is 0
      s.relative = 0.0;
      s.done = 1;
      s.finish();
      return;
    }
  }
  // One conjugate-gradient iteration on M̄ D W² D M̄ x = b.
  s.apply_normal();
  const double pq = s.dot(s.p, s.q);
  bool stop = !(pq > 0.0);
  if (!stop) {
    const float alpha = static_cast<float>(s.rr / pq);
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        s.x[i] += alpha * s.p[i];
        s.r[i] -= alpha * s.q[i];
      }
    });
    const double rr_new = s.dot(s.r, s.r);
    s.relative = std::sqrt(rr_new) / s.b_norm;
    const float beta = static_cast<float>(rr_new / s.rr);
    s.rr = rr_new;
    stop = s.relative < s.params.tolerance;
    if (!stop) {
      parallel_for(n, t, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) s.p[i] = s.r[i] + beta * s.p[i];
      });
    }
  }
  ++s.done;
  if (stop || s.done >= s.params.max_iterations) s.finish();
}

LocalField Pdf::take_result() {
  if (!finished() || state_->taken) throw Error(ErrorCode::Internal, "PDF: take_result() before the last step or twice");
  state_->taken = true;
  return std::move(state_->result);
}

LocalField pdf(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
               std::span<const float> weights, const PdfParams& params, unsigned threads,
               const std::function<void(uint64_t, uint64_t)>& progress, const std::atomic<bool>* cancel) {
  Pdf solver(g, field, mask, weights, params, threads);
  run_to_end(solver, progress, cancel);
  return solver.take_result();
}

uint64_t pdf_workspace_bytes(const Geometry& g, const PdfParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const Dims3 padded = pdf_padded(g.dims, params.pad_voxels);
  const uint64_t n = count(padded), v = g.voxel_count();
  // kernel, W², x, r, p, q (floats), the source mask, one complex volume, the result, FFT scratch
  return n * (6 * sizeof(float) + 1 + sizeof(Complex)) + v * (sizeof(float) + 1) +
         fft3d_workspace_bytes(padded, threads);
}

}  // namespace tessera
