#include "tessera/phantom.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tessera/dipole.h"
#include "tessera/error.h"

namespace tessera {

namespace {

// splitmix64: tiny, fast, identical on every platform.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  uint64_t below(uint64_t n) { return next() % n; }
};

// Natural log from basic IEEE operations only (frexp is exact; the series uses + - * /), so that
// native and wasm agree bit for bit, unlike libm's log. x > 0.
double det_log(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752) {
    m *= 2.0;
    e -= 1;
  }
  const double s = (m - 1.0) / (m + 1.0);  // |s| <= 0.1716
  const double s2 = s * s;
  double term = s;
  double sum = 0.0;
  for (int k = 1; k <= 31; k += 2) {  // s^33 < 1e-25
    sum += term / static_cast<double>(k);
    term *= s2;
  }
  return static_cast<double>(e) * 0.69314718055994530942 + 2.0 * sum;
}

// Standard normal pairs by Marsaglia's polar method (sqrt is correctly rounded everywhere).
struct Gaussian {
  SplitMix64 rng;
  bool has_spare = false;
  double spare = 0.0;
  double next() {
    if (has_spare) {
      has_spare = false;
      return spare;
    }
    double u, v, s;
    do {
      u = 2.0 * rng.uniform() - 1.0;
      v = 2.0 * rng.uniform() - 1.0;
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * det_log(s) / s);
    spare = v * f;
    has_spare = true;
    return u * f;
  }
};

struct Ellipsoid {
  Vec3 c;
  Vec3 r;
  float chi;
  bool contains(const Vec3& p) const {
    double q = 0.0;
    for (int a = 0; a < 3; ++a) {
      const double d = (p[a] - c[a]) / r[a];
      q += d * d;
    }
    return q <= 1.0;
  }
};

struct Tube {
  Vec3 a;
  Vec3 b;
  double radius;
  float chi;
  bool contains(const Vec3& p) const {
    Vec3 ab{b[0] - a[0], b[1] - a[1], b[2] - a[2]};
    Vec3 ap{p[0] - a[0], p[1] - a[1], p[2] - a[2]};
    const double len2 = ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2];
    double t = len2 > 0.0 ? (ap[0] * ab[0] + ap[1] * ab[1] + ap[2] * ab[2]) / len2 : 0.0;
    t = std::clamp(t, 0.0, 1.0);
    double d2 = 0.0;
    for (int k = 0; k < 3; ++k) {
      const double d = ap[k] - t * ab[k];
      d2 += d * d;
    }
    return d2 <= radius * radius;
  }
};

// Unscaled anatomy (mm, origin at the brain centre, x left-right, y posterior-anterior, z inferior-superior).
constexpr Vec3 kBrainSemi{66.0, 84.0, 58.0};
constexpr double kScalpSkull = 9.0;   // head = brain + this, mm
constexpr double kRibbon = 3.5;       // cortical ribbon thickness, mm
constexpr double kFill = 0.48;        // the head fills at most this fraction of the field of view (per half axis)

struct Anatomy {
  Ellipsoid brain;
  Ellipsoid inner;                    // brain minus the cortical ribbon
  std::vector<Ellipsoid> ellipsoids;  // painted in order, later ones win
  std::vector<Tube> veins;
  Ellipsoid calcification;
};

Anatomy build_anatomy(const Geometry& g, uint64_t seed) {
  SplitMix64 rng{seed ^ 0x5EED0F7E55E7A000ull};
  double s = 1.0;  // uniform shrink so that the head fits the field of view
  for (int a = 0; a < 3; ++a) {
    const double fov = static_cast<double>(g.dims[a]) * g.voxel_mm[a];
    s = std::min(s, kFill * fov / ((kBrainSemi[a] + kScalpSkull) * 1.03));
  }
  const double min_vox = std::min({g.voxel_mm[0], g.voxel_mm[1], g.voxel_mm[2]});
  const double max_vox = std::max({g.voxel_mm[0], g.voxel_mm[1], g.voxel_mm[2]});

  Anatomy an;
  Vec3 brain_r;
  for (int a = 0; a < 3; ++a) brain_r[a] = kBrainSemi[a] * s * rng.uniform(0.98, 1.02);
  an.brain = Ellipsoid{{0.0, 0.0, 0.0}, brain_r, phantom_chi::white_matter};
  Vec3 inner_r;
  const double ribbon = std::max(kRibbon * s, 0.75 * min_vox);
  for (int a = 0; a < 3; ++a) inner_r[a] = std::max(brain_r[a] - ribbon, 0.5 * brain_r[a]);
  an.inner = Ellipsoid{{0.0, 0.0, 0.0}, inner_r, phantom_chi::grey_matter};

  auto jittered = [&](Vec3 c, Vec3 r, float chi) {
    Ellipsoid e;
    for (int a = 0; a < 3; ++a) {
      e.c[a] = (c[a] + rng.uniform(-1.5, 1.5)) * s;
      e.r[a] = std::max(r[a] * s * rng.uniform(0.9, 1.1), 0.6 * min_vox);
    }
    e.chi = chi;
    return e;
  };
  auto pair = [&](Vec3 c, Vec3 r, float chi) {
    an.ellipsoids.push_back(jittered({-c[0], c[1], c[2]}, r, chi));
    an.ellipsoids.push_back(jittered({c[0], c[1], c[2]}, r, chi));
  };
  pair({13.0, 14.0, 12.0}, {5.0, 11.0, 9.0}, phantom_chi::caudate);
  pair({25.0, 3.0, 2.0}, {5.0, 15.0, 10.0}, phantom_chi::putamen);
  pair({18.0, 0.0, 0.0}, {3.5, 9.0, 6.0}, phantom_chi::globus_pallidus);
  pair({7.0, 4.0, 14.0}, {5.0, 26.0, 8.0}, phantom_chi::csf);
  pair({10.0, -14.0, -14.0}, {3.0, 7.0, 2.5}, phantom_chi::substantia_nigra);
  pair({4.5, -18.0, -10.0}, {3.5, 3.5, 3.5}, phantom_chi::red_nucleus);

  const double vein_r = std::max(1.2 * s, 0.6 * max_vox);
  auto vein_chi = [&]() { return phantom_chi::vein_values[rng.below(4)]; };
  auto scaled = [&](Vec3 p) { return Vec3{p[0] * s, p[1] * s, p[2] * s}; };
  // A midline vein under the vertex (superior sagittal sinus-like) and the paired internal cerebral veins.
  an.veins.push_back(Tube{scaled({0.0, -55.0 + rng.uniform(-3, 3), 38.0}),
                          scaled({0.0, 55.0 + rng.uniform(-3, 3), 40.0}), vein_r, vein_chi()});
  for (double side : {-1.5, 1.5}) {
    an.veins.push_back(Tube{scaled({side, 2.0 + rng.uniform(-2, 2), 7.0}),
                            scaled({side, -30.0 + rng.uniform(-2, 2), 10.0}), vein_r, vein_chi()});
  }
  // Two to four cortical veins: segments just under the surface, random position and direction.
  const int cortical = 2 + static_cast<int>(rng.below(3));
  for (int v = 0; v < cortical; ++v) {
    Vec3 dir;
    double n2;
    do {
      for (int a = 0; a < 3; ++a) dir[a] = rng.uniform(-1.0, 1.0);
      n2 = dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2];
    } while (n2 > 1.0 || n2 < 0.01);
    dir[2] = std::fabs(dir[2]);  // upper half of the brain
    const double n = std::sqrt(n2);
    Vec3 a{}, t{};
    for (int k = 0; k < 3; ++k) a[k] = 0.82 * brain_r[k] * dir[k] / n;
    do {
      for (int k = 0; k < 3; ++k) t[k] = rng.uniform(-1.0, 1.0);
      n2 = t[0] * t[0] + t[1] * t[1] + t[2] * t[2];
    } while (n2 > 1.0 || n2 < 0.01);
    const double len = 25.0 * s / std::sqrt(n2);
    Vec3 b{a[0] + t[0] * len, a[1] + t[1] * len, a[2] + t[2] * len};
    an.veins.push_back(Tube{a, b, vein_r, vein_chi()});
  }
  // A small calcification in the frontal white matter of a random side.
  const double side = rng.below(2) ? 1.0 : -1.0;
  an.calcification = Ellipsoid{scaled({side * rng.uniform(15.0, 28.0), rng.uniform(20.0, 38.0), rng.uniform(12.0, 25.0)}),
                               Vec3{}, phantom_chi::calcification};
  const double calc_r = std::max(2.0 * s, 0.75 * max_vox);
  an.calcification.r = {calc_r, calc_r, calc_r};
  return an;
}

void check_options(const PhantomOptions& o) {
  if (!(std::isfinite(o.noise_sigma) && o.noise_sigma >= 0.0)) {
    throw Error(ErrorCode::InvalidArgument,
                "make_phantom: noise_sigma must be finite and >= 0, got " + std::to_string(o.noise_sigma));
  }
  if (o.pad_factor < 1 || o.pad_factor > 4) {
    throw Error(ErrorCode::InvalidArgument,
                "make_phantom: pad_factor must be 1 to 4, got " + std::to_string(o.pad_factor));
  }
}

}  // namespace

std::vector<float> phantom_values() {
  std::vector<float> v{phantom_chi::white_matter, phantom_chi::grey_matter,    phantom_chi::csf,
                       phantom_chi::caudate,      phantom_chi::putamen,        phantom_chi::globus_pallidus,
                       phantom_chi::red_nucleus,  phantom_chi::substantia_nigra, phantom_chi::calcification};
  for (float x : phantom_chi::vein_values) v.push_back(x);
  return v;
}

Phantom make_phantom_chi(const Geometry& g, uint64_t seed) {
  validate_geometry(g);
  const Anatomy an = build_anatomy(g, seed);
  Phantom ph;
  const size_t n = static_cast<size_t>(g.voxel_count());
  ph.chi.assign(n, 0.0f);
  ph.mask.assign(n, 0);
  size_t idx = 0;
  for (int64_t z = 0; z < g.dims[2]; ++z) {
    const double pz = (static_cast<double>(z) - 0.5 * static_cast<double>(g.dims[2] - 1)) * g.voxel_mm[2];
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      const double py = (static_cast<double>(y) - 0.5 * static_cast<double>(g.dims[1] - 1)) * g.voxel_mm[1];
      for (int64_t x = 0; x < g.dims[0]; ++x, ++idx) {
        const double px = (static_cast<double>(x) - 0.5 * static_cast<double>(g.dims[0] - 1)) * g.voxel_mm[0];
        const Vec3 p{px, py, pz};
        if (!an.brain.contains(p)) continue;
        ph.mask[idx] = 1;
        float chi = an.inner.contains(p) ? phantom_chi::white_matter : phantom_chi::grey_matter;
        for (const auto& e : an.ellipsoids) {
          if (e.contains(p)) chi = e.chi;
        }
        for (const auto& v : an.veins) {
          if (v.contains(p)) chi = v.chi;
        }
        if (an.calcification.contains(p)) chi = an.calcification.chi;
        ph.chi[idx] = chi;
      }
    }
  }
  return ph;
}

Phantom make_phantom(const Geometry& g, const PhantomOptions& options) {
  validate_geometry(g);
  check_options(options);
  Phantom ph = make_phantom_chi(g, options.seed);
  ph.field = forward_field(g, ph.chi, options.pad_factor, options.threads);
  Gaussian noise{SplitMix64{options.seed ^ 0x0A15E5EEDull}};
  for (size_t i = 0; i < ph.field.size(); ++i) {
    if (!ph.mask[i]) {
      ph.field[i] = 0.0f;
    } else if (options.noise_sigma > 0.0) {
      ph.field[i] = static_cast<float>(static_cast<double>(ph.field[i]) + options.noise_sigma * noise.next());
    }
  }
  return ph;
}

}  // namespace tessera
