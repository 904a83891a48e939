#include "tessera/sim/phantom.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "common/message_number.h"
#include "common/parallel.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"

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
  double rx_left = 0.0;  // the x semi-axis on the x < c side (left); 0: r[0] on both sides
  bool contains(const Vec3& p) const {
    double q = 0.0;
    for (int a = 0; a < 3; ++a) {
      const double ra = (a == 0 && rx_left > 0.0 && p[0] < c[0]) ? rx_left : r[a];
      const double d = (p[a] - c[a]) / ra;
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
constexpr double kCsfLayer = 1.5;     // brain surface to inner skull (CSF and meninges), mm
constexpr double kMinScalp = 1.5;     // a skull thicker than the default keeps at least this much scalp, mm

// Brain surface to skin (mm, unscaled): kScalpSkull, or more when the skull is thick.
double head_thickness_mm(const HeadVariation& v) {
  return std::max(kScalpSkull, kCsfLayer + v.skull_mm + kMinScalp);
}

struct Anatomy {
  Ellipsoid brain;
  Ellipsoid inner;                    // brain minus the cortical ribbon
  std::vector<Ellipsoid> ellipsoids;  // painted in order, later ones win
  std::vector<Tube> veins;
  Ellipsoid calcification;
  double scale = 1.0;  // the uniform shrink s applied to every length in mm
};

// Calls f(index, p) for every voxel in memory order (x fastest), p its centre in mm from the volume's centre.
template <class F>
void for_each_voxel_mm(const Geometry& g, F&& f) {
  size_t idx = 0;
  for (int64_t z = 0; z < g.dims[2]; ++z) {
    const double pz = (static_cast<double>(z) - 0.5 * static_cast<double>(g.dims[2] - 1)) * g.voxel_mm[2];
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      const double py = (static_cast<double>(y) - 0.5 * static_cast<double>(g.dims[1] - 1)) * g.voxel_mm[1];
      for (int64_t x = 0; x < g.dims[0]; ++x, ++idx) {
        const double px = (static_cast<double>(x) - 0.5 * static_cast<double>(g.dims[0] - 1)) * g.voxel_mm[0];
        f(idx, Vec3{px, py, pz});
      }
    }
  }
}

Anatomy build_anatomy(const Geometry& g, uint64_t seed, const HeadVariation& v) {
  SplitMix64 rng{seed ^ 0x5EED0F7E55E7A000ull};
  double s = v.size;  // the head's size, shrunk uniformly so that the head fits the field of view
  const double widest = 1.0 + std::fabs(v.asymmetry);
  for (int a = 0; a < 3; ++a) {
    const double fov = static_cast<double>(g.dims[a]) * g.voxel_mm[a];
    const double semi = kBrainSemi[a] * v.shape[a] * (a == 0 ? widest : 1.0);
    s = std::min(s, kFill * fov / ((semi + head_thickness_mm(v)) * 1.03));
  }
  // Per-axis length scale of positions (the brain's shape stretches where its structures sit).
  const Vec3 sa{s * v.shape[0], s * v.shape[1], s * v.shape[2]};
  const double min_vox = std::min({g.voxel_mm[0], g.voxel_mm[1], g.voxel_mm[2]});
  const double max_vox = std::max({g.voxel_mm[0], g.voxel_mm[1], g.voxel_mm[2]});

  Anatomy an;
  Vec3 brain_r;
  for (int a = 0; a < 3; ++a) brain_r[a] = kBrainSemi[a] * sa[a] * rng.uniform(0.98, 1.02);
  // Asymmetry: the right half (x > 0) wider by the factor 1 + asymmetry, the left one narrower by 1 - asymmetry.
  const double base_x = brain_r[0];
  brain_r[0] = base_x * (1.0 + v.asymmetry);
  const double left_x = base_x * (1.0 - v.asymmetry);
  an.brain = Ellipsoid{{0.0, 0.0, 0.0}, brain_r, phantom_chi::white_matter, left_x};
  Vec3 inner_r;
  const double ribbon = std::max(kRibbon * s, 0.75 * min_vox);
  for (int a = 0; a < 3; ++a) inner_r[a] = std::max(brain_r[a] - ribbon, 0.5 * brain_r[a]);
  an.inner = Ellipsoid{{0.0, 0.0, 0.0}, inner_r, phantom_chi::grey_matter, std::max(left_x - ribbon, 0.5 * left_x)};

  auto jittered = [&](Vec3 c, Vec3 r, float chi) {
    Ellipsoid e;
    for (int a = 0; a < 3; ++a) {
      e.c[a] = (c[a] + rng.uniform(-1.5, 1.5)) * sa[a];
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
  auto scaled = [&](Vec3 p) { return Vec3{p[0] * sa[0], p[1] * sa[1], p[2] * sa[2]}; };
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
    for (int k = 0; k < 3; ++k) a[k] = 0.82 * (k == 0 && dir[0] < 0.0 ? left_x : brain_r[k]) * dir[k] / n;
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
  an.scale = s;
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
  validate(o.head);
}


// ---- the head around the brain, and the scanner ----

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoPi = 6.28318530717958647692;

// e^x from basic IEEE operations (reduction by ln 2 split in two exact parts, Taylor series, exact ldexp), so that
// native and wasm agree bit for bit, unlike libm's exp. x <= 0.
double det_exp(double x) {
  if (x < -745.0) return 0.0;
  const double k = std::nearbyint(x * 1.44269504088896340736);
  const double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;  // |r| <= 0.35
  double term = 1.0;
  double sum = 1.0;
  for (int i = 1; i <= 18; ++i) {  // 0.35^19 / 19! < 1e-25
    term *= r / static_cast<double>(i);
    sum += term;
  }
  return std::ldexp(sum, static_cast<int>(k));
}

// atan(t) for t in [0, 1] from basic operations: two half-angle steps atan(t) = 2 atan(t / (1 + sqrt(1 + t^2)))
// bring t under tan(pi/16) = 0.199, then the alternating series.
double det_atan_unit(double t) {
  for (int i = 0; i < 2; ++i) t = t / (1.0 + std::sqrt(1.0 + t * t));
  const double t2 = t * t;
  double term = t;
  double sum = 0.0;
  for (int k = 1; k <= 29; k += 2) {  // 0.199^31 / 31 < 1e-23
    sum += term / static_cast<double>(k);
    term *= -t2;
  }
  return 4.0 * sum;
}

// atan2(y, x) in [-pi, pi] from basic operations; (0, 0) gives 0.
double det_atan2(double y, double x) {
  const double ax = std::fabs(x), ay = std::fabs(y);
  if (ax == 0.0 && ay == 0.0) return 0.0;
  double a = ay <= ax ? det_atan_unit(ay / ax) : 0.5 * kPi - det_atan_unit(ax / ay);
  if (x < 0.0) a = kPi - a;
  return y < 0.0 ? -a : a;
}

// phi - 2 pi k, the k that brings it nearest to 0, as a float in [-pi, pi].
float wrap_phase(double phi) {
  const double w = phi - kTwoPi * std::nearbyint(phi / kTwoPi);
  constexpr float pi_f = static_cast<float>(kPi);
  return std::clamp(static_cast<float>(w), -pi_f, pi_f);
}

// The head around the brain, as ellipsoidal layers at an offset d (mm) from the brain's semi-axes, and the air
// cavities of the skull. Unscaled thicknesses in mm (multiplied by the anatomy's scale): kCsfLayer, then the skull
// (HeadVariation::skull_mm), then the scalp up to head_thickness_mm.

struct Head {
  Vec3 brain_r;
  double brain_rx_left = 0.0;  // the brain's x semi-axis on the left (x < 0)
  double csf_d = 0.0;    // inner skull surface at offset csf_d
  double skull_d = 0.0;  // outer skull surface
  double head_d = 0.0;   // skin
  std::vector<Ellipsoid> cavities;  // air where they meet the bone layer (sinuses, mastoid air cells)
  std::vector<Tube> canals;         // air where they leave the CSF layer (ear canals, open to the outside)
  double phi0[10] = {};             // receive phase: c0 + c1 u + c2 v + c3 w + c4 u^2 + c5 v^2 + c6 w^2 + c7 uv + c8 vw + c9 uw
  Vec3 phase_norm;                  // u, v, w = position / this (the head's semi-axes)

  // Inside the ellipsoid of semi-axes brain_r + d.
  bool within(const Vec3& p, double d) const {
    double q = 0.0;
    for (int a = 0; a < 3; ++a) {
      const double t = p[a] / ((a == 0 && p[0] < 0.0 ? brain_rx_left : brain_r[a]) + d);
      q += t * t;
    }
    return q <= 1.0;
  }
  // The point of the offset-d ellipsoid in direction u from the centre.
  Vec3 surface(const Vec3& u, double d) const {
    double q = 0.0;
    for (int a = 0; a < 3; ++a) {
      const double t = u[a] / ((a == 0 && u[0] < 0.0 ? brain_rx_left : brain_r[a]) + d);
      q += t * t;
    }
    const double f = 1.0 / std::sqrt(q);
    return {u[0] * f, u[1] * f, u[2] * f};
  }
  // The tissue of a point outside the brain.
  Tissue classify(const Vec3& p) const {
    if (!within(p, head_d)) return Tissue::Air;
    if (within(p, csf_d)) return Tissue::Csf;
    for (const auto& c : canals) {
      if (c.contains(p)) return Tissue::Air;
    }
    if (!within(p, skull_d)) return Tissue::SoftTissue;
    for (const auto& c : cavities) {
      if (c.contains(p)) return Tissue::Air;
    }
    return Tissue::Bone;
  }
  float offset(const Vec3& p) const {
    const double u = p[0] / phase_norm[0], v = p[1] / phase_norm[1], w = p[2] / phase_norm[2];
    const double* c = phi0;
    return static_cast<float>(c[0] + c[1] * u + c[2] * v + c[3] * w + c[4] * u * u + c[5] * v * v + c[6] * w * w +
                              c[7] * u * v + c[8] * v * w + c[9] * u * w);
  }
};

Head build_head(const Geometry& g, const Anatomy& an, uint64_t seed, bool receive_phase, const HeadVariation& v) {
  SplitMix64 rng{seed ^ 0x4EAD5CA1F0A11A1Bull};
  const double s = an.scale;
  const double max_vox = std::max({g.voxel_mm[0], g.voxel_mm[1], g.voxel_mm[2]});
  Head h;
  h.brain_r = an.brain.r;
  h.brain_rx_left = an.brain.rx_left;
  h.head_d = head_thickness_mm(v) * s;
  h.csf_d = kCsfLayer * s;
  h.skull_d = std::min(h.csf_d + std::max(v.skull_mm * s, 0.75 * max_vox), h.head_d);
  const double bone_mid = 0.5 * (h.csf_d + h.skull_d);
  // size multiplies the semi-axes; shift (mm, x mirrored by mirror_x) moves the centre.
  auto cavity = [&](Vec3 u, Vec3 r, double size, const Vec3& shift, double mirror_x) {
    Ellipsoid e;
    e.c = h.surface(u, bone_mid);
    for (int a = 0; a < 3; ++a) {
      e.c[a] += (rng.uniform(-1.5, 1.5) + (a == 0 ? mirror_x * shift[a] : shift[a])) * s;
      e.r[a] = std::max(r[a] * s * rng.uniform(0.9, 1.1) * size, 0.6 * max_vox);
    }
    e.chi = head_chi::air;
    return e;
  };
  // A cavity of size 0 is absent (its draws are still made, so the other cavities do not move).
  auto add = [&](const Ellipsoid& e, double size) {
    if (size > 0.0) h.cavities.push_back(e);
  };
  // Frontal sinus (anterior, above the orbits), sphenoid sinus (under the brain's centre), mastoid air cells
  // (behind and below the ears): adult cavities of 2-3 cm, clipped to the skull layer (so thinner than real ones).
  add(cavity({0.0, 1.0, -0.3}, {14.0, 8.0, 10.0}, v.frontal_sinus, v.frontal_sinus_shift_mm, 1.0), v.frontal_sinus);
  add(cavity({0.0, 0.3, -1.0}, {11.0, 10.0, 9.0}, v.sphenoid_sinus, v.sphenoid_sinus_shift_mm, 1.0), v.sphenoid_sinus);
  for (double side : {-1.0, 1.0}) {
    add(cavity({side, -0.45, -0.45}, {8.0, 11.0, 10.0}, v.mastoid, v.mastoid_shift_mm, side), v.mastoid);
  }
  // External ear canals: ~7 mm wide tubes from outside the head in to the inner skull, level with the temporal lobes.
  const double canal_r = std::max(v.ear_canal_radius_mm * s, 0.6 * max_vox);
  for (double side : {-1.0, 1.0}) {
    const Vec3 u{side, -0.05 + rng.uniform(-0.03, 0.03), -0.3 + rng.uniform(-0.03, 0.03)};
    Vec3 outer = h.surface(u, h.head_d + 10.0 * s), inner = h.surface(u, h.csf_d);
    for (int a = 1; a < 3; ++a) {
      outer[a] += v.ear_canal_shift_mm[a] * s;
      inner[a] += v.ear_canal_shift_mm[a] * s;
    }
    if (v.ear_canal_radius_mm > 0.0) h.canals.push_back(Tube{outer, inner, canal_r, head_chi::air});
  }
  for (int a = 0; a < 3; ++a) h.phase_norm[a] = h.brain_r[a] + h.head_d;
  // Receive phase: a smooth quadratic of at most a few radians over the head (coil phase varies slowly in space).
  const double range[10] = {1.0, 0.8, 0.8, 0.8, 0.4, 0.4, 0.4, 0.3, 0.3, 0.3};
  for (int k = 0; k < 10; ++k) {
    const double c = rng.uniform(-range[k], range[k]);
    h.phi0[k] = receive_phase ? c : 0.0;
  }
  return h;
}

// Proton density: Tofts (ed.) 2003 Quantitative MRI of the Brain ch. 4 and Neeb et al. 2006 NeuroImage 31:1156
// (water content: WM 0.69, cortical GM 0.80, deep GM 0.76-0.82, CSF 1). T2* at 3 T: Peters et al. 2007 Magn Reson
// Imaging 25:748 (frontal WM 53 ms, cortical GM 66 ms; caudate and putamen shorter), iron-rich nuclei from R2* at
// 3 T (Yao et al. 2009 NeuroImage 44:1259; GP ~45 1/s, SN ~40 1/s, RN ~35 1/s), venous blood (Blockley et al. 2008
// MRM 60:1313, R2* ~50 1/s at 3 T; water 0.87), cortical bone (Techawiboonwong et al. 2008 Radiology 248:824,
// ~20 % water by volume; UTE T2* ~0.4 ms, Reichert et al. 2005 Magn Reson Imaging 23:611), scalp as muscle-like soft
// tissue (T2* ~30 ms; fat's chemical shift is not modelled), calcification a GRE signal void. Indexed by Tissue.
constexpr TissueSignal kTissueSignal[kTissueCount] = {
    {0.0, 1.0},      // Air
    {0.2, 0.0004},   // Bone
    {0.75, 0.030},   // SoftTissue
    {1.0, 0.200},    // Csf
    {0.69, 0.053},   // WhiteMatter
    {0.80, 0.066},   // GreyMatter
    {0.82, 0.041},   // Caudate
    {0.82, 0.035},   // Putamen
    {0.76, 0.022},   // GlobusPallidus
    {0.76, 0.029},   // RedNucleus
    {0.76, 0.025},   // SubstantiaNigra
    {0.30, 0.005},   // Calcification
    {0.87, 0.020},   // Vein
};

// The tissue of a brain voxel from its make_phantom_chi value (every compartment has its own value).
Tissue brain_tissue(float chi) {
  namespace c = phantom_chi;
  if (chi == c::white_matter) return Tissue::WhiteMatter;
  if (chi == c::grey_matter) return Tissue::GreyMatter;
  if (chi == c::csf) return Tissue::Csf;
  if (chi == c::caudate) return Tissue::Caudate;
  if (chi == c::putamen) return Tissue::Putamen;
  if (chi == c::globus_pallidus) return Tissue::GlobusPallidus;
  if (chi == c::red_nucleus) return Tissue::RedNucleus;
  if (chi == c::substantia_nigra) return Tissue::SubstantiaNigra;
  if (chi == c::calcification) return Tissue::Calcification;
  for (float v : c::vein_values) {
    if (chi == v) return Tissue::Vein;
  }
  throw Error(ErrorCode::Internal, "make_acquisition: brain voxel with unlisted susceptibility " + std::to_string(chi));
}

}  // namespace

std::vector<float> phantom_values() {
  std::vector<float> v{phantom_chi::white_matter, phantom_chi::grey_matter,    phantom_chi::csf,
                       phantom_chi::caudate,      phantom_chi::putamen,        phantom_chi::globus_pallidus,
                       phantom_chi::red_nucleus,  phantom_chi::substantia_nigra, phantom_chi::calcification};
  for (float x : phantom_chi::vein_values) v.push_back(x);
  return v;
}

void validate(const HeadVariation& v) {
  auto in_range = [](const char* name, double x, double lo, double hi, const char* unit) {
    if (!(std::isfinite(x) && x >= lo && x <= hi)) {
      throw Error(ErrorCode::InvalidArgument, std::string("head variation: ") + name + " must be in [" +
                                                  message_number(lo) + ", " + message_number(hi) + "]" + unit +
                                                  ", got " + message_number(x));
    }
  };
  const char* axes[3] = {"[0] (x)", "[1] (y)", "[2] (z)"};
  in_range("size", v.size, 0.7, 1.3, " (a factor)");
  for (int a = 0; a < 3; ++a) {
    in_range((std::string("shape") + axes[a]).c_str(), v.shape[a], 0.7, 1.3, " (a factor)");
  }
  in_range("asymmetry", v.asymmetry, -0.15, 0.15, " (a fraction of the x semi-axis)");
  in_range("skull_mm", v.skull_mm, 1.0, 15.0, " mm");
  in_range("frontal_sinus", v.frontal_sinus, 0.0, 3.0, " (a factor; 0 = none)");
  in_range("sphenoid_sinus", v.sphenoid_sinus, 0.0, 3.0, " (a factor; 0 = none)");
  in_range("mastoid", v.mastoid, 0.0, 3.0, " (a factor; 0 = none)");
  in_range("ear_canal_radius_mm", v.ear_canal_radius_mm, 0.0, 8.0, " mm (0 = none)");
  const std::pair<const char*, const Vec3*> shifts[4] = {{"frontal_sinus_shift_mm", &v.frontal_sinus_shift_mm},
                                                         {"sphenoid_sinus_shift_mm", &v.sphenoid_sinus_shift_mm},
                                                         {"mastoid_shift_mm", &v.mastoid_shift_mm},
                                                         {"ear_canal_shift_mm", &v.ear_canal_shift_mm}};
  for (const auto& [name, shift] : shifts) {
    for (int a = 0; a < 3; ++a) in_range((std::string(name) + axes[a]).c_str(), (*shift)[a], -20.0, 20.0, " mm");
  }
}

HeadVariation head_variation(uint64_t seed) {
  HeadVariation v;
  if (seed == 0) return v;
  SplitMix64 rng{seed ^ 0x4EADF0E1A7105EEDull};
  auto shift = [&](double mm) { return Vec3{rng.uniform(-mm, mm), rng.uniform(-mm, mm), rng.uniform(-mm, mm)}; };
  v.size = rng.uniform(0.92, 1.06);
  for (int a = 0; a < 3; ++a) v.shape[a] = rng.uniform(0.95, 1.05);
  v.asymmetry = rng.uniform(-0.03, 0.03);
  v.skull_mm = rng.uniform(4.0, 8.0);
  v.frontal_sinus = rng.below(10) == 0 ? 0.0 : rng.uniform(0.5, 1.5);
  v.frontal_sinus_shift_mm = shift(4.0);
  v.sphenoid_sinus = rng.uniform(0.5, 1.5);
  v.sphenoid_sinus_shift_mm = shift(4.0);
  v.mastoid = rng.uniform(0.5, 1.5);
  v.mastoid_shift_mm = shift(4.0);
  v.ear_canal_radius_mm = rng.uniform(2.5, 4.5);
  v.ear_canal_shift_mm = shift(4.0);
  return v;
}

Phantom make_phantom_chi(const Geometry& g, uint64_t seed, const HeadVariation& head) {
  validate_geometry(g);
  validate(head);
  const Anatomy an = build_anatomy(g, seed, head);
  Phantom ph;
  const size_t n = static_cast<size_t>(g.voxel_count());
  ph.chi.assign(n, 0.0f);
  ph.mask.assign(n, 0);
  for_each_voxel_mm(g, [&](size_t idx, const Vec3& p) {
    if (!an.brain.contains(p)) return;
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
  });
  return ph;
}

Phantom make_phantom(const Geometry& g, const PhantomOptions& options) {
  validate_geometry(g);
  check_options(options);
  Phantom ph = make_phantom_chi(g, options.seed, options.head);
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

TissueSignal tissue_signal(Tissue tissue) {
  const int t = static_cast<int>(tissue);
  if (t < 0 || t >= kTissueCount) {
    throw Error(ErrorCode::InvalidArgument, "tissue_signal: tissue must be 0 to " + std::to_string(kTissueCount - 1) +
                                                ", got " + std::to_string(t));
  }
  return kTissueSignal[t];
}

void validate(const AcquisitionOptions& o) {
  if (o.te_s.empty() || o.te_s.size() > 64) {
    throw Error(ErrorCode::InvalidArgument, "make_acquisition: te_s must hold 1 to 64 echo times (seconds), got " +
                                                std::to_string(o.te_s.size()));
  }
  for (size_t e = 0; e < o.te_s.size(); ++e) {
    const double te = o.te_s[e];
    if (!(std::isfinite(te) && te > 0.0 && te <= 1.0)) {
      throw Error(ErrorCode::InvalidArgument, "make_acquisition: te_s[" + std::to_string(e) +
                                                  "] must be an echo time in seconds in (0, 1], got " +
                                                  message_number(te) + " (4 ms is 0.004)");
    }
  }
  if (!(std::isfinite(o.b0_tesla) && o.b0_tesla > 0.0 && o.b0_tesla <= 20.0)) {
    throw Error(ErrorCode::InvalidArgument,
                "make_acquisition: b0_tesla must be in (0, 20] tesla, got " + message_number(o.b0_tesla));
  }
  if (!(std::isfinite(o.snr) && o.snr >= 0.0)) {
    throw Error(ErrorCode::InvalidArgument, "make_acquisition: snr must be finite and >= 0 (0 = no noise), got " +
                                                message_number(o.snr));
  }
  if (o.pad_factor < 1 || o.pad_factor > 4) {
    throw Error(ErrorCode::InvalidArgument,
                "make_acquisition: pad_factor must be 1 to 4, got " + std::to_string(o.pad_factor));
  }
  if (!(std::isfinite(o.slab_centre_mm) && o.slab_centre_mm >= -100.0 && o.slab_centre_mm <= 100.0)) {
    throw Error(ErrorCode::InvalidArgument, "make_acquisition: slab_centre_mm must be in [-100, 100] mm, got " +
                                                message_number(o.slab_centre_mm));
  }
  validate(o.head);
}

namespace {

// A slab's whole-head volume: the slab's x and y, enough slices for the head (unshrunk along z, its jitter included)
// and the slab's offset, and the first of the slab's slices in it.
struct SlabFrame {
  Geometry whole;
  int64_t z0 = 0;
};
SlabFrame slab_frame(const Geometry& g, const AcquisitionOptions& o) {
  const HeadVariation& v = o.head;
  const double head_semi_z = (kBrainSemi[2] * v.shape[2] + head_thickness_mm(v)) * v.size * 1.03;
  const int64_t head_slices = static_cast<int64_t>(std::ceil(head_semi_z / (kFill * g.voxel_mm[2])));
  const int64_t offset = static_cast<int64_t>(std::ceil(std::fabs(o.slab_centre_mm) / g.voxel_mm[2]));
  SlabFrame f;
  f.whole = g;
  f.whole.dims[2] = std::max(head_slices, g.dims[2] + 2 * offset + 2);
  const double centre = 0.5 * static_cast<double>(f.whole.dims[2] - g.dims[2]) + o.slab_centre_mm / g.voxel_mm[2];
  f.z0 = std::clamp(static_cast<int64_t>(std::nearbyint(centre)), int64_t{0}, f.whole.dims[2] - g.dims[2]);
  return f;
}

// The slices [z0, z0 + nz) of each of count x-fastest volumes of `whole`'s dims, nxy voxels a slice.
template <typename T>
std::vector<T> crop_slices(const std::vector<T>& v, uint64_t nxy, int64_t whole_nz, int64_t z0, int64_t nz, uint64_t count = 1) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(nxy * static_cast<uint64_t>(nz) * count));
  for (uint64_t c = 0; c < count; ++c) {
    const auto first = v.begin() + static_cast<std::ptrdiff_t>(nxy * (c * static_cast<uint64_t>(whole_nz) + static_cast<uint64_t>(z0)));
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(nxy * static_cast<uint64_t>(nz)));
  }
  return out;
}

}  // namespace

uint64_t acquisition_workspace_bytes(const Geometry& g, const AcquisitionOptions& o) {
  validate_geometry(g);
  validate(o);
  const uint64_t echoes = o.te_s.size();
  if (o.slab) {
    // The whole head's acquisition, the slab's copy of its outputs and the slab's own forward model.
    const SlabFrame f = slab_frame(g, o);
    AcquisitionOptions whole = o;
    whole.slab = false;
    const uint64_t n = g.voxel_count();
    return acquisition_workspace_bytes(f.whole, whole) + n * (6 * sizeof(float) + 3) + 2 * echoes * n * sizeof(float) +
           dipole_workspace_bytes(g, o.pad_factor, o.threads);
  }
  const uint64_t n = g.voxel_count();
  // chi, brain_chi, three fields, phase_offset (float); brain_mask, head_mask, tissue (uint8); magnitude and phase
  // (float per echo); chi - air for the forward model; one forward model at a time.
  return n * (6 * sizeof(float) + 3) + 2 * echoes * n * sizeof(float) + n * sizeof(float) +
         dipole_workspace_bytes(g, o.pad_factor, o.threads);
}

PhantomAcquisition make_acquisition(const Geometry& g, const AcquisitionOptions& o) {
  validate_geometry(g);
  validate(o);
  const uint64_t n64 = g.voxel_count();
  const uint64_t echoes = o.te_s.size();
  if (n64 * echoes > std::numeric_limits<size_t>::max() / sizeof(float)) {
    throw Error(ErrorCode::InvalidArgument, "make_acquisition: " + std::to_string(echoes) + " echoes of " +
                                                dims_text(g.dims) + " voxels do not fit in memory: use fewer echoes");
  }
  const size_t n = static_cast<size_t>(n64);
  if (o.slab) {
    const SlabFrame f = slab_frame(g, o);
    AcquisitionOptions whole_options = o;
    whole_options.slab = false;
    PhantomAcquisition whole = make_acquisition(f.whole, whole_options);
    const uint64_t nxy = static_cast<uint64_t>(g.dims[0]) * static_cast<uint64_t>(g.dims[1]);
    const int64_t wz = f.whole.dims[2], z0 = f.z0, nz = g.dims[2];
    PhantomAcquisition acq;
    acq.chi = crop_slices(whole.chi, nxy, wz, z0, nz);
    acq.brain_chi = crop_slices(whole.brain_chi, nxy, wz, z0, nz);
    acq.brain_mask = crop_slices(whole.brain_mask, nxy, wz, z0, nz);
    acq.head_mask = crop_slices(whole.head_mask, nxy, wz, z0, nz);
    acq.tissue = crop_slices(whole.tissue, nxy, wz, z0, nz);
    acq.total_field = crop_slices(whole.total_field, nxy, wz, z0, nz);
    acq.phase_offset = crop_slices(whole.phase_offset, nxy, wz, z0, nz);
    acq.magnitude = crop_slices(whole.magnitude, nxy, wz, z0, nz, echoes);
    acq.phase = crop_slices(whole.phase, nxy, wz, z0, nz, echoes);
    whole = PhantomAcquisition{};
    // The brain inside the slab is the local field's source; everything else is background.
    acq.local_field = forward_field(g, acq.brain_chi, o.pad_factor, o.threads);
    acq.background_field.resize(n);
    for (size_t i = 0; i < n; ++i) acq.background_field[i] = acq.total_field[i] - acq.local_field[i];
    acq.te_s = o.te_s;
    acq.b0_tesla = o.b0_tesla;
    acq.noise_sigma = o.snr > 0.0 ? 1.0 / o.snr : 0.0;
    return acq;
  }
  const Anatomy an = build_anatomy(g, o.seed, o.head);
  const Head head = build_head(g, an, o.seed, o.receive_phase, o.head);
  Phantom brain = make_phantom_chi(g, o.seed, o.head);

  PhantomAcquisition acq;
  acq.te_s = o.te_s;
  acq.b0_tesla = o.b0_tesla;
  acq.noise_sigma = o.snr > 0.0 ? 1.0 / o.snr : 0.0;
  acq.chi.assign(n, 0.0f);
  acq.head_mask.assign(n, 0);
  acq.tissue.assign(n, 0);
  acq.phase_offset.assign(n, 0.0f);
  for_each_voxel_mm(g, [&](size_t idx, const Vec3& p) {
    Tissue t;
    float chi;
    if (brain.mask[idx]) {
      chi = brain.chi[idx];
      t = brain_tissue(chi);
    } else {
      t = head.classify(p);
      chi = t == Tissue::Air ? head_chi::air : t == Tissue::Bone ? head_chi::bone : head_chi::soft_tissue;
    }
    acq.chi[idx] = chi;
    acq.tissue[idx] = static_cast<uint8_t>(t);
    acq.head_mask[idx] = t == Tissue::Air ? 0 : 1;
    acq.phase_offset[idx] = head.offset(p);
  });

  // The head in air: chi relative to air is 0 outside the head, so the zero padding continues the air. The brain's
  // own field is the local field (the inversions' kernel); the background is the field of the head with a water
  // brain, relative to air (a 9.4 ppm edge at the skin and cavities), band limited so that an oblique B0 does not
  // ring it through the brain (forward_field_band_limited); the total is their sum.
  acq.local_field = forward_field(g, brain.chi, o.pad_factor, o.threads);
  {
    std::vector<float> water_brain(n);
    parallel_for(n64, o.threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) water_brain[i] = (brain.mask[i] ? head_chi::soft_tissue : acq.chi[i]) - head_chi::air;
    });
    acq.background_field = forward_field_band_limited(g, water_brain, o.pad_factor, o.threads);
  }
  acq.total_field.resize(n);
  parallel_for(n64, o.threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) acq.total_field[i] = acq.local_field[i] + acq.background_field[i];
  });
  acq.brain_chi = std::move(brain.chi);
  acq.brain_mask = std::move(brain.mask);

  // Signal: per echo, fixed blocks, each block's noise from its own stream (the same bits for any thread count).
  acq.magnitude.resize(n * echoes);
  acq.phase.resize(n * echoes);
  const double sigma = acq.noise_sigma;
  for (uint64_t e = 0; e < echoes; ++e) {
    const double te = o.te_s[e];
    const double rad_per_ppm = kTwoPi * kGammaBarMHzPerT * o.b0_tesla * te;
    float* mag = acq.magnitude.data() + e * n64;
    float* ph = acq.phase.data() + e * n64;
    parallel_for(n64, o.threads, [&](uint64_t begin, uint64_t end) {
      SplitMix64 stream_seed{o.seed ^ 0x5CA77E2ED0153ull ^ (e << 40) ^ (begin / kParallelBlock)};
      Gaussian noise{SplitMix64{stream_seed.next()}};
      for (uint64_t i = begin; i < end; ++i) {
        const TissueSignal ts = kTissueSignal[acq.tissue[i]];
        const double m = ts.m0 > 0.0 ? ts.m0 * det_exp(-te / ts.t2star_s) : 0.0;
        double phi = static_cast<double>(acq.phase_offset[i]) + rad_per_ppm * static_cast<double>(acq.total_field[i]);
        double mo = m;
        if (sigma > 0.0) {
          const double re = m + sigma * noise.next();  // noise in the signal's frame: circular, so equally valid
          const double im = sigma * noise.next();
          mo = std::sqrt(re * re + im * im);
          phi += det_atan2(im, re);
        }
        mag[i] = static_cast<float>(mo);
        ph[i] = wrap_phase(phi);
      }
    });
  }
  return acq;
}

}  // namespace tessera
